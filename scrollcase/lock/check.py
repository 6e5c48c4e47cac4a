"""lock-check's rules: a committed lock against its pixi.toml and its recipe's target.  Pure.

Every rule returns :class:`Problem` objects that point at a file and line (pixi.lock or pixi.toml),
say what was expected and what was found, and how to fix it, so CI can annotate the PR.
What pixi.toml must say on its own (platforms, pins) is ``scrollcase.lock.rules``' job, not ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from scrollcase.errors import Problem
from scrollcase.lock.channels import OVERRIDES_ENV, channel_url
from scrollcase.lock.manifest import Dependency, PixiManifest, PypiDependency
from scrollcase.lock.rattler_errors import rattler_exceptions
from scrollcase.lock.read import LockedPackage, LockFile
from scrollcase.lock.resolve import pypi_name
from scrollcase.targets.base import LockContext
from scrollcase.targets.classify import TorchBuild, classify_torch
from scrollcase.targets.vocabulary import TargetSpec

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
    """The lock platform key holding ``target``'s subdir; for a target with virtual packages of its accelerator
    (``__cuda``) prefer one solved with them."""
    names = lock.platform_names(environment, target.subdir)
    own = tuple(target.kind.virtual_packages(target.cuda_version))
    if len(names) > 1 and own:
        solved = [n for n in names if any(v.startswith(own) for v in lock.platforms[n].virtual_packages)]
        names = solved or names
    return names[0] if names else None


def check_lock(inp: LockCheckInput) -> LockCheckResult:
    """All problems of one recipe's lock (empty when the lock is good)."""
    lock, target = inp.lock, inp.target
    env = lock.environments.get(inp.environment)
    if env is None:
        problem = Problem(
            message=f"the lock has no environment {inp.environment!r} (has: {', '.join(lock.environments) or 'none'})",
            file=lock.file,
            line=1,
            key="environments",
            fix=_relock(inp),
        )
        return LockCheckResult(inp.recipe_id, None, TorchBuild(), (problem,))
    platform = select_platform(lock, inp.environment, target)
    if platform is None:
        covered = sorted({lock.subdir_of(p) for p in env.packages})
        problem = Problem(
            message=f"the lock does not cover the target platform {target.subdir} "
            f"(covers: {', '.join(covered) or 'nothing'})",
            file=lock.file,
            line=env.line,
            key=f"environments.{inp.environment}.packages",
            value=", ".join(covered),
            fix=_relock(inp),
        )
        return LockCheckResult(inp.recipe_id, None, TorchBuild(), (problem,))
    packages = env.packages[platform]
    torch = classify_torch(packages)
    problems = [
        *format_problems(inp),
        *channel_problems(inp),
        *dependency_problems(inp, packages),
        *pypi_problems(inp, packages),
        *accelerator_problems(inp, packages, torch),
    ]
    return LockCheckResult(inp.recipe_id, platform, torch, tuple(problems))


def locked_accelerator_problems(inp: LockCheckInput) -> list[Problem]:
    """Only the accelerator rule (the torch build and CUDA runtime the lock holds for the target): what
    ``build`` checks before it downloads anything, so a lock for another CUDA fails in seconds."""
    platform = select_platform(inp.lock, inp.environment, inp.target)
    env = inp.lock.environments.get(inp.environment)
    if env is None or platform is None:
        return []  # the installer's own lock reading explains a missing environment or platform
    packages = env.packages[platform]
    return accelerator_problems(inp, packages, classify_torch(packages))


def format_problems(inp: LockCheckInput) -> list[Problem]:
    if inp.pixi_version is None or pixi_reads(inp.pixi_version, inp.lock.version):
        return []
    needed = ".".join(str(p) for p in MIN_PIXI_FOR_LOCK[inp.lock.version])
    return [
        Problem(
            message=f"lock format v{inp.lock.version} needs pixi >= {needed}, but the recipe pins pixi "
            f"{inp.pixi_version}",
            file=inp.lock.file,
            line=1,
            key="version",
            value=str(inp.lock.version),
            fix=f"set pixiVersion to {needed} or newer in recipe.json",
        )
    ]


