"""The target registry: which (platform, arch, accelerator) boxes exist and what they imply.

A target decides the conda subdir a recipe is solved for, the virtual packages the solver may
assume, the target ID that names the box, and whether this machine can build it natively.
"""

from __future__ import annotations

import platform as _platform
import re
import sys
from dataclasses import dataclass
from typing import Literal

Platform = Literal["linux", "windows", "osx"]
Arch = Literal["x86_64", "aarch64", "arm64"]
Accelerator = Literal["cpu", "cuda", "metal"]

PLATFORMS: tuple[str, ...] = ("linux", "windows", "osx")
ARCHES: tuple[str, ...] = ("x86_64", "aarch64", "arm64")
ACCELERATORS: tuple[str, ...] = ("cpu", "cuda", "metal")

SUBDIRS: dict[tuple[str, str], str] = {
    ("linux", "x86_64"): "linux-64",
    ("linux", "aarch64"): "linux-aarch64",
    ("windows", "x86_64"): "win-64",
    ("osx", "arm64"): "osx-arm64",
    ("osx", "x86_64"): "osx-64",
}

# (platform, arch) -> accelerators a box may target there.
SUPPORTED: dict[tuple[str, str], tuple[str, ...]] = {
    ("linux", "x86_64"): ("cpu", "cuda"),
    ("linux", "aarch64"): ("cpu", "cuda"),
    ("windows", "x86_64"): ("cpu", "cuda"),
    ("osx", "arm64"): ("cpu", "metal"),
    ("osx", "x86_64"): ("cpu",),
}

CUDA_VERSION_RE = re.compile(r"^\d+\.\d+$")

# glibc the solver may assume for Linux targets: the manylinux_2_28 baseline most CUDA stacks need.
DEFAULT_GLIBC = "2.28"
DEFAULT_MACOS = {"arm64": "11.0", "x86_64": "10.15"}


@dataclass(frozen=True)
class TargetSpec:
    """A validated target.  Construct through :func:`make_target`, :func:`parse_target_id` or the recipe."""

    platform: str
    arch: str
    accelerator: str
    cuda_version: str | None = None

    @property
    def subdir(self) -> str:
        return SUBDIRS[(self.platform, self.arch)]

    @property
    def target_id(self) -> str:
        return target_id(self.platform, self.arch, self.accelerator, self.cuda_version)

    @property
    def is_cuda(self) -> bool:
        return self.accelerator == "cuda"

    @property
    def is_windows(self) -> bool:
        return self.platform == "windows"

    def virtual_packages(self, glibc: str = DEFAULT_GLIBC) -> dict[str, str]:
        """Virtual packages (name -> version, ``"0"`` when unversioned) the solver may assume."""
        packages: dict[str, str] = {}
        if self.platform == "linux":
            packages.update({"__unix": "0", "__linux": "5.10", "__glibc": glibc})
        elif self.platform == "osx":
            packages.update({"__unix": "0", "__osx": DEFAULT_MACOS[self.arch]})
        else:
            packages["__win"] = "0"
        if self.cuda_version:
            packages["__cuda"] = self.cuda_version
        return packages


def target_id(platform: str, arch: str, accelerator: str, cuda_version: str | None = None) -> str:
    suffix = f"cuda{cuda_version}" if accelerator == "cuda" and cuda_version else accelerator
    return f"{platform}-{arch}-{suffix}"


def supported_pairs() -> str:
    return ", ".join(f"{p}-{a}" for p, a in SUPPORTED)


def target_problem(platform: str, arch: str, accelerator: str, cuda_version: str | None) -> str | None:
    """Why this combination is not a supported target, or None when it is."""
    if platform == "osx" and accelerator == "cuda":
        return 'macOS has no CUDA target — use metal (accelerator "metal" on arch "arm64")'
    if (platform, arch) not in SUPPORTED:
        return f"{platform}-{arch} is not a supported platform/arch pair (supported: {supported_pairs()})"
    allowed = SUPPORTED[(platform, arch)]
    if accelerator not in allowed:
        choices = ", ".join(allowed)
        return f"accelerator {accelerator!r} is not available on {platform}-{arch} (use one of: {choices})"
    if accelerator == "cuda" and not cuda_version:
        return 'cudaVersion is required for a CUDA target (major.minor, e.g. "12.4")'
    if accelerator == "cuda" and cuda_version and not CUDA_VERSION_RE.fullmatch(cuda_version):
        return f'cudaVersion {cuda_version!r} must be major.minor, e.g. "12.4"'
    if accelerator != "cuda" and cuda_version:
        return f"cudaVersion is only allowed for CUDA targets, not {accelerator!r}: remove it"
    return None


def make_target(platform: str, arch: str, accelerator: str, cuda_version: str | None = None) -> TargetSpec:
    """A TargetSpec for a supported combination; raises ValueError with the reason otherwise."""
    problem = target_problem(platform, arch, accelerator, cuda_version)
    if problem:
        raise ValueError(problem)
    return TargetSpec(platform, arch, accelerator, cuda_version)


def all_targets(cuda_versions: tuple[str, ...] = ("12.4",)) -> list[TargetSpec]:
    """Every supported target, CUDA ones expanded over ``cuda_versions``."""
    out: list[TargetSpec] = []
    for (plat, arch), accels in SUPPORTED.items():
        for accel in accels:
            if accel == "cuda":
                out.extend(TargetSpec(plat, arch, accel, v) for v in cuda_versions)
            else:
                out.append(TargetSpec(plat, arch, accel))
    return out


def parse_target_id(text: str) -> TargetSpec:
    """``linux-x86_64-cuda12.4`` -> TargetSpec; raises ValueError with the reason."""
    parts = text.split("-")
    if len(parts) != 3:
        raise ValueError(
            f"target ID {text!r} must look like <platform>-<arch>-<accelerator>, e.g. linux-x86_64-cuda12.4"
        )
    plat, arch, accel = parts
    cuda: str | None = None
    if accel.startswith("cuda"):
        cuda, accel = accel[4:] or None, "cuda"
    return make_target(plat, arch, accel, cuda)


def split_recipe_id(recipe_id: str) -> tuple[str, TargetSpec] | None:
    """``tiny-mlp-linux-x86_64-cpu`` -> ("tiny-mlp", target); None when no target ID ends it."""
    parts = recipe_id.split("-")
    if len(parts) < 4:
        return None
    try:
        spec = parse_target_id("-".join(parts[-3:]))
    except ValueError:
        return None
    return "-".join(parts[:-3]), spec


_SYS_PLATFORMS = {"linux": "linux", "win32": "windows", "cygwin": "windows", "darwin": "osx"}
_MACHINES = {"amd64": "x86_64", "x64": "x86_64", "x86_64": "x86_64", "arm64": "arm64", "aarch64": "aarch64"}


def host_platform(sys_platform: str | None = None, machine: str | None = None) -> tuple[str, str]:
    """(platform, arch) of this machine (or of the given ``sys.platform``/``machine()``) in our vocabulary."""
    raw_platform = sys.platform if sys_platform is None else sys_platform
    raw_machine = (_platform.machine() if machine is None else machine).lower()
    plat = _SYS_PLATFORMS.get(raw_platform, raw_platform)
    arch = _MACHINES.get(raw_machine, raw_machine)
    # Apple calls it arm64 and Linux calls it aarch64; the registry follows each OS's name.
    if plat == "osx" and arch == "aarch64":
        arch = "arm64"
    if plat in ("linux", "windows") and arch == "arm64":
        arch = "aarch64"
    return plat, arch
