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
from scrollcase.targets.base import LockContext, ManifestView, index_problem, located, torch_problem
from scrollcase.targets.classify import (
    CUDA_RUNTIME_WHEELS,
    CUDA_VERSION_PACKAGE,
    SYSTEM_REQUIREMENT,
    PackageRecord,
    TorchBuild,
    cuda_library_wheels,
    pytorch_index,
)
from scrollcase.targets.evidence import GpuEvidence
from scrollcase.targets.gpucheck import GpuCheckResult
from scrollcase.targets.hostgpu import CommandProbes, GpuFacts

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


def no_cuda_manifest_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    """pixi.toml of a target without CUDA: no CUDA system requirement or cuda-version pin, no CUDA build of
    pytorch, no pytorch-gpu, and no PyTorch CUDA index for a PyPI torch."""
    out = []
    if manifest.platform_requirement is not None:
        shown = f"{{platform={spec.subdir}, cuda={manifest.platform_requirement}}}"
        out.append(
            manifest.problem(
                "workspace.platforms",
                "workspace",
                f"a {spec.accelerator} target must not declare a CUDA system requirement",
                [shown],
                f'use platforms = ["{spec.subdir}"] without cuda',
            )
        )
    return (
        out + _requirement_problems(manifest, spec) + _torch_problems(manifest, spec) + _index_problems(manifest, spec)
    )


def _requirement_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    legacy = manifest.system_requirements.get(SYSTEM_REQUIREMENT)
    pin = manifest.dependencies_for(spec.subdir).get(CUDA_VERSION_PACKAGE)
    out = []
    if legacy is not None:
        out.append(
            manifest.problem(
                "system-requirements.cuda",
                "system-requirements",
                f"a {spec.accelerator} target must not require CUDA",
                legacy,
                "remove cuda from [system-requirements]",
            )
        )
    if pin is not None:
        out.append(
            manifest.dep_problem(
                pin, f"a {spec.accelerator} target must not pin cuda-version", "remove the cuda-version dependency"
            )
        )
    return out


def _torch_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    deps = manifest.dependencies_for(spec.subdir)
    torch = deps.get("pytorch")
    out = []
    if torch is not None and "cuda" in (torch.build or ""):
        out.append(
            manifest.dep_problem(
                torch,
                f"a {spec.accelerator} target must not use a CUDA build of pytorch",
                f'pytorch = {{ version = "{torch.version or "2.*"}", build = "cpu*" }} (or no build pin)',
            )
        )
    if "pytorch-gpu" in deps:
        out.append(
            manifest.dep_problem(
                deps["pytorch-gpu"],
                f"pytorch-gpu is CUDA-only; this is a {spec.accelerator} target",
                "use pytorch (or pytorch-cpu) instead",
            )
        )
    return out


def _index_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    torch = manifest.pypi_dependencies_for(spec.subdir).get("torch")
    if torch is None or torch.source is not None or torch.index is None:
        return []
    if torch.index.rstrip("/").rsplit("/", 1)[-1].startswith("cu"):
        return [index_problem(manifest, torch, spec.target_id, "use the cpu index (or PyPI for macOS)")]
    return []


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

    def manifest_problems(self, manifest: ManifestView, target: TargetSpec) -> list[Problem]:
        return no_cuda_manifest_problems(manifest, target)

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
        self,
        target: TargetSpec,
        min_driver: str | None,
        evidence: GpuEvidence | None,
        host: GpuFacts,
        file: str | None = None,
    ) -> GpuCheckResult | None:
        return None

    def probe_gpus(self, probes: CommandProbes) -> GpuFacts:
        return GpuFacts()  # nothing to ask the host

    def driver_check(
        self, min_driver: str | None, versions: Sequence[str], error: str | None
    ) -> tuple[str, str, str, str | None]:
        # The check keeps its name on every target so doctor's report has the same rows.
        return "nvidia-driver", "skip", f"not a CUDA target ({self.name})", None


CPU = Cpu()
