"""lock-check's rules: a committed lock against its pixi.toml and its recipe's target.  Pure.

Every rule returns :class:`Problem` objects that point at a file and line (pixi.lock or pixi.toml),
say what was expected and what was found, and how to fix it, so CI can annotate the PR.
What pixi.toml must say on its own (platforms, pins) is ``scrollcase.pixi.rules``' job, not ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scrollcase.errors import Problem
from scrollcase.pixi.classify import (
    TorchBuild,
    classify_torch,
    cuda_runtime_wheel,
    cuda_version_record,
    major_minor,
)
from scrollcase.pixi.lockfile import LockedPackage, LockFile, normalize_name
from scrollcase.pixi.manifest import Dependency, PixiManifest
from scrollcase.targets import TargetSpec

ENVIRONMENT = "default"
# The oldest pixi that reads each lock format (pixi 0.67 stops with "Lock-file version 7 is newer
# than supported"; v6 arrived with pixi 0.26).  Older formats are read by every newer pixi.
MIN_PIXI_FOR_LOCK = {7: (0, 68, 0), 6: (0, 26, 0)}


def pixi_reads(pixi_version: str, lock_version: int) -> bool:
    """Whether pixi ``pixi_version`` (``0.73.0``) reads lock format ``lock_version``."""
    needed = MIN_PIXI_FOR_LOCK.get(lock_version)
    if needed is None:
        return True
    parts = tuple(int(p) for p in pixi_version.split("-")[0].split("+")[0].split(".")[:3])
    return parts >= needed


@dataclass(frozen=True)
class LockCheckInput:
    recipe_id: str
    target: TargetSpec
    manifest: PixiManifest
    lock: LockFile
    channels: tuple[str, ...]  # the channel URLs the lock must record (overrides applied)
    environment: str = ENVIRONMENT
    pixi_version: str | None = None  # the recipe's pinned pixi


@dataclass(frozen=True)
class LockCheckResult:
    recipe_id: str
    platform: str | None  # the lock's platform key used for the target (v7: may be ``p1``)
    torch: TorchBuild
    problems: tuple[Problem, ...]


def _relock(inp: LockCheckInput) -> str:
    return f"run `scrollcase lock {inp.recipe_id}` and commit the new pixi.lock"


def select_platform(lock: LockFile, environment: str, target: TargetSpec) -> str | None:
    """The lock platform key holding ``target``'s subdir; for CUDA prefer one solved with ``__cuda``."""
    names = lock.platform_names(environment, target.subdir)
    if len(names) > 1 and target.cuda_version:
        with_cuda = [n for n in names
                     if any(v.startswith("__cuda") for v in lock.platforms[n].virtual_packages)]
        names = with_cuda or names
    return names[0] if names else None


def check_lock(inp: LockCheckInput) -> LockCheckResult:
    """All problems of one recipe's lock (empty when the lock is good)."""
    lock, target = inp.lock, inp.target
    env = lock.environments.get(inp.environment)
    if env is None:
        problem = Problem(
            message=f"the lock has no environment {inp.environment!r} "
                    f"(has: {', '.join(lock.environments) or 'none'})",
            file=lock.file, line=1, key="environments", fix=_relock(inp))
        return LockCheckResult(inp.recipe_id, None, TorchBuild(), (problem,))
    platform = select_platform(lock, inp.environment, target)
    if platform is None:
        covered = sorted({lock.subdir_of(p) for p in env.packages})
        problem = Problem(
            message=f"the lock does not cover the target platform {target.subdir} "
                    f"(covers: {', '.join(covered) or 'nothing'})",
            file=lock.file, line=env.line, key=f"environments.{inp.environment}.packages",
            value=", ".join(covered), fix=_relock(inp))
        return LockCheckResult(inp.recipe_id, None, TorchBuild(), (problem,))
    packages = env.packages[platform]
    torch = classify_torch(packages)
    problems = [*format_problems(inp), *channel_problems(inp), *dependency_problems(inp, packages),
                *pypi_problems(inp, packages), *accelerator_problems(inp, packages, torch)]
    return LockCheckResult(inp.recipe_id, platform, torch, tuple(problems))


def format_problems(inp: LockCheckInput) -> list[Problem]:
    if inp.pixi_version is None or pixi_reads(inp.pixi_version, inp.lock.version):
        return []
    needed = ".".join(str(p) for p in MIN_PIXI_FOR_LOCK[inp.lock.version])
    return [Problem(
        message=f"lock format v{inp.lock.version} needs pixi >= {needed}, but the recipe pins pixi "
                f"{inp.pixi_version}", file=inp.lock.file, line=1, key="version",
        value=str(inp.lock.version), fix=f"set pixiVersion to {needed} or newer in recipe.json")]


