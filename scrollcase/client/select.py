"""Which release of a box this machine should install: a pure function of the box index and the host.

The rules (docs/install.md, "Selection"), for every (version, target) the index lists:

1. **Version.** ``--version V`` keeps only V (a pre-release included); otherwise pre-releases
   (``1.1.0-rc.1``) are left out unless ``--pre``.
2. **Target.** ``--target T`` keeps only T and skips rule 3 (it is installed as ``unpack`` would);
   otherwise the release's platform and arch must be this machine's.
3. **Accelerator.** ``cpu`` fits any machine of its platform, ``metal`` fits osx-arm64; ``cuda`` must pass
   the install-time GPU check (:func:`scrollcase.targets.gpucheck.gpu_check`: a GPU and driver, the driver
   >= ``minNvidiaDriverVersion`` compared numerically, a GPU that the release's ``archList`` runs on)
   against the GPU evidence the index carries, unless ``--skip-gpu-check``.
4. **Preference** among the releases that fit: the best accelerator first (cuda, then metal, then
   cpu), then the newest version by semver precedence, then a GPU that runs SASS over one that needs
   PTX, then the newest CUDA.  The accelerator comes before the version because each target is
   published by its own job: a newer version whose CUDA box is still being published must not turn
   a GPU machine into a CPU install.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scrollcase.errors import HostError, Problem, UsageError
from scrollcase.recipe.fields import SEMVER_RE
from scrollcase.store.index import BoxIndex, IndexEntry
from scrollcase.targets.gpucheck import GpuCheckResult
from scrollcase.targets.hostgpu import GpuFacts, dotted_key

GPU_RANK = {"pass": 2, "skip": 1, "warn": 1}

SemverKey = tuple[tuple[int, ...], int, tuple[tuple[int, int, str], ...]]


@dataclass(frozen=True)
class HostView:
    """What selection knows of this machine: ``platform``/``arch`` in the target vocabulary, its GPUs."""

    platform: str
    arch: str
    gpus: GpuFacts = field(default_factory=GpuFacts)


@dataclass(frozen=True)
class Wanted:
    """The command line's choices: ``--version``, ``--target``, ``--pre``, ``--skip-gpu-check``."""

    version: str | None = None
    target: str | None = None
    pre: bool = False
    skip_gpu_check: bool = False


@dataclass(frozen=True)
class Candidate:
    version: str
    entry: IndexEntry
    reasons: tuple[str, ...]  # why it does not fit this machine; empty when it fits
    gpu: GpuCheckResult | None = None  # the GPU check's verdict for a CUDA release
    unwanted: bool = False  # left out by --version or --target (not a fact about this machine)

    @property
    def target_id(self) -> str:
        return self.entry.targetId

    @property
    def fits(self) -> bool:
        return not self.reasons

    @property
    def prerelease(self) -> bool:
        return is_prerelease(self.version)

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            "targetId": self.target_id,
            "prerelease": self.prerelease,
            "fits": self.fits,
            "reasons": list(self.reasons),
            "size": self.entry.size,
            "sha256": self.entry.sha256,
            "gpuCheck": self.gpu.to_json() if self.gpu else None,
        }


@dataclass(frozen=True)
class Selection:
    candidates: tuple[Candidate, ...]  # those that fit first, best first; then the rest, newest first
    chosen: Candidate | None


def semver_key(version: str) -> SemverKey:
    """Semver precedence: numeric core, a release above its pre-releases, pre-release identifiers
    compared numerically or lexically (numeric below alphanumeric, more identifiers above fewer);
    build metadata (``+…``) ignored."""
    core, _, pre = version.partition("+")[0].partition("-")
    numbers = tuple(int(part) for part in core.split("."))
    if not pre:
        return numbers, 1, ()
    ids = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))
    return numbers, 0, ids


def is_prerelease(version: str) -> bool:
    return "-" in version.partition("+")[0]


def select_release(index: BoxIndex, host: HostView, wanted: Wanted) -> Selection:
    """Every release of the index judged for this machine, and the one to install (None: none fits)."""
    judged = [
        judge(version, entry, host, wanted) for version, targets in index.versions.items() for entry in targets.values()
    ]
    fitting = sorted((c for c in judged if c.fits), key=preference, reverse=True)
    rest = sorted(
        (c for c in judged if not c.fits),
        key=lambda c: (_safe_key(c.version), c.target_id),
        reverse=True,
    )
    return Selection((*fitting, *rest), fitting[0] if fitting else None)


