"""py-rattler at the edge: solve a recipe for its target, write pixi.lock, read locked records back.

Planning is pure (:func:`plan_solve` turns a recipe and its manifest into channels, specs and
virtual packages); :func:`solve` and :func:`write_lock` are the thin executors that talk to rattler
and the disk.  No pixi binary and no network are needed when the channels are ``file://`` URLs.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.errors import RECIPE_ID, HostError, LockError, Problem, SolveError, describe_path
from scrollcase.io import cache as usercache
from scrollcase.io import proc
from scrollcase.io.fetch import default_fetchers
from scrollcase.io.files import move_into_place, user_cache_dir, write_atomic
from scrollcase.lock import pypi_records as metadata
from scrollcase.lock import pypi_records as pypi_lockfile
from scrollcase.lock import resolve
from scrollcase.lock.channels import OVERRIDES_ENV, apply_overrides
from scrollcase.lock.check import MIN_PIXI_FOR_LOCK, pixi_reads
from scrollcase.lock.manifest import PixiManifest, load_manifest
from scrollcase.lock.pypi_records import PypiLock
from scrollcase.lock.rattler_errors import rattler_errors
from scrollcase.lock.resolve import manifest_options
from scrollcase.recipe.loader import RecipeDir
from scrollcase.targets.vocabulary import TargetSpec
from scrollcase.wheels import source as wheels

LOCK_ENVIRONMENT = "default"


@dataclass(frozen=True)
class SolvePlan:
    """Everything the solver is told, so a failure can be explained in the recipe's terms."""

    recipe_id: str
    target_id: str
    subdir: str
    channels: tuple[str, ...]  # URLs, overrides applied, in priority order
    specs: tuple[str, ...]
    virtual_packages: tuple[tuple[str, str], ...]  # (name, version)
    manifest_file: str

    def describe(self) -> str:
        vps = ", ".join(f"{n}={v}" for n, v in self.virtual_packages)
        return (
            f"recipe {self.recipe_id} (target {self.target_id}, subdir {self.subdir}); "
            f"channels: {', '.join(self.channels)}; virtual packages: {vps}"
        )


def plan_solve(
    manifest: PixiManifest, target: TargetSpec, recipe_id: str, overrides: Mapping[str, str] | None = None
) -> SolvePlan:
    """What to ask the solver for ``target``; raises SolveError when rattler alone cannot do it."""
    if not manifest.channels:
        raise SolveError(
            f"{manifest.file} declares no channels",
            problems=[
                Problem(
                    message="workspace.channels is empty",
                    file=manifest.file,
                    key="workspace.channels",
                    line=manifest.line_of("channels", "workspace"),
                    fix='channels = ["conda-forge"]',
                )
            ],
        )
    deps = manifest.dependencies_for(target.subdir)
    return SolvePlan(
        recipe_id=recipe_id,
        target_id=target.target_id,
        subdir=target.subdir,
        channels=apply_overrides(manifest.channels, overrides),
        specs=tuple(d.match_spec() for d in deps.values()),
        virtual_packages=tuple(target.virtual_packages().items()),
        manifest_file=manifest.file,
    )


def _virtual_packages(plan: SolvePlan) -> list[Any]:
    from rattler import GenericVirtualPackage, PackageName, Version
    from rattler.package import BuildString

    return [
        GenericVirtualPackage(PackageName(name), Version(version), BuildString("0"))
        for name, version in plan.virtual_packages
    ]


def solve(plan: SolvePlan) -> list[Any]:
    """Run the rattler solver for ``plan``; returns RepoDataRecords or raises SolveError."""
    import rattler

    async def run() -> list[Any]:
        return await rattler.solve(
            sources=list(plan.channels),
            specs=list(plan.specs),
            platforms=[rattler.Subdir(plan.subdir), rattler.Subdir("noarch")],
            virtual_packages=_virtual_packages(plan),
            gateway=rattler.Gateway(),
            channel_relations="disabled",
        )

    with rattler_errors(lambda exc: _solve_error(exc, plan)):
        return asyncio.run(run())


def _solve_error(exc: Exception, plan: SolvePlan) -> SolveError:
    return SolveError(
        f"cannot solve {plan.recipe_id} for {plan.target_id}",
        problems=[
            Problem(
                message=_first_lines(str(exc)),
                file=plan.manifest_file,
                key="dependencies",
                value=", ".join(plan.specs),
                fix=_solve_fix(plan),
            )
        ],
        fix=plan.describe(),
    )


