"""Can this machine build a recipe's target?  Facts are gathered by injected probes (I/O); the
verdicts come from :func:`host_checks`, a pure function tests drive with made-up facts.

Checks: native build (no cross-building), the target accelerator's driver check (targets/<accelerator>.py:
for CUDA, a driver >= minNvidiaDriverVersion), free disk space, and the pixi version when a ``pixi``
binary is on PATH.  The GPUs are probed by :func:`scrollcase.targets.hostgpu.gather_gpus`, which also
feeds ``scrollcase unpack``'s GPU check.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

from scrollcase.io import proc
from scrollcase.recipe.model import Recipe
from scrollcase.targets.base import Accelerator
from scrollcase.targets.hostgpu import Gpu
from scrollcase.targets.vocabulary import host_platform

Status = Literal["pass", "warn", "fail", "skip"]
GIB = 1024**3


@dataclass(frozen=True)
class HostCheck:
    name: str
    status: Status
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"name": self.name, "status": self.status, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        return out


@dataclass(frozen=True)
class HostFacts:
    """What the probes found.  ``None`` means "could not be found"; ``*_error`` says why."""

    platform: str
    arch: str
    driver_versions: tuple[str, ...] = ()
    driver_error: str | None = None
    gpus: tuple[Gpu, ...] = ()
    free_bytes: int | None = None
    disk_path: str = "."
    pixi_version: str | None = None
    pixi_error: str | None = None
    pixi_found: bool = False


@dataclass(frozen=True)
class HostProbes:
    """The side effects, injectable: run a command, find a binary, measure free disk space."""

    run: Callable[[Sequence[str]], proc.RunResult] = field(default=lambda argv: proc.run(argv, timeout=30))
    which: Callable[[str], str | None] = shutil.which
    free_bytes: Callable[[Path], int] = lambda path: shutil.disk_usage(path).free
    platform: Callable[[], tuple[str, str]] = host_platform


def _pixi(probes: HostProbes) -> tuple[bool, str | None, str | None]:
    pixi = probes.which("pixi")
    if pixi is None:
        return False, None, None
    result = probes.run([pixi, "--version"])
    found = re.search(r"(\d+\.\d+\.\d+\S*)", result.stdout) if result.ok else None
    if found is None:
        return True, None, (result.stderr or result.stdout).strip()[:200] or "no version in its output"
    return True, found.group(1), None


def gather_facts(probes: HostProbes, workdir: Path, accelerator: Accelerator) -> HostFacts:
    """Run the probes (the I/O half of doctor's host checks); the GPUs as the target's accelerator asks."""
    plat, arch = probes.platform()
    gpu_facts = accelerator.probe_gpus(probes)
    pixi_found, pixi_version, pixi_error = _pixi(probes)
    try:
        free: int | None = probes.free_bytes(workdir)
    except OSError:
        free = None
    return HostFacts(
        platform=plat,
        arch=arch,
        driver_versions=tuple(gpu.driver_version for gpu in gpu_facts.gpus),
        driver_error=gpu_facts.error,
        gpus=gpu_facts.gpus,
        free_bytes=free,
        disk_path=str(workdir),
        pixi_version=pixi_version,
        pixi_error=pixi_error,
        pixi_found=pixi_found,
    )


def native_check(facts: HostFacts, recipe: Recipe) -> HostCheck:
    want = (recipe.target.platform, recipe.target.arch)
    if (facts.platform, facts.arch) == want:
        return HostCheck("native", "pass", f"this machine is {facts.platform}-{facts.arch}, like the target")
    return HostCheck(
        "native",
        "fail",
        f"this machine is {facts.platform}-{facts.arch} but the target is {want[0]}-{want[1]}; "
        "boxes are built natively (the self-test runs the box's own interpreter)",
        f"build {recipe.target_id} on a machine (or runner) that is {want[0]}-{want[1]}",
    )


def driver_check(facts: HostFacts, recipe: Recipe) -> HostCheck:
    """The target accelerator's check of this machine's GPU driver (a skip for accelerators without one)."""
    minimum = recipe.compatibility.minNvidiaDriverVersion
    name, status, message, fix = recipe.target.spec.kind.driver_check(
        minimum, facts.driver_versions, facts.driver_error
    )
    return HostCheck(name, cast(Status, status), message, fix)


def disk_check(facts: HostFacts, min_free_gb: float) -> HostCheck:
    if facts.free_bytes is None:
        return HostCheck(
            "disk",
            "warn",
            f"could not measure free space at {facts.disk_path}",
            "make sure the build folder has room for the environment and archive",
        )
    free_gb = facts.free_bytes / GIB
    if free_gb < min_free_gb:
        return HostCheck(
            "disk",
            "warn",
            f"{free_gb:.1f} GiB free at {facts.disk_path}, under {min_free_gb:g} GiB",
            f"free at least {min_free_gb:g} GiB (CUDA environments are large) or build elsewhere",
        )
    return HostCheck("disk", "pass", f"{free_gb:.1f} GiB free at {facts.disk_path}")


def pixi_check(facts: HostFacts, recipe: Recipe) -> HostCheck:
    if not facts.pixi_found:
        return HostCheck("pixi", "skip", "no pixi on PATH (scrollcase solves and installs by itself)")
    if facts.pixi_version is None:
        return HostCheck(
            "pixi",
            "warn",
            f"pixi is on PATH but its version is unknown: {facts.pixi_error}",
            "reinstall pixi or remove it from PATH",
        )
    if facts.pixi_version != recipe.pixiVersion:
        return HostCheck(
            "pixi",
            "warn",
            f"pixi {facts.pixi_version} on PATH, the recipe says {recipe.pixiVersion}",
            f"install pixi {recipe.pixiVersion} (or update pixiVersion) so `pixi lock` matches",
        )
    return HostCheck("pixi", "pass", f"pixi {facts.pixi_version}")


def default_min_free_gb(recipe: Recipe) -> float:
    return recipe.target.spec.kind.build_disk_gb


def host_checks(facts: HostFacts, recipe: Recipe, min_free_gb: float | None = None) -> list[HostCheck]:
    """Every host verdict for building ``recipe`` on the machine ``facts`` describe (pure)."""
    threshold = default_min_free_gb(recipe) if min_free_gb is None else min_free_gb
    return [
        native_check(facts, recipe),
        driver_check(facts, recipe),
        disk_check(facts, threshold),
        pixi_check(facts, recipe),
    ]
