"""``scrollcase build``'s plan: what to build, where, from which locked packages, and whether this host may.

:func:`plan_build` is pure (the box layout, the asset sources, every folder of the build, the
provenance); :func:`locked_install` reads the recipe's pixi.lock after the accelerator's lock rule
(lock-check's) so a lock for another accelerator fails before anything is downloaded.
:mod:`scrollcase.build.pipeline` executes a plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scrollcase.build import assets as asset_mod
from scrollcase.build import sbom as sbom_mod
from scrollcase.errors import BuildError, HostError, Problem, describe_path
from scrollcase.format.layout import BoxLayout, box_layout
from scrollcase.format.provenance import BuildProvenance, provenance_from_env
from scrollcase.io import cache as usercache
from scrollcase.io.files import user_cache_dir
from scrollcase.lock import solve as engine
from scrollcase.lock.check import LockCheckInput, locked_accelerator_problems
from scrollcase.lock.manifest import load_manifest
from scrollcase.lock.read import load_lock
from scrollcase.recipe.loader import RecipeDir
from scrollcase.recipe.model import Recipe
from scrollcase.targets.vocabulary import host_platform
from scrollcase.wheels import source as wheels_mod

Weights = Literal["bundled", "on-demand"]


@dataclass(frozen=True)
class BuildPlan:
    recipe_dir: RecipeDir
    layout: BoxLayout
    weights: Weights
    out_dir: Path
    work_dir: Path  # everything of this build before it is complete; wiped at the start
    package_cache: Path
    asset_cache: Path
    wheel_cache: Path
    unpacked_cache: Path  # wheels unpacked and checked once, then linked into every box (wheels/cache.py)
    pack_cache: Path  # compressed frames of packed units, reused by a rebuild (format/archive/packcache.py)
    pyc_cache: Path  # bytecode of unchanged modules, reused by a rebuild (build/pyccache.py)
    junit_path: Path
    assets: tuple[asset_mod.AssetSource, ...]
    prune: tuple[str, ...]
    provenance: BuildProvenance | None = None  # set on GitHub Actions only: elsewhere the bytes never change

    @property
    def recipe(self) -> Recipe:
        return self.recipe_dir.recipe

    @property
    def box_root(self) -> Path:
        return self.work_dir / "box"

    @property
    def archive_path(self) -> Path:
        return self.out_dir / self.recipe.archive_name

    @property
    def release_path(self) -> Path:
        return self.out_dir / self.recipe.release_name

    @property
    def sbom_path(self) -> Path:
        return self.out_dir / sbom_mod.sbom_name(self.recipe.archive_name)

    @property
    def bundled(self) -> bool:
        return self.weights == "bundled"


@dataclass(frozen=True)
class LockedInstall:
    """What the lock pins for the target: conda records (rattler's) and PyPI wheels."""

    records: tuple[Any, ...]
    wheels: tuple[wheels_mod.WheelSource, ...] = ()


def locked_install(plan: BuildPlan) -> LockedInstall:
    """Everything to install from the recipe's pixi.lock for the target's platform, after the static
    accelerator proof (the lock-check's rule) so that a lock for another CUDA fails before any download."""

    subdir = plan.recipe.target.spec.subdir
    lock = plan.recipe_dir.lock_file
    check_locked_accelerator(plan.recipe_dir)
    records = engine.locked_records(lock, subdir)
    wheels = wheels_mod.plan_wheels(wheels_mod.locked_wheels(lock, subdir), lock, subdir)
    return LockedInstall(tuple(records), tuple(wheels))


def check_locked_accelerator(recipe_dir: RecipeDir) -> None:
    """BuildError when the lock holds another accelerator than the recipe's target (lock-check's rule)."""

    if not recipe_dir.lock_file.is_file():
        return  # reading the lock for install explains this one
    manifest = load_manifest(recipe_dir.manifest_file)
    recipe = recipe_dir.recipe
    inp = LockCheckInput(
        recipe.recipeId, recipe.target.spec, manifest, load_lock(recipe_dir.lock_file), manifest.channels
    )
    problems = locked_accelerator_problems(inp)
    if problems:
        raise BuildError(
            f"{describe_path(recipe_dir.lock_file)} does not hold what {recipe.target_id} promises, "
            "so nothing was downloaded or installed",
            problems=problems,
        )


def check_host(target_platform: str, target_arch: str, target_id: str, host: tuple[str, str]) -> None:
    """Refuse cross-building: the self-test only proves anything on the target's own kind of machine."""
    if (target_platform, target_arch) != host:
        raise HostError(
            f"cannot build {target_id} on a {host[0]}-{host[1]} machine: boxes are built natively",
            problems=[
                Problem(
                    message="the self-test runs the box's own interpreter, which needs matching hardware",
                    key="target",
                    value=f"{target_platform}-{target_arch}",
                    fix=f"run the build on a {target_platform}-{target_arch} machine "
                    "(e.g. the CI matrix's runner for this target)",
                )
            ],
        )


def plan_build(
    recipe_dir: RecipeDir,
    *,
    weights: Weights = "bundled",
    out_dir: Path = Path(".scrollcase/dist"),
    state_dir: Path = Path(".scrollcase"),
    junit: Path | None = None,
    host: tuple[str, str] | None = None,
    cache_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> BuildPlan:
    """What the build will do and where, or an error when this host must not build the recipe."""
    recipe = recipe_dir.recipe
    check_host(recipe.target.platform, recipe.target.arch, recipe.target_id, host or host_platform())
    layout = box_layout(recipe.pythonEntryPoint, recipe.target.platform, recipe.pythonVersion, recipe.modelCacheSubdir)
    sources = asset_mod.plan_assets(recipe.assetBaseUrl, recipe.modelCacheSubdir, recipe.assets, recipe_dir.recipe_file)
    cache = cache_dir or state_dir / "cache"
    user_cache = cache_dir or user_cache_dir()  # GBs: kept across builds
    return BuildPlan(
        recipe_dir=recipe_dir,
        layout=layout,
        weights=weights,
        out_dir=out_dir,
        work_dir=state_dir / "work" / recipe.recipeId,
        package_cache=cache / "pkgs",
        asset_cache=usercache.ASSET_CACHE.folder(cache),
        wheel_cache=usercache.WHEEL_CACHE.folder(user_cache),
        unpacked_cache=usercache.UNPACKED_CACHE.folder(user_cache),
        pack_cache=usercache.PACK_FRAME_CACHE.folder(user_cache),
        pyc_cache=usercache.PYC_CACHE.folder(user_cache),
        junit_path=junit or state_dir / "reports" / f"selftest-{recipe.recipeId}.xml",
        assets=tuple(sources),
        prune=tuple(recipe.prunePaths),
        provenance=provenance_from_env(os.environ if env is None else env),
    )
