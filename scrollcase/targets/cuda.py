"""The CUDA accelerator: NVIDIA GPUs, a CUDA runtime of exactly the recipe's ``cudaVersion``.

Its lock rules: the locked torch is a GPU build for that CUDA (a conda ``cuda*`` build beside a
``cuda-version`` record of it, or a PyPI wheel for it beside its ``nvidia-cuda-runtime`` wheels), and a
box without torch still locks that CUDA.  Its host checks ask ``nvidia-smi`` (targets/hostgpu.py) and
compare the driver and the GPUs' compute capability (targets/gpucheck.py).  Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scrollcase.errors import Problem
from scrollcase.targets import evidence as evidence_mod
from scrollcase.targets.base import (
    LockContext,
    ManifestDependency,
    ManifestPypiDependency,
    ManifestView,
    index_problem,
    located,
    package_problem,
    torch_problem,
)
from scrollcase.targets.classify import (
    CUDA_RUNTIME_WHEELS,
    CUDA_VERSION_PACKAGE,
    SYSTEM_REQUIREMENT,
    PackageRecord,
    TorchBuild,
    cuda_runtime_wheel,
    cuda_runtime_wheels,
    cuda_tag,
    cuda_version_record,
    major_minor,
    pypi_torch_releases,
    pytorch_index,
)
from scrollcase.targets.evidence import GpuEvidence
from scrollcase.targets.gpucheck import GpuCheckResult, gpu_check
from scrollcase.targets.hostgpu import CommandProbes, GpuFacts, dotted_key, gather_gpus

if TYPE_CHECKING:
    from scrollcase.targets.vocabulary import TargetSpec

DRIVER_CHECK = "nvidia-driver"


def conda_cuda_fix(cuda: str, relock: str) -> str:
    return (
        f'in pixi.toml pin pytorch = {{ version = "2.*", build = "cuda*" }} and '
        f'cuda-version = "{cuda}.*", declare [system-requirements] cuda = "{cuda}", then ' + relock
    )


def pypi_torch_advice(cuda: str) -> str:
    """How to get a PyPI torch built for ``cuda``: a release whose default wheels use it, or PyTorch's index."""
    releases = pypi_torch_releases(cuda)
    if not releases:
        return (
            f"PyPI's default index has no torch built for CUDA {cuda}; take torch from PyTorch's index: "
            f'torch = {{ version = "*", index = "{pytorch_index(cuda)}" }}'
        )
    last_major, last_minor = releases[-1].split(".")
    pin = f">={releases[0]},<{last_major}.{int(last_minor) + 1}"
    names = releases[0] if len(releases) == 1 else f"{', '.join(releases[:-1])} or {releases[-1]}"
    return (
        f"in [pypi-dependencies] pin torch to a release whose PyPI wheels are built for CUDA {cuda} "
        f'(torch {names}): torch = "{pin}", or take it from PyTorch\'s index for CUDA {cuda}: '
        f'torch = {{ version = "{pin}", index = "{pytorch_index(cuda)}" }}'
    )


def cuda_problems(ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild, cuda: str) -> list[Problem]:
    pin_fix = conda_cuda_fix(cuda, ctx.relock)
    if torch.provider is None:
        return _cuda_without_torch(ctx, packages, cuda, pin_fix)
    if torch.provider == "pypi":
        return _pypi_cuda_problems(ctx, packages, torch, cuda)
    if torch.accelerator != f"cuda{cuda}":
        found = "a CPU build" if torch.accelerator == "cpu" else f"a build for {torch.accelerator}"
        return [
            torch_problem(
                ctx,
                torch,
                f"{ctx.target_id} needs a GPU build of torch for CUDA {cuda}, but the lock holds "
                f"{found} ({torch.evidence}) — CPU packages under a CUDA name",
                pin_fix,
            )
        ]
    return _cuda_version_record_problems(ctx, packages, torch, cuda, pin_fix)


