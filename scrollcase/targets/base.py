"""The accelerator seam: what every accelerator (cpu, cuda, metal, ...) answers, behind one Protocol.

Each accelerator is one module here holding one object that satisfies :class:`Accelerator`;
:mod:`scrollcase.targets.registry` lists them.  Code outside ``targets/`` asks the registry for the
target's accelerator and calls these members instead of comparing accelerator names, so adding an
accelerator is one module and one registry line.  Every member is pure except ``probe_gpus``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from scrollcase.errors import Problem

if TYPE_CHECKING:
    from scrollcase.targets.classify import PackageRecord, TorchBuild
    from scrollcase.targets.evidence import GpuEvidence
    from scrollcase.targets.gpucheck import GpuCheckResult
    from scrollcase.targets.hostgpu import CommandProbes, GpuFacts
    from scrollcase.targets.vocabulary import TargetSpec


@dataclass(frozen=True)
class LockContext:
    """What an accelerator's lock rules need of lock-check: the target, where the lock is, how to relock."""

    target_id: str
    accelerator: str
    version: str | None  # the accelerator's runtime version from the recipe (cudaVersion), if any
    file: str  # the pixi.lock, for locating problems
    environment_line: int | None  # the lock's environment entry, where a missing package is reported
    relock: str  # the fix's last step: run `scrollcase lock <recipe>` and commit


