"""The install-time GPU check: can this machine's NVIDIA driver and GPUs run a CUDA box?  Pure.

``scrollcase unpack`` runs it before extracting anything; a host app implements the same rule (see
docs/archive.md, "Install-time GPU check").  Inputs: the release manifest's target,
``compatibility.minNvidiaDriverVersion`` and ``gpu`` evidence, and the host's GPUs
(:func:`scrollcase.targets.hostgpu.gather_gpus`).  The rule, for a GPU of compute capability X.Y:

* SASS ``sm_AB`` runs when A == X and B <= Y; an arch-specific ``sm_ABa`` only when AB == XY exactly
  (a family-specific ``sm_ABf`` follows the plain rule);
* PTX ``compute_AB`` runs when AB <= XY: the driver JIT-compiles it (a slower first start: a warning);
* the box is refused only when *no* GPU can run it; CPU and metal boxes are not checked at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from scrollcase.errors import Problem
from scrollcase.targets.evidence import GpuEvidence
from scrollcase.targets.hostgpu import Gpu, GpuFacts, dotted_key

if TYPE_CHECKING:
    from scrollcase.targets.vocabulary import TargetSpec

Runs = Literal["sass", "ptx", "no", "unknown"]
Status = Literal["pass", "warn", "fail", "skip"]
DRIVER_KEY = "compatibility.minNvidiaDriverVersion"
ARCH_KEY = "gpu.framework.archList"
SKIP_FIX = "pass --skip-gpu-check to install anyway"
_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")
_CAP = re.compile(r"^(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Arch:
    """One compiled architecture: ``sm_86`` is SASS for 8.6, ``compute_90`` PTX for 9.0, ``sm_90a`` 9.0 only."""

    text: str
    ptx: bool
    major: int
    minor: int
    suffix: str

    def runs_on(self, cap: tuple[int, int]) -> bool:
        if self.suffix not in ("", "f"):  # arch-specific (sm_90a, compute_90a): that capability only
            return (self.major, self.minor) == cap
        if self.ptx and not self.suffix:
            return (self.major, self.minor) <= cap
        return self.major == cap[0] and self.minor <= cap[1]


@dataclass(frozen=True)
class GpuVerdict:
    gpu: Gpu
    runs: Runs
    arch: str | None = None  # the compiled architecture it would use

    def to_json(self) -> dict[str, object]:
        return {**self.gpu.to_json(), "runs": self.runs, "arch": self.arch}


@dataclass(frozen=True)
class GpuCheckResult:
    status: Status
    summary: str
    problems: tuple[Problem, ...] = ()
    gpus: tuple[GpuVerdict, ...] = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "summary": self.summary,
            "gpus": [v.to_json() for v in self.gpus],
            "problems": [p.to_json() for p in self.problems],
        }


def parse_arch(text: str) -> Arch | None:
    """``sm_86`` -> Arch(sass 8.6); ``compute_100`` -> Arch(ptx 10.0); None for anything else."""
    found = _ARCH.match(text.strip())
    if found is None:
        return None
    kind, digits, suffix = found.groups()
    if len(digits) < 2:
        return None
    return Arch(text.strip(), kind == "compute", int(digits[:-1]), int(digits[-1]), suffix)


def parse_cap(text: str | None) -> tuple[int, int] | None:
    found = _CAP.match(text.strip()) if text else None
    return (int(found.group(1)), int(found.group(2))) if found else None


def gpu_verdict(gpu: Gpu, archs: Sequence[Arch]) -> GpuVerdict:
    """Which compiled architecture ``gpu`` would run: the newest matching SASS, else the newest PTX."""
    cap = parse_cap(gpu.compute_cap)
    if cap is None:
        return GpuVerdict(gpu, "unknown")
    newest = sorted(archs, key=lambda a: (a.major, a.minor), reverse=True)
    sass = [a for a in newest if not a.ptx and a.runs_on(cap)]
    ptx = [a for a in newest if a.ptx and a.runs_on(cap)]
    if sass:
        return GpuVerdict(gpu, "sass", sass[0].text)
    return GpuVerdict(gpu, "ptx", ptx[0].text) if ptx else GpuVerdict(gpu, "no")


def gpu_check(
    target: TargetSpec, min_driver: str | None, evidence: GpuEvidence | None, host: GpuFacts, file: str | None = None
) -> GpuCheckResult:
    """Every finding about running a box for ``target`` on the machine ``host`` describes."""
    if not target.is_cuda:
        return GpuCheckResult("skip", f"not a CUDA target ({target.target_id}): no GPU check")
    if host.error or not host.gpus:
        return GpuCheckResult("fail", "no NVIDIA GPU", (_no_gpu(target, host, file),))
    problems = _driver_problems(target, min_driver, host.gpus, file)
    verdicts, arch_problems = _arch_problems(target, evidence, host.gpus, file)
    found = (*problems, *arch_problems)
    return GpuCheckResult(_status(found), _summary(host.gpus, verdicts), found, verdicts)


def _status(problems: Sequence[Problem]) -> Status:
    severities = {p.severity for p in problems}
    return "fail" if "error" in severities else "warn" if "warning" in severities else "pass"


def _summary(gpus: Sequence[Gpu], verdicts: Sequence[GpuVerdict]) -> str:
    said = {"sass": "runs {}", "ptx": "runs {} (PTX, JIT-compiled)", "no": "cannot run it", "unknown": "unchecked"}
    parts = [f"{v.gpu.label()} {said[v.runs].format(v.arch)}" for v in verdicts] or [g.label() for g in gpus]
    return f"driver {gpus[0].driver_version}; " + "; ".join(parts)


def _fix(*first: str) -> str:
    return "; ".join((*first, "or use the box built for another target (e.g. the cpu box)", f"or {SKIP_FIX}"))


def _no_gpu(target: TargetSpec, host: GpuFacts, file: str | None) -> Problem:
    why = host.error or "nvidia-smi listed no GPU"
    return Problem(
        message=f"the box targets {target.target_id} and needs an NVIDIA GPU and driver, but none was found: {why}",
        file=file,
        key="target",
        value=target.target_id,
        fix=_fix("install the NVIDIA driver (nvidia-smi must list the GPU)"),
    )


def _driver_problems(
    target: TargetSpec, min_driver: str | None, gpus: Sequence[Gpu], file: str | None
) -> list[Problem]:
    # Every GPU of a machine runs under the same driver: the oldest version listed stands for all.
    driver = min((g.driver_version for g in gpus), key=dotted_key)
    if min_driver is None:
        return [
            Problem(
                message=f"the release names no minNvidiaDriverVersion: driver {driver} not checked",
                file=file,
                key=DRIVER_KEY,
                severity="notice",
            )
        ]
    if dotted_key(driver) >= dotted_key(min_driver):
        return []
    return [
        Problem(
            message=f"the NVIDIA driver {driver} is older than minNvidiaDriverVersion {min_driver}, which the "
            f"{target.target_id} box needs",
            file=file,
            key=DRIVER_KEY,
            value=driver,
            fix=_fix(f"update the NVIDIA driver to {min_driver} or newer"),
        )
    ]


def _arch_problems(
    target: TargetSpec, evidence: GpuEvidence | None, gpus: Sequence[Gpu], file: str | None
) -> tuple[tuple[GpuVerdict, ...], list[Problem]]:
    names = evidence.framework.archList if evidence and evidence.framework else []
    archs = [a for a in (parse_arch(n) for n in names) if a is not None]
    if not archs:
        why = (
            "the release manifest has no gpu evidence (built by an older scrollcase)"
            if evidence is None
            else "the box's GPU evidence lists no compiled architectures (evidence from its files only)"
        )
        return (), [
            Problem(
                message=f"{why}: the GPUs' compute capability is not checked",
                file=file,
                key="gpu" if evidence is None else ARCH_KEY,
                severity="notice",
            )
        ]
    verdicts = tuple(gpu_verdict(g, archs) for g in gpus)
    return verdicts, _verdict_problems(target, verdicts, names, file)


def _verdict_problems(
    target: TargetSpec, verdicts: Sequence[GpuVerdict], names: Sequence[str], file: str | None
) -> list[Problem]:
    listed = " ".join(names)
    can = [v for v in verdicts if v.runs in ("sass", "ptx")]
    out = [_ptx_warning(v, file, listed) for v in verdicts if v.runs == "ptx"]
    unknown = [v for v in verdicts if v.runs == "unknown"]
    if unknown:
        out.append(
            Problem(
                message=f"nvidia-smi gave no compute capability for "
                f"{', '.join(v.gpu.label() for v in unknown)} (a driver before 510?): "
                "not checked against the compiled architectures",
                file=file,
                key=ARCH_KEY,
                value=listed,
                severity="notice",
            )
        )
    cannot = [v for v in verdicts if v.runs == "no"]
    if cannot and not can and not unknown:
        return [_none_can_run(target, cannot, listed, file)]
    if cannot:
        users = f"{', '.join(v.gpu.label() for v in can)} can" if can else "the GPUs of unknown capability may"
        out.append(
            Problem(
                message=f"{', '.join(v.gpu.label() for v in cannot)} cannot run the box's compiled architectures; "
                f"{users}",
                file=file,
                key=ARCH_KEY,
                value=listed,
                severity="warning",
                fix="make the host app use a GPU that can (CUDA_VISIBLE_DEVICES)",
            )
        )
    return out


def _ptx_warning(v: GpuVerdict, file: str | None, listed: str) -> Problem:
    return Problem(
        message=f"{v.gpu.label()} has no matching SASS and runs the box through PTX {v.arch}: the driver "
        "JIT-compiles the kernels, so the first start is slower until its compute cache is warm",
        file=file,
        key=ARCH_KEY,
        value=listed,
        severity="warning",
        fix="a box whose archList includes SASS for this GPU starts faster",
    )


def _none_can_run(target: TargetSpec, cannot: Sequence[GpuVerdict], listed: str, file: str | None) -> Problem:
    caps = sorted({v.gpu.compute_cap or "" for v in cannot})
    wanted = ", ".join(f"sm_{c.replace('.', '')}" for c in caps)
    return Problem(
        message=f"no GPU on this machine can run the {target.target_id} box: "
        f"{', '.join(v.gpu.label() for v in cannot)} matches none of the compiled architectures "
        "(SASS sm_XY runs on the same major X and minor >= Y; PTX compute_XY on capability >= X.Y)",
        file=file,
        key=ARCH_KEY,
        value=listed,
        fix=_fix(f"use a box built with an archList that includes {wanted} (or PTX for an older capability)"),
    )