def manifest_exclude_newer(manifest: PixiManifest) -> str | None:
    """``[workspace] exclude-newer`` (pixi's resolution time bound), None when unset."""

    return manifest_options(manifest)[1]


def _first_lines(text: str, limit: int = 40) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:limit]) + ("\n..." if len(lines) > limit else "")


def _solve_fix(plan: SolvePlan) -> str:
    cuda = dict(plan.virtual_packages).get("__cuda")
    hint = f"check that the channels hold builds of every spec for {plan.subdir}" + (
        f" that run with __cuda={cuda} (e.g. pytorch *cuda* builds and cuda-version {cuda}.*)" if cuda else ""
    )
    return (
        f"{hint}; for an air-gapped mirror pass --channel-override NAME=URL (or {OVERRIDES_ENV}=NAME=URL,...), "
        f"then `scrollcase lock {plan.recipe_id}`"
    )


def write_lock(plan: SolvePlan, records: Sequence[Any], path: Path, pypi: PypiLock | None = None) -> Path:
    """Write ``records`` (and ``pypi``'s wheels) as a pixi lock for ``plan`` to ``path`` atomically."""
    from rattler import LockChannel, LockFile, LockPlatform

    vps = [f"{name}={version}" for name, version in plan.virtual_packages]
    platform = LockPlatform(plan.subdir, virtual_packages=vps)
    lock = LockFile([platform])
    lock.set_channels(LOCK_ENVIRONMENT, [LockChannel(c) for c in plan.channels])
    for record in sorted(records, key=lambda r: str(r.name.normalized)):
        lock.add_conda_package(LOCK_ENVIRONMENT, platform, record)
    for wheel in pypi.wheels if pypi else ():
        lock.add_pypi_package(LOCK_ENVIRONMENT, platform, wheel.name, wheel.version, wheel.url)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".lock-") as scratch:
        tmp = Path(scratch) / "pixi.lock"
        lock.to_path(tmp)
        text = tmp.read_text(encoding="utf-8")
    if pypi is not None and pypi.wheels:
        text = pypi_lockfile.add_pypi_fields(text, pypi, LOCK_ENVIRONMENT)
    write_atomic(path, text.encode("utf-8"))
    return path


# py-rattler 0.28's LockFile writer always writes this format (read by pixi >= 0.68).
WRITTEN_LOCK_VERSION = 7