def channel_problems(inp: LockCheckInput) -> list[Problem]:
    env = inp.lock.environments[inp.environment]
    locked = tuple(c.rstrip("/") + "/" for c in env.channels)
    if locked == inp.channels:
        return []
    return [Problem(
        message=f"the lock is stale: it was solved with channels [{', '.join(locked)}] "
                f"but pixi.toml asks for [{', '.join(inp.channels)}]",
        file=inp.lock.file, line=env.line, key=f"environments.{inp.environment}.channels",
        value=", ".join(locked), fix=_relock(inp))]


def _record(package: LockedPackage) -> object:
    from rattler import PackageRecord
    from rattler.package import BuildString

    return PackageRecord(package.name, package.version, BuildString(package.build or ""), 0,
                         package.location.rstrip("/").rsplit("/", 2)[-2] if "/" in package.location
                         else "noarch")


def spec_matches(spec: str, package: LockedPackage) -> bool | str:
    """True/False, or the reason the spec cannot be read."""
    from rattler import MatchSpec

    try:
        match_spec = MatchSpec(spec, strict=False)
        record = _record(package)
    except Exception as exc:  # rattler parse errors have no common base class
        return f"{type(exc).__name__}: {exc}"
    if not match_spec.matches(record):  # type: ignore[arg-type]
        return False
    channel = match_spec.channel
    return channel is None or package.location.startswith(str(channel.base_url).rstrip("/") + "/") \
        or "://" not in package.location


def dependency_problems(inp: LockCheckInput, packages: Sequence[LockedPackage]) -> list[Problem]:
    conda = {p.name: p for p in packages if p.kind == "conda"}
    problems: list[Problem] = []
    for dep in inp.manifest.dependencies_for(inp.target.subdir).values():
        locked = conda.get(dep.name.lower())
        spec = dep.match_spec()
        if locked is None:
            problems.append(_manifest_problem(
                inp, dep, f"the lock is stale: pixi.toml asks for {spec} but the lock has no "
                          f"{dep.name} for {inp.target.subdir}", spec))
            continue
        verdict = spec_matches(spec, locked)
        if verdict is True:
            continue
        if verdict is False:
            message = (f"the lock is stale: pixi.toml asks for {spec} but the lock holds "
                       f"{locked.name} {locked.version} {locked.build or ''}".rstrip())
        else:
            message = f"cannot check {spec} against the lock: {verdict}"
        problems.append(Problem(message=message, file=inp.lock.file, line=locked.line or locked.entry_line,
                                key=dep.name, value=f"{locked.name} {locked.version} {locked.build or ''}"
                                .rstrip(), fix=_relock(inp)))
    return problems


def _manifest_problem(inp: LockCheckInput, dep: Dependency, message: str, spec: str) -> Problem:
    return Problem(message=message, file=inp.manifest.file, line=inp.manifest.line_of(dep.name, dep.table),
                   key=f"{dep.table}.{dep.name}", value=spec, fix=_relock(inp))


def pypi_problems(inp: LockCheckInput, packages: Sequence[LockedPackage]) -> list[Problem]:
    wheels = {p.name for p in packages if p.kind == "pypi"}
    problems: list[Problem] = []
    for name in inp.manifest.pypi_dependencies:
        if normalize_name(name) not in wheels:
            problems.append(Problem(
                message=f"the lock is stale: pixi.toml asks for the PyPI package {name} but the lock "
                        f"has none for {inp.target.subdir}",
                file=inp.manifest.file, line=inp.manifest.line_of(name, "pypi-dependencies"),
                key=f"pypi-dependencies.{name}", fix=_relock(inp)))
    for package in packages:
        if package.kind == "pypi" and not package.filename.endswith(".whl"):
            problems.append(Problem(
                message=f"the PyPI package {package.name} is locked as a source distribution, git URL or "
                        f"folder, and `scrollcase build` installs wheels only",
                file=inp.lock.file, line=package.line, key=f"packages.pypi.{package.name}",
                value=package.location,
                fix="lock a wheel for it (from an index or a wheel URL, so pixi pins its sha256), "
                    "or depend on the conda-forge package instead"))
    return problems