class ManifestDependency(Protocol):
    """A conda dependency of pixi.toml (lock/manifest.py's ``Dependency``)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def build(self) -> str | None: ...
    @property
    def table(self) -> str: ...
    def match_spec(self) -> str: ...


class ManifestPypiDependency(Protocol):
    """A ``[pypi-dependencies]`` entry of pixi.toml (lock/manifest.py's ``PypiDependency``)."""

    @property
    def version(self) -> str | None: ...
    @property
    def index(self) -> str | None: ...
    @property
    def source(self) -> str | None: ...
    @property
    def table(self) -> str: ...
    @property
    def key(self) -> str: ...


class ManifestView(Protocol):
    """What an accelerator's pixi.toml rules read of a parsed manifest, and how a finding is located
    (lock/rules.py gives one for a ``PixiManifest``)."""

    @property
    def system_requirements(self) -> Mapping[str, Any]: ...
    @property
    def platform_requirement(self) -> str | None: ...  # the platforms entry's own ``cuda = "..."``

    def requirement(self, subdir: str) -> tuple[str | None, str]:
        """The declared CUDA system requirement and where (``workspace.platforms`` or ``system-requirements``)."""

    def dependencies_for(self, subdir: str) -> Mapping[str, ManifestDependency]: ...
    def pypi_dependencies_for(self, subdir: str) -> Mapping[str, ManifestPypiDependency]: ...

    def pypi_torch(self, subdir: str) -> ManifestPypiDependency | None:
        """The ``[pypi-dependencies]`` torch when torch comes from PyPI (no conda torch package declared)."""

    def problem(self, key: str, table: str | None, message: str, value: Any, fix: str) -> Problem:
        """A finding at ``key`` in ``[table]`` (or where it belongs when missing)."""

    def dep_problem(self, dep: ManifestDependency, message: str, fix: str) -> Problem:
        """A finding at a conda dependency's line, its match spec as the value."""


def index_problem(manifest: ManifestView, torch: ManifestPypiDependency, target_id: str, fix: str) -> Problem:
    """A PyPI torch from a PyTorch index of another flavour than the target's (``cu124``, ``cpu``)."""
    flavour = (torch.index or "").rstrip("/").rsplit("/", 1)[-1]
    message = f"torch comes from the {flavour!r} index, which does not match {target_id}"
    return manifest.problem(torch.key, torch.table, message, torch.index, fix)


class Accelerator(Protocol):
    """One accelerator: its vocabulary, its lock rules, its evidence rules and its host checks."""

    @property
    def name(self) -> str: ...  # the recipe's target.accelerator value
    @property
    def title(self) -> str: ...  # how messages name it ("CUDA")
    @property
    def aliases(self) -> tuple[str, ...]: ...  # other device names a parity script may be given ("gpu")
    @property
    def version_field(self) -> str | None: ...  # the recipe's target field with its runtime version
    @property
    def platforms(self) -> tuple[tuple[str, str], ...]: ...  # (platform, arch) pairs it exists on
    @property
    def rank(self) -> int: ...  # install preference among fitting releases: higher first
    @property
    def uses_gpu(self) -> bool: ...  # the host's GPUs matter (doctor probes them, self-test sets up a GPU env)
    @property
    def build_disk_gb(self) -> float: ...  # free disk doctor asks for by default to build such a box
    @property
    def device_env(self) -> Mapping[str, str]: ...  # variables a run on this accelerator sees (the first GPU)
    @property
    def runners(self) -> Mapping[str, Sequence[str]]: ...  # default runs-on labels by target ID glob

    def target_suffix(self, version: str | None) -> str:
        """The target ID's last part (``cuda12.4``, ``cpu``)."""

    def virtual_packages(self, version: str | None) -> dict[str, str]:
        """The conda virtual packages (name -> version) this accelerator lets the solver assume."""

    def manifest_problems(self, manifest: ManifestView, target: TargetSpec) -> list[Problem]:
        """pixi.toml's rules for this accelerator: system requirements, pins, torch builds and indexes."""

    def unavailable(self, platform: str) -> tuple[str, str] | None:
        """(message, fix) when the accelerator never exists on ``platform`` (a more helpful rule than
        "not available"), else None."""

    def version_fix(self) -> str:
        """How to add ``version_field`` to a recipe's target (empty when it has none)."""

    def pypi_constraints(self, version: str | None) -> tuple[str, ...]:
        """uv constraints that keep the PyPI resolution on this accelerator's runtime."""

    def resolve_hint(self, target_id: str, version: str | None) -> tuple[str, str]:
        """(which wheels the resolver may pick, where torch for it lives) for a failed PyPI resolution."""

    def lock_problems(self, ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild) -> list[Problem]:
        """Why the locked torch and runtime packages are not for this accelerator (empty: they are)."""

    def evidence_problems(self, target: TargetSpec, evidence: GpuEvidence, where: str) -> list[Problem]:
        """Why a built box's GPU evidence is not what ``target`` promises (empty: it is)."""

    def gpu_check(
        self,
        target: TargetSpec,
        min_driver: str | None,
        evidence: GpuEvidence | None,
        host: GpuFacts,
        file: str | None = None,
    ) -> GpuCheckResult | None:
        """The install-time check of this host's GPUs for a release (problems name ``file``, the release
        manifest), or None when nothing is to check."""

    def probe_gpus(self, probes: CommandProbes) -> GpuFacts:
        """This host's GPUs for this accelerator (the one member with I/O, through injected probes)."""

    def driver_check(
        self, min_driver: str | None, versions: Sequence[str], error: str | None
    ) -> tuple[str, str, str, str | None]:
        """doctor's driver check: (name, status ``pass``/``fail``/``skip``, message, fix)."""


def located(ctx: LockContext, package: PackageRecord | None) -> int | None:
    """The lock line of a package's record (its entry when the record has no line of its own)."""
    return (package.line or package.entry_line) if package else None


def torch_value(torch: TorchBuild) -> str:
    return " ".join(x for x in (torch.provider, torch.version, torch.build) if x)


def torch_problem(ctx: LockContext, torch: TorchBuild, message: str, fix: str, key: str = "torch") -> Problem:
    """A problem with the locked torch, located at its record."""
    return Problem(
        message=message, file=ctx.file, line=located(ctx, torch.package), key=key, value=torch_value(torch), fix=fix
    )


def package_problem(ctx: LockContext, package: PackageRecord, message: str, value: str, fix: str) -> Problem:
    """A problem with a locked package, located at its record."""
    return Problem(message=message, file=ctx.file, line=located(ctx, package), key=package.name, value=value, fix=fix)