def _pypi_cuda_problems(
    ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild, cuda: str
) -> list[Problem]:
    """A PyPI torch for exactly the target's CUDA, beside CUDA runtime wheels of that CUDA only."""
    fix = pypi_torch_advice(cuda) + ", then " + ctx.relock
    problems: list[Problem] = []
    if torch.accelerator != f"cuda{cuda}":
        cpu = torch.accelerator == "cpu"
        found = "a CPU build" if cpu else f"a build for {torch.accelerator}"
        under = "CPU packages" if cpu else f"{torch.accelerator} packages"
        problems.append(
            torch_problem(
                ctx,
                torch,
                f"{ctx.target_id} needs a GPU build of torch for CUDA {cuda}, but the lock holds "
                f"torch {torch.version} from PyPI, {found} ({torch.evidence}) — {under} under a "
                f"cuda{cuda} name",
                fix,
            )
        )
    return problems + _runtime_wheel_problems(ctx, packages, torch, cuda, fix)


def _runtime_wheel_problems(
    ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild, cuda: str, fix: str
) -> list[Problem]:
    """Every CUDA runtime wheel is the target's CUDA (major.minor); one CUDA per lock."""
    runtimes = cuda_runtime_wheels(packages)
    versions = {major_minor(r.version) for r in runtimes}
    shown = ", ".join(f"{r.name} {r.version}" for r in runtimes)
    if len(versions) > 1:
        odd = next(r for r in runtimes if major_minor(r.version) != cuda)
        message = (
            f"the lock holds CUDA runtime wheels for several CUDA versions ({shown}); a "
            f"{ctx.target_id} box must hold one, for CUDA {cuda}"
        )
        pin = (
            f"find what pulls {odd.name} {odd.version} (torch, or the CUDA variant of another package, "
            f"e.g. a -cu12 or -cu13 build) and pin one built for CUDA {cuda}; for torch: " + fix
        )
        return [package_problem(ctx, odd, message, shown, pin)]
    if versions and versions != {cuda} and torch.accelerator == f"cuda{cuda}":
        runtime = runtimes[0]
        message = (
            f"torch {torch.version} is a CUDA {cuda} build, but the lock holds {shown}, the CUDA "
            f"{major_minor(runtime.version)} runtime"
        )
        return [package_problem(ctx, runtime, message, runtime.version, fix)]
    return []


def _cuda_version_record_problems(
    ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild, cuda: str, fix: str
) -> list[Problem]:
    record = cuda_version_record(packages)
    if record is None:
        return [
            torch_problem(
                ctx,
                torch,
                f"torch is a CUDA {cuda} build but the lock has no cuda-version record to pin the ABI",
                fix,
                key="cuda-version",
            )
        ]
    if major_minor(record.version) != cuda:
        return [
            Problem(
                message=f"cuda-version {record.version} does not match the target's CUDA {cuda}",
                file=ctx.file,
                line=located(ctx, record),
                key="cuda-version",
                value=record.version,
                fix=fix,
            )
        ]
    return []


def _cuda_without_torch(ctx: LockContext, packages: Sequence[PackageRecord], cuda: str, fix: str) -> list[Problem]:
    """A CUDA box without torch (e.g. CuPy, ONNX Runtime) must still lock the target's CUDA."""
    record = cuda_version_record(packages)
    runtime = cuda_runtime_wheel(packages)
    found = [major_minor(p.version) for p in (record, runtime) if p is not None]
    if cuda in found:
        return []
    what = (
        f"CUDA {', '.join(found)}"
        if found
        else "no CUDA runtime at all (no cuda-version record, no nvidia-cuda-runtime wheel)"
    )
    return [
        Problem(
            message=f"{ctx.target_id} needs CUDA {cuda} packages but the lock holds {what}",
            file=ctx.file,
            line=located(ctx, record or runtime) or ctx.environment_line,
            key="cuda-version",
            value=", ".join(found) or None,
            fix=fix,
        )
    ]


# ------------------------------------------------------------------------------------- pixi.toml rules