def channel_problems(inp: LockCheckInput) -> list[Problem]:
    """The lock was solved with the channels pixi.toml names (overrides applied), located at pixi.toml's
    ``channels`` line: the edit that made the lock stale is there, or in the overrides."""
    env = inp.lock.environments[inp.environment]
    locked = tuple(c.rstrip("/") + "/" for c in env.channels)
    if locked == inp.channels:
        return []
    overridden = inp.channels != tuple(channel_url(c) for c in inp.manifest.channels)
    asks = "pixi.toml with this run's channel overrides" if overridden else "pixi.toml"
    return [
        Problem(
            message=f"the lock is stale: it was solved with channels [{', '.join(locked)}] "
            f"but {asks} asks for [{', '.join(inp.channels)}] ({inp.lock.file}:{env.line})",
            file=inp.manifest.file,
            line=inp.manifest.line_of("channels", "workspace"),
            key="workspace.channels",
            value=", ".join(locked),
            fix=_channel_fix(inp, locked),
        )
    ]


def _channel_fix(inp: LockCheckInput, locked: Sequence[str]) -> str:
    """Re-lock; or, when the lock holds a mirror of the same channels, name the override that reads it."""
    relock = _relock(inp)
    if len(locked) != len(inp.channels) or len(locked) != len(inp.manifest.channels):
        return relock
    pairs = [
        f"{name}={url}"
        for name, wanted, url in zip(inp.manifest.channels, inp.channels, locked, strict=True)
        if wanted != url
    ]
    return (
        f"{relock}; or, if the lock was solved from a mirror on purpose, give lock-check (and build) the same "
        f"override: {OVERRIDES_ENV}={','.join(pairs)} (or --channel-override {' --channel-override '.join(pairs)}; "
        "docs/locks.md, Channel overrides)"
    )


# The record's build number: the lock model keeps none, and no spec made from pixi.toml names one.
_BUILD_NUMBER = 0


def _record(package: LockedPackage) -> object:
    from rattler import PackageRecord
    from rattler.package import BuildString

    return PackageRecord(
        package.name,
        package.version,
        BuildString(package.build or ""),
        _BUILD_NUMBER,
        package.location.rstrip("/").rsplit("/", 2)[-2] if "/" in package.location else "noarch",
    )


def spec_matches(spec: str, package: LockedPackage) -> bool | str:
    """True/False, or the reason the spec cannot be read."""
    from rattler import MatchSpec

    try:
        match_spec = MatchSpec(spec, strict=False)
        record = _record(package)
    except rattler_exceptions() as exc:
        return f"{type(exc).__name__}: {exc}"
    if not match_spec.matches(record):  # type: ignore[arg-type]
        return False
    channel = match_spec.channel
    return (
        channel is None
        or package.location.startswith(str(channel.base_url).rstrip("/") + "/")
        or "://" not in package.location
    )


def dependency_problems(inp: LockCheckInput, packages: Sequence[LockedPackage]) -> list[Problem]:
    conda = {p.name: p for p in packages if p.kind == "conda"}
    problems: list[Problem] = []
    for dep in inp.manifest.dependencies_for(inp.target.subdir).values():
        locked = conda.get(dep.name.lower())
        spec = dep.match_spec()
        if locked is None:
            problems.append(
                _manifest_problem(
                    inp,
                    dep,
                    f"the lock is stale: pixi.toml asks for {spec} but the lock has no "
                    f"{dep.name} for {inp.target.subdir}",
                    spec,
                )
            )
            continue
        verdict = spec_matches(spec, locked)
        if verdict is True:
            continue
        held = f"{locked.name} {locked.version} {locked.build or ''}".rstrip()
        where = f"{inp.lock.file}:{_line(locked)}"
        if verdict is False:
            message = f"the lock is stale: pixi.toml asks for {spec} but the lock holds {held} ({where})"
        else:
            message = f"cannot check {spec} against the lock: {verdict}"
        problems.append(_manifest_problem(inp, dep, message, held))
    return problems


def _manifest_problem(inp: LockCheckInput, dep: Dependency, message: str, value: str) -> Problem:
    """A stale lock named at the pixi.toml line of the dependency that differs: the line the user edited."""
    return Problem(
        message=message,
        file=inp.manifest.file,
        line=inp.manifest.line_of(dep.name, dep.table),
        key=f"{dep.table}.{dep.name}",
        value=value,
        fix=_relock(inp),
    )