def judge(version: str, entry: IndexEntry, host: HostView, wanted: Wanted) -> Candidate:
    """Why one (version, target) does or does not fit (every reason, for ``--list``)."""
    reasons: list[str] = []
    if not SEMVER_RE.fullmatch(version):
        return Candidate(version, entry, (f"{version!r} is not a semantic version",))
    unwanted = (wanted.version is not None and version != wanted.version) or (
        wanted.target is not None and entry.targetId != wanted.target
    )
    if wanted.version is not None and version != wanted.version:
        reasons.append(f"not the requested --version {wanted.version}")
    elif wanted.version is None and is_prerelease(version) and not wanted.pre:
        reasons.append(f"a pre-release: pass --pre or --version {version}")
    target = entry.target
    if wanted.target is not None:
        if entry.targetId != wanted.target:
            reasons.append(f"not the requested --target {wanted.target}")
    elif (target.platform, target.arch) != (host.platform, host.arch):
        reasons.append(f"built for {target.platform}-{target.arch}; this machine is {host.platform}-{host.arch}")
    gpu = _gpu_verdict(entry, host, wanted)
    if gpu is not None:
        reasons.extend(p.message for p in gpu.errors)
    return Candidate(version, entry, tuple(reasons), gpu, unwanted)


def _gpu_verdict(entry: IndexEntry, host: HostView, wanted: Wanted) -> GpuCheckResult | None:
    spec = entry.target.spec
    if not spec.kind.uses_gpu:
        return None
    if wanted.skip_gpu_check:
        return GpuCheckResult("skip", "skipped (--skip-gpu-check)")
    return spec.kind.gpu_check(spec, entry.minNvidiaDriverVersion, entry.gpu, host.gpus)


def preference(candidate: Candidate) -> tuple[int, SemverKey, int, tuple[int, ...]]:
    """Best accelerator (its rank in targets/), then newest version, then SASS over PTX, then newest CUDA."""
    spec = candidate.entry.target.spec
    gpu = GPU_RANK.get(candidate.gpu.status, 0) if candidate.gpu else 0
    cuda = dotted_key(spec.cuda_version) if spec.cuda_version else ()
    return spec.kind.rank, semver_key(candidate.version), gpu, cuda


def _safe_key(version: str) -> SemverKey:
    return semver_key(version) if SEMVER_RE.fullmatch(version) else ((), 0, ())


def require_choice(selection: Selection, index: BoxIndex, wanted: Wanted, store: str) -> Candidate:
    """The chosen release; UsageError when ``--version``/``--target`` names nothing in the index,
    HostError (every candidate and why it does not fit) when nothing fits this machine."""
    _check_named(index, wanted, store)
    if selection.chosen is not None:
        return selection.chosen
    # Only the releases the options asked for: those --version/--target left out are no news.
    problems = [
        Problem(message="; ".join(c.reasons), key=f"{c.version}/{c.target_id}")
        for c in selection.candidates
        if not c.unwanted
    ]
    raise HostError(
        f"no release of {index.boxId} in {store} fits this machine ({len(problems)} considered)",
        problems=problems,
        fix="see `scrollcase install --list`; pass --target to force one, --pre for pre-releases, "
        "or --skip-gpu-check to install a CUDA box without checking the GPU",
    )


def _check_named(index: BoxIndex, wanted: Wanted, store: str) -> None:
    if wanted.version is not None and wanted.version not in index.versions:
        have = _listing(index.versions, versions=True)
        raise UsageError(
            f"{store} has no version {wanted.version} of {index.boxId} (it has: {have})",
            fix="pick a version from `scrollcase install --list`",
        )
    targets = {t for targets in index.versions.values() for t in targets}
    if wanted.version is not None:
        targets = set(index.versions[wanted.version])
    if wanted.target is not None and wanted.target not in targets:
        raise UsageError(
            f"{store} has no target {wanted.target} of {index.boxId}"
            + (f" {wanted.version}" if wanted.version else "")
            + f" (it has: {_listing(targets)})",
            fix="pick a target from `scrollcase install --list`",
        )


def _listing(names: Iterable[str], versions: bool = False) -> str:
    return ", ".join(sorted(names, key=_safe_key if versions else str)) or "none"