def lock_recipe(
    recipe_dir: RecipeDir,
    *,
    channel_overrides: Mapping[str, str] | None = None,
    exclude_newer: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Path:
    """Solve ``recipe_dir``'s pixi.toml for its target and write ``recipe_dir/pixi.lock``."""

    manifest = load_manifest(recipe_dir.manifest_file)
    recipe = recipe_dir.recipe
    if not pixi_reads(recipe.pixiVersion, WRITTEN_LOCK_VERSION):
        needed = ".".join(str(p) for p in MIN_PIXI_FOR_LOCK[WRITTEN_LOCK_VERSION])
        raise LockError(
            f"{recipe.recipeId} pins pixi {recipe.pixiVersion}, which cannot read the lock format "
            f"py-rattler writes (v{WRITTEN_LOCK_VERSION}, pixi >= {needed})",
            problems=[
                Problem(
                    message="pixiVersion too old for lock format v7",
                    file=describe_path(recipe_dir.recipe_file),
                    key="pixiVersion",
                    value=recipe.pixiVersion,
                    fix=f"set pixiVersion to {needed} or newer",
                )
            ],
            fix=f"or lock with that pixi: `scrollcase lock {recipe.recipeId} --use-pixi`",
        )
    plan = plan_solve(manifest, recipe.target.spec, recipe.recipeId, channel_overrides)
    exclude_newer = exclude_newer or manifest_exclude_newer(manifest)
    records = solve(plan)
    pypi = lock_pypi(manifest, recipe.target.spec, records, recipe.recipeId, exclude_newer, progress)
    return write_lock(plan, records, recipe_dir.lock_file, pypi)


def lock_pypi(
    manifest: PixiManifest,
    target: TargetSpec,
    records: Sequence[Any],
    recipe_id: str,
    exclude_newer: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> PypiLock | None:
    """Resolve ``[pypi-dependencies]`` with uv for ``target`` after the conda solve (None: there are none)."""

    pypi_plan = resolve.plan_resolution(manifest, target, records, recipe_id, exclude_newer)
    if not pypi_plan.requirements:
        return None
    progress(
        f"resolving {len(pypi_plan.requirements)} PyPI requirement(s) with uv for "
        f"{pypi_plan.python_platform}, Python {pypi_plan.python_version}"
    )
    resolved = resolve.resolve(pypi_plan)
    cache = user_cache_dir()
    fetchers = default_fetchers()

    def download(w: resolve.ResolvedWheel) -> Path:
        name = urllib.parse.unquote(w.url.rsplit("/", 1)[-1])
        return wheels.fetch_wheel(
            wheels.WheelSource(w.name, w.version, w.url, name, w.sha256), usercache.WHEEL_CACHE.folder(cache), fetchers
        )

    meta = metadata.wheel_metadata(resolved, usercache.METADATA_CACHE.folder(cache), download)
    return PypiLock(pypi_plan.indexes, tuple(resolved), meta)


def locked_records(lock_path: Path, subdir: str, environment: str = LOCK_ENVIRONMENT) -> list[Any]:
    """The conda RepoDataRecords locked for (``environment``, ``subdir``), for installing."""
    from rattler import LockFile

    shown = describe_path(lock_path)
    if not lock_path.is_file():
        raise LockError(f"{shown} does not exist", fix=f"run `scrollcase lock {RECIPE_ID}` and commit pixi.lock")
    fix = f"regenerate it with `scrollcase lock {RECIPE_ID}`"
    with rattler_errors(lambda exc: LockError(f"{shown} cannot be read: {_first_lines(str(exc), 5)}", fix=fix)):
        lock = LockFile.from_path(lock_path)
    env = lock.environment(environment)
    if env is None:
        known = ", ".join(name for name, _ in lock.environments())
        raise LockError(
            f"{shown} has no environment {environment!r} (has: {known or 'none'})",
            fix=f"regenerate it with `scrollcase lock {RECIPE_ID}`",
        )
    for platform in env.platforms():
        if str(platform.subdir) == subdir:
            return list(env.conda_repodata_records_for_platform(platform) or [])
    raise LockError(
        f"{shown} does not cover {subdir} in environment {environment!r}",
        fix=f"regenerate it with `scrollcase lock {RECIPE_ID}`",
    )


def pixi_version(executable: str) -> str | None:
    """``0.73.0`` from ``pixi --version`` (prints ``pixi 0.73.0``), None when it does not run."""
    out = proc.run([executable, "--version"], timeout=60)
    match = re.search(r"(\d+\.\d+\.\d+)", out.stdout)
    return match.group(1) if match else None


def find_pixi(expected: str) -> str:
    executable = shutil.which("pixi")
    if executable is None:
        raise HostError(
            "--use-pixi: no pixi on PATH",
            fix=f"install pixi {expected} (https://pixi.sh), or drop --use-pixi to solve with py-rattler",
        )
    found = pixi_version(executable)
    if found != expected:
        raise HostError(
            f"--use-pixi: {executable} is pixi {found or 'unknown'}, the recipe pins pixi {expected}",
            fix=f"install pixi {expected}, or update pixiVersion in recipe.json",
        )
    return executable


def lock_with_pixi(recipe_dir: RecipeDir) -> Path:
    """Run ``pixi lock`` on a scratch copy of pixi.toml, then move the lock in place (atomic)."""
    executable = find_pixi(recipe_dir.recipe.pixiVersion)
    with tempfile.TemporaryDirectory(dir=recipe_dir.path, prefix=".pixi-lock-") as scratch:
        work = Path(scratch)
        shutil.copy2(recipe_dir.manifest_file, work / "pixi.toml")
        if recipe_dir.lock_file.exists():
            shutil.copy2(recipe_dir.lock_file, work / "pixi.lock")
        done = proc.run([executable, "lock", "--manifest-path", str(work / "pixi.toml")], timeout=None)
        if done.returncode != 0 or not (work / "pixi.lock").is_file():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-30:])
            raise SolveError(
                f"pixi lock failed for {recipe_dir.recipe.recipeId} (target {recipe_dir.recipe.target.target_id})",
                problems=[
                    Problem(
                        message=tail or f"exit code {done.returncode}",
                        file=str(recipe_dir.manifest_file),
                        key="dependencies",
                        fix="fix the specs or channels pixi names above",
                    )
                ],
            )
        move_into_place(work / "pixi.lock", recipe_dir.lock_file)
    return recipe_dir.lock_file
