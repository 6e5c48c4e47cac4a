"""The CPU accelerator: any machine of the target's platform, and no CUDA anywhere in the box.

Its lock rules (shared by metal, whose torch is a CPU build that also drives Apple's GPU): the locked
torch is not a CUDA build and no NVIDIA CUDA wheels are locked (PyPI's default Linux torch pulls them).
Nothing to probe on the host.  Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scrollcase.errors import Problem
from scrollcase.targets import evidence as evidence_mod
from scrollcase.targets.base import LockContext, located, torch_problem
from scrollcase.targets.classify import (
    CUDA_RUNTIME_WHEELS,
    PackageRecord,
    TorchBuild,
    cuda_library_wheels,
    pytorch_index,
)
from scrollcase.targets.evidence import GpuEvidence
from scrollcase.targets.gpucheck import GpuCheckResult
from scrollcase.targets.hostgpu import GpuFacts

if TYPE_CHECKING:
    from scrollcase.targets.vocabulary import TargetSpec


def cpu_problems(ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild) -> list[Problem]:
    """The lock of a target without CUDA holds no CUDA build of torch and no NVIDIA CUDA wheels."""
    cpu_index = f'torch = {{ version = "*", index = "{pytorch_index(None)}" }}'
    if torch.provider == "pypi":
        fix = f"take torch from PyTorch's CPU index in [pypi-dependencies]: {cpu_index}, then " + ctx.relock
    else:
        fix = 'pin a CPU build in pixi.toml, e.g. pytorch = { version = "2.*", build = "cpu*" }, then ' + ctx.relock
    problems: list[Problem] = []
    if torch.cuda_version:
        problems.append(
            torch_problem(
                ctx,
                torch,
                f"{ctx.target_id} is not a CUDA target but the lock holds a CUDA "
                f"{torch.cuda_version} build of torch ({torch.evidence})",
                fix,
            )
        )
    return problems + _cuda_wheel_problems(ctx, packages, cpu_index)


def _cuda_wheel_problems(ctx: LockContext, packages: Sequence[PackageRecord], cpu_index: str) -> list[Problem]:
    """A box that is not for CUDA holds no NVIDIA CUDA wheels (PyPI's default Linux torch pulls them)."""
    wheels = cuda_library_wheels(packages)
    if not wheels:
        return []
    shown = ", ".join(f"{w.name} {w.version}" for w in wheels)
    return [
        Problem(
            message=f"{ctx.target_id} is not a CUDA target but the lock holds {len(wheels)} NVIDIA CUDA "
            f"wheel{'s' if len(wheels) > 1 else ''}: {shown} — CUDA packages under a {ctx.accelerator} name",
            file=ctx.file,
            line=located(ctx, wheels[0]),
            key=wheels[0].name,
            value=shown,
            fix=f"PyPI's default Linux torch is a CUDA build that pulls these: take torch from PyTorch's CPU index "
            f"in [pypi-dependencies] ({cpu_index}); if another package pulls them, use its CPU variant; then "
            + ctx.relock,
        )
    ]


@dataclass(frozen=True)
class Cpu:
    """A GPU-less accelerator; metal and a new accelerator without a runtime of its own reuse it."""

    name: str = "cpu"
    title: str = "CPU"
    aliases: tuple[str, ...] = ()
    version_field: str | None = None
    platforms: tuple[tuple[str, str], ...] = (
        ("linux", "x86_64"),
        ("linux", "aarch64"),
        ("windows", "x86_64"),
        ("osx", "arm64"),
        ("osx", "x86_64"),
    )
    rank: int = 0
    uses_gpu: bool = False
    build_disk_gb: float = 5.0
    device_env: dict[str, str] = field(default_factory=dict)
    runners: dict[str, list[str]] = field(
        default_factory=lambda: {
            "linux-x86_64-cpu": ["ubuntu-24.04"],
            "linux-aarch64-cpu": ["ubuntu-24.04-arm"],
            "windows-x86_64-cpu": ["windows-2022"],
            "osx-arm64-*": ["macos-15"],
            "osx-x86_64-cpu": ["macos-15-intel"],
        }
    )

    def target_suffix(self, version: str | None) -> str:
        return self.name

    def virtual_packages(self, version: str | None) -> dict[str, str]:
        return {}

    def unavailable(self, platform: str) -> tuple[str, str] | None:
        return None

    def version_fix(self) -> str:
        return ""

    def pypi_constraints(self, version: str | None) -> tuple[str, ...]:
        return tuple(f"{name}<0" for name in CUDA_RUNTIME_WHEELS)  # uv: none at all

    def resolve_hint(self, target_id: str, version: str | None) -> tuple[str, str]:
        return (
            f"{target_id} is not a CUDA target, so no nvidia-cuda-runtime wheel may be locked",
            "; for torch on Linux use the index https://download.pytorch.org/whl/cpu",
        )

    def lock_problems(self, ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild) -> list[Problem]:
        return cpu_problems(ctx, packages, torch)

    def evidence_problems(self, target: TargetSpec, evidence: GpuEvidence, where: str = "box") -> list[Problem]:
        return evidence_mod.evidence_problems(target, evidence, where)

    def gpu_check(
        self, target: TargetSpec, min_driver: str | None, evidence: GpuEvidence | None, host: GpuFacts
    ) -> GpuCheckResult | None:
        return None

    def driver_check(
        self, min_driver: str | None, versions: Sequence[str], error: str | None
    ) -> tuple[str, str, str, str | None]:
        # The check keeps its name on every target so doctor's report has the same rows.
        return "nvidia-driver", "skip", f"not a CUDA target ({self.name})", None


CPU = Cpu()