def _major_minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def requirement_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    """CUDA declared as a system requirement AND as a cuda-version pin, both equal to the target's CUDA
    (a PyPI torch needs no pin)."""
    declared, where = manifest.requirement(spec.subdir)
    legacy = manifest.system_requirements.get(SYSTEM_REQUIREMENT)
    pin = manifest.dependencies_for(spec.subdir).get(CUDA_VERSION_PACKAGE)
    cuda = spec.cuda_version or ""
    out = []
    if declared is None:
        out.append(
            manifest.problem(
                "system-requirements.cuda",
                "system-requirements",
                "the CUDA version is not declared as a system requirement",
                None,
                f'add [system-requirements] cuda = "{cuda}" (or platforms = '
                f'[{{ platform = "{spec.subdir}", cuda = "{cuda}" }}])',
            )
        )
    elif _major_minor_of(declared) != cuda or declared.count(".") > 1:
        table = "system-requirements" if where.startswith("system") else "workspace"
        key = "system-requirements.cuda" if table == "system-requirements" else "workspace.platforms"
        out.append(
            manifest.problem(
                key,
                table,
                f"the CUDA system requirement must be {cuda!r} (target.cudaVersion)",
                declared,
                f'declare cuda = "{cuda}"',
            )
        )
    if legacy is not None and declared is not None and str(legacy) != declared:
        out.append(
            manifest.problem(
                "system-requirements.cuda",
                "system-requirements",
                "[system-requirements] cuda disagrees with the platforms entry",
                legacy,
                f'declare cuda = "{cuda}" once',
            )
        )
    return out + _pin_problems(manifest, pin, cuda, manifest.pypi_torch(spec.subdir) is not None)


def _pin_problems(manifest: ManifestView, pin: ManifestDependency | None, cuda: str, pypi: bool) -> list[Problem]:
    """cuda-version pins the target's CUDA; a PyPI torch needs no pin (its runtime wheel is the CUDA)."""
    if pin is None:
        if pypi:
            return []
        return [
            manifest.problem(
                "dependencies.cuda-version",
                "dependencies",
                "cuda-version is not pinned, so the solver may pick another CUDA ABI",
                None,
                f'add cuda-version = "{cuda}.*" to [dependencies]',
            )
        ]
    if not re.fullmatch(rf"(==|=)?{re.escape(cuda)}(\.\*)?", (pin.version or "").replace(" ", "")):
        return [manifest.dep_problem(pin, f"cuda-version must pin CUDA {cuda}", f'cuda-version = "{cuda}.*"')]
    return []


def torch_build_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    """pytorch pinned to a ``cuda*`` build."""
    deps = manifest.dependencies_for(spec.subdir)
    torch = deps.get("pytorch")
    if "pytorch-gpu" in deps or torch is None:
        return []  # pytorch-gpu only has CUDA builds; a box without conda torch has nothing to pin
    if not (torch.build or "").startswith("cuda"):
        fix = f'pytorch = {{ version = "{torch.version or "2.*"}", build = "cuda*" }}'
        return [
            manifest.dep_problem(
                torch,
                'pytorch must be pinned to a CUDA build (build = "cuda*"), or the solver may pick a CPU build',
                fix,
            )
        ]
    return []


def torch_index_problems(manifest: ManifestView, spec: TargetSpec) -> list[Problem]:
    """A PyPI torch comes from PyTorch's index for the target's CUDA, or (not on Windows, where PyPI's
    default index has no CUDA torch) from PyPI's default index."""
    torch = manifest.pypi_dependencies_for(spec.subdir).get("torch")
    if torch is None or torch.source is not None:
        return []
    if torch.index is None:
        return _default_index_problems(manifest, torch, spec)
    want = cuda_tag(spec.cuda_version or "")
    if torch.index.rstrip("/").rsplit("/", 1)[-1] != want:
        return [index_problem(manifest, torch, spec.target_id, f"use the {want} index")]
    return []


def _default_index_problems(manifest: ManifestView, torch: ManifestPypiDependency, spec: TargetSpec) -> list[Problem]:
    """PyPI's default index has no CUDA torch for Windows: a Windows CUDA box must name PyTorch's index."""
    if not spec.is_windows or manifest.pypi_torch(spec.subdir) is None:
        return []
    version = torch.version or "*"
    return [
        manifest.problem(
            torch.key,
            torch.table,
            "torch comes from PyPI's default index, which has no CUDA build of torch for Windows (only a CPU "
            f"wheel, about 127 MB), so {spec.target_id} would ship CPU torch under a CUDA name",
            f"torch {version} from PyPI's default index",
            f'take torch from PyTorch\'s CUDA {spec.cuda_version} index: torch = {{ version = "{version}", '
            f'index = "{pytorch_index(spec.cuda_version)}" }}',
        )
    ]