def accelerator_problems(inp: LockCheckInput, packages: Sequence[LockedPackage],
                         torch: TorchBuild) -> list[Problem]:
    if inp.target.cuda_version:
        return cuda_problems(inp, packages, torch, inp.target.cuda_version)
    return cpu_problems(inp, packages, torch)


def _at(inp: LockCheckInput, package: LockedPackage | None) -> int | None:
    return (package.line or package.entry_line) if package else None


def _torch_value(torch: TorchBuild) -> str:
    return " ".join(x for x in (torch.provider, torch.version, torch.build) if x)


def cuda_problems(inp: LockCheckInput, packages: Sequence[LockedPackage], torch: TorchBuild,
                  cuda: str) -> list[Problem]:
    target_id = inp.target.target_id
    pin_fix = (f'in pixi.toml pin pytorch = {{ version = "2.*", build = "cuda*" }} and '
               f'cuda-version = "{cuda}.*", declare [system-requirements] cuda = "{cuda}", then '
               + _relock(inp))
    if torch.provider is None:
        return _cuda_without_torch(inp, packages, cuda, pin_fix)
    if torch.accelerator != f"cuda{cuda}":
        found = "a CPU build" if torch.accelerator == "cpu" else f"a build for {torch.accelerator}"
        return [Problem(
            message=f"{target_id} needs a GPU build of torch for CUDA {cuda}, but the lock holds {found} "
                    f"({torch.evidence}) — CPU packages under a CUDA name",
            file=inp.lock.file, line=_at(inp, torch.package), key="torch", value=_torch_value(torch),
            fix=pin_fix)]
    if torch.provider == "conda":
        return _cuda_version_record_problems(inp, packages, torch, cuda, pin_fix)
    return []


def _cuda_version_record_problems(inp: LockCheckInput, packages: Sequence[LockedPackage],
                                  torch: TorchBuild, cuda: str, fix: str) -> list[Problem]:
    record = cuda_version_record(packages)
    if record is None:
        return [Problem(
            message=f"torch is a CUDA {cuda} build but the lock has no cuda-version record to pin the ABI",
            file=inp.lock.file, line=_at(inp, torch.package), key="cuda-version",
            value=_torch_value(torch), fix=fix)]
    if major_minor(record.version) != cuda:
        return [Problem(
            message=f"cuda-version {record.version} does not match the target's CUDA {cuda}",
            file=inp.lock.file, line=_at(inp, record), key="cuda-version", value=record.version, fix=fix)]
    return []


def _cuda_without_torch(inp: LockCheckInput, packages: Sequence[LockedPackage], cuda: str,
                        fix: str) -> list[Problem]:
    """A CUDA box without torch (e.g. CuPy, ONNX Runtime) must still lock the target's CUDA."""
    record = cuda_version_record(packages)
    runtime = cuda_runtime_wheel(packages)
    found = [major_minor(p.version) for p in (record, runtime) if p is not None]
    if cuda in found:
        return []
    what = f"CUDA {', '.join(found)}" if found else "no CUDA runtime at all (no cuda-version record, " \
                                                    "no nvidia-cuda-runtime wheel)"
    return [Problem(
        message=f"{inp.target.target_id} needs CUDA {cuda} packages but the lock holds {what}",
        file=inp.lock.file, line=_at(inp, record or runtime) or inp.lock.environments[inp.environment].line,
        key="cuda-version", value=", ".join(found) or None, fix=fix)]


def cpu_problems(inp: LockCheckInput, packages: Sequence[LockedPackage], torch: TorchBuild) -> list[Problem]:
    fix = ('pin a CPU build in pixi.toml, e.g. pytorch = { version = "2.*", build = "cpu*" }, then '
           + _relock(inp))
    problems: list[Problem] = []
    if torch.cuda_version:
        problems.append(Problem(
            message=f"{inp.target.target_id} is not a CUDA target but the lock holds a CUDA "
                    f"{torch.cuda_version} build of torch ({torch.evidence})",
            file=inp.lock.file, line=_at(inp, torch.package), key="torch", value=_torch_value(torch),
            fix=fix))
    runtime = cuda_runtime_wheel(packages)
    if runtime is not None and not torch.cuda_version:
        problems.append(Problem(
            message=f"{inp.target.target_id} is not a CUDA target but the lock holds {runtime.name} "
                    f"{runtime.version}", file=inp.lock.file, line=_at(inp, runtime), key=runtime.name,
            value=runtime.version, fix=fix))
    return problems