def pypi_spec_matches(spec: str, version: str) -> bool | str:
    """True/False for PEP 440 specifiers (``*``, ``>=2.5,<2.7``) against a locked version, or why not."""
    text = spec.strip()
    if text == "*":
        return True
    try:
        specifiers = SpecifierSet(text)
    except InvalidSpecifier:
        bare = " (a bare version: pixi asks for an operator)" if _is_version(text) else ""
        return f"{text!r} is not a PEP 440 version specifier{bare}"
    if not _is_version(version):
        return f"the locked version {version!r} is not a PEP 440 version"
    return specifiers.contains(Version(version), prereleases=True)


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def pypi_problems(inp: LockCheckInput, packages: Sequence[LockedPackage]) -> list[Problem]:
    wheels = {p.name: p for p in packages if p.kind == "pypi"}
    from_conda = _provided_by_conda(packages)
    problems: list[Problem] = []
    for name, dep in inp.manifest.pypi_dependencies_for(inp.target.subdir).items():
        problems.extend(_pypi_dependency_problems(inp, dep, wheels.get(name) or from_conda.get(name)))
    for package in packages:
        if package.kind == "pypi" and not package.filename.endswith(".whl"):
            problems.append(
                Problem(
                    message=f"the PyPI package {package.name} is locked as a source distribution, git URL or "
                    f"folder, and `scrollcase build` installs wheels only",
                    file=inp.lock.file,
                    line=package.line,
                    key=f"packages.pypi.{package.name}",
                    value=package.location,
                    fix="lock a wheel for it (from an index or a wheel URL, so pixi pins its sha256), "
                    "or depend on the conda-forge package instead",
                )
            )
    return problems


def _provided_by_conda(packages: Sequence[LockedPackage]) -> dict[str, LockedPackage]:
    """PyPI name -> the conda package that provides it.  pixi (and ``scrollcase lock``) solve conda first and
    lock no wheel for a PyPI dependency a conda package already satisfies (conda ``pytorch`` is PyPI ``torch``)."""

    return {pypi_name(p.name): p for p in packages if p.kind == "conda"}


def _pypi_dependency_problems(inp: LockCheckInput, dep: PypiDependency, locked: LockedPackage | None) -> list[Problem]:
    """The PyPI dependency is locked (a wheel, or a conda package of its name), at a version its specifiers
    allow (extras, markers ignored)."""
    line = inp.manifest.line_of(dep.name, dep.table)
    if locked is None:
        return [
            Problem(
                message=f"the lock is stale: pixi.toml asks for the PyPI package {dep.name} but the lock "
                f"has none for {inp.target.subdir}",
                file=inp.manifest.file,
                line=line,
                key=dep.key,
                fix=_relock(inp),
            )
        ]
    if dep.version is None or dep.source is not None:
        return []
    verdict = pypi_spec_matches(dep.version, locked.version)
    if verdict is True:
        return []
    found = f"{locked.name} {locked.version}"
    if verdict is False:
        where = f" (line {_line(locked)} of {inp.lock.file})" if _line(locked) else ""
        message = f"the lock is stale: pixi.toml asks for {dep.name} {dep.version} but the lock holds {found}{where}"
        fix = _relock(inp)
    else:
        message = f"cannot check {dep.name} {dep.version!r} against the lock: {verdict}"
        fix = f"{_specifier_fix(dep.name, dep.version)}, then {_relock(inp)}"
    return [Problem(message=message, file=inp.manifest.file, line=line, key=dep.key, value=found, fix=fix)]


def _specifier_fix(name: str, spec: str) -> str:
    if _is_version(spec.strip()):
        return f'write {name} = "=={spec.strip()}"'
    return f'write PEP 440 specifiers, e.g. {name} = ">=2.5,<2.7" or {name} = "==2.6.0"'


def _line(package: LockedPackage) -> int | None:
    return package.line or package.entry_line


def lock_context(inp: LockCheckInput) -> LockContext:
    """What the target's accelerator module needs to judge the lock (targets/<accelerator>.py)."""
    env = inp.lock.environments.get(inp.environment)
    return LockContext(
        target_id=inp.target.target_id,
        accelerator=inp.target.accelerator,
        version=inp.target.cuda_version,
        file=inp.lock.file,
        environment_line=env.line if env else None,
        relock=_relock(inp),
    )


def accelerator_problems(inp: LockCheckInput, packages: Sequence[LockedPackage], torch: TorchBuild) -> list[Problem]:
    """The accelerator's own lock rules: the torch build and runtime packages it needs (or forbids)."""
    return inp.target.kind.lock_problems(lock_context(inp), packages, torch)