def driver_check(
    min_driver: str | None, versions: Sequence[str], error: str | None
) -> tuple[str, str, str, str | None]:
    """doctor's check that this machine (its drivers, or why none was found) can build and self-test a CUDA box."""
    if error or not versions:
        return (
            DRIVER_CHECK,
            "fail",
            error or "no NVIDIA driver found",
            "build CUDA boxes on a machine with an NVIDIA GPU and driver: the self-test "
            "asserts torch.cuda.is_available()",
        )
    oldest = min(versions, key=dotted_key)
    if min_driver is None:
        return DRIVER_CHECK, "pass", f"driver {oldest} (the recipe sets no minNvidiaDriverVersion)", None
    if dotted_key(oldest) < dotted_key(min_driver):
        return (
            DRIVER_CHECK,
            "fail",
            f"driver {oldest} is older than minNvidiaDriverVersion {min_driver}",
            f"upgrade the NVIDIA driver to {min_driver} or newer",
        )
    return DRIVER_CHECK, "pass", f"driver {oldest} >= {min_driver}", None


@dataclass(frozen=True)
class Cuda:
    name: str = "cuda"
    title: str = "CUDA"
    aliases: tuple[str, ...] = ("gpu",)
    version_field: str | None = "cudaVersion"
    platforms: tuple[tuple[str, str], ...] = (("linux", "x86_64"), ("linux", "aarch64"), ("windows", "x86_64"))
    rank: int = 2
    uses_gpu: bool = True
    build_disk_gb: float = 20.0
    device_env: dict[str, str] = field(default_factory=lambda: {"CUDA_VISIBLE_DEVICES": "0"})
    runners: dict[str, list[str]] = field(
        default_factory=lambda: {
            "linux-x86_64-cuda*": ["self-hosted", "linux", "x64", "gpu", "cuda-{cudaVersion}"],
            "linux-aarch64-cuda*": ["self-hosted", "linux", "arm64", "gpu", "cuda-{cudaVersion}"],
            "windows-x86_64-cuda*": ["self-hosted", "windows", "x64", "gpu", "cuda-{cudaVersion}"],
        }
    )

    def target_suffix(self, version: str | None) -> str:
        return f"cuda{version}" if version else self.name

    def virtual_packages(self, version: str | None) -> dict[str, str]:
        return {"__cuda": version} if version else {}

    def manifest_problems(self, manifest: ManifestView, target: TargetSpec) -> list[Problem]:
        return [
            *requirement_problems(manifest, target),
            *torch_build_problems(manifest, target),
            *torch_index_problems(manifest, target),
        ]

    def unavailable(self, platform: str) -> tuple[str, str] | None:
        if platform != "osx":
            return None
        return (
            "macOS has no CUDA target — use metal",
            'set target.accelerator to "metal" with arch "arm64" (or "cpu"), and remove target.cudaVersion',
        )

    def version_fix(self) -> str:
        return 'add "cudaVersion": "12.4" (major.minor of the CUDA runtime) to target'

    def pypi_constraints(self, version: str | None) -> tuple[str, ...]:
        return tuple(f"{name}=={version}.*" for name in CUDA_RUNTIME_WHEELS)

    def resolve_hint(self, target_id: str, version: str | None) -> tuple[str, str]:
        """(what the resolver may pick, where to find such wheels) for uv's failure message."""
        return (
            f"for {target_id} the resolver may only pick wheels built for CUDA {version} "
            f"(constraint {CUDA_RUNTIME_WHEELS[0]}*=={version}.*)",
            " (cuda12.4 -> torch 2.5/2.6, 12.6 -> 2.7, 12.8 -> 2.8-2.10, 13.0 -> 2.11-2.14) or set the torch "
            f"index to https://download.pytorch.org/whl/{cuda_tag(version or '')}",
        )

    def lock_problems(self, ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild) -> list[Problem]:
        return cuda_problems(ctx, packages, torch, ctx.version or "")

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
        return gpu_check(target, min_driver, evidence, host, file)

    def probe_gpus(self, probes: CommandProbes) -> GpuFacts:
        return gather_gpus(probes)

    def driver_check(
        self, min_driver: str | None, versions: Sequence[str], error: str | None
    ) -> tuple[str, str, str, str | None]:
        return driver_check(min_driver, versions, error)


CUDA = Cuda()
