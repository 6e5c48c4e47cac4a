"""``scrollcase lock RECIPE``: solve the recipe's pixi.toml for its target and write pixi.lock."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from scrollcase.commands import (
    CommandArgs,
    SubParsers,
    add_channel_override,
    add_command,
    add_recipes_root,
    handler,
)
from scrollcase.console import Console
from scrollcase.errors import UsageError, about_recipe, collect, describe_path
from scrollcase.lock import channels
from scrollcase.lock import solve as engine
from scrollcase.lock.manifest import load_manifest
from scrollcase.lock.read import load_lock
from scrollcase.lock.rules import manifest_problems
from scrollcase.recipe.loader import RecipeDir, resolve_recipe
from scrollcase.targets.classify import classify_torch

NAME = "lock"
HELP = "solve a recipe for its target and write its pixi.lock"
DESCRIPTION = (
    "Solve the recipe's pixi.toml for the target's conda subdir with the virtual packages "
    "the target implies (__glibc/__linux/__unix, __osx or __win, and its accelerator's: __cuda=<the "
    "target's CUDA version> for CUDA) using py-rattler, then resolve [pypi-dependencies] with uv for the "
    "target's wheel platform and the exact Python of the conda solve (conda's Python packages held at "
    "their versions; for CUDA targets only wheels built for the target's CUDA), and write pixi.lock "
    "(lock format v7) atomically.  No pixi binary is "
    "needed; with "
    "--use-pixi the pixi on PATH (which must match the recipe's pixiVersion) solves instead."
)


@dataclass(frozen=True)
class LockArgs(CommandArgs):
    recipe: str
    recipes_root: Path
    channel_override: tuple[str, ...]
    exclude_newer: str | None
    use_pixi: bool


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("recipe", metavar="RECIPE", help="recipe ID (folder under --recipes-root) or folder")
    add_recipes_root(p)
    add_channel_override(
        p, f"solve from URL instead of channel NAME (repeatable; also {channels.OVERRIDES_ENV}=NAME=URL,NAME=URL)"
    )
    p.add_argument(
        "--exclude-newer",
        metavar="DATE",
        help="resolve as if nothing newer than DATE (YYYY-MM-DD or RFC 3339) were published, for "
        "a reproducible re-lock (default: [workspace] exclude-newer of pixi.toml)",
    )
    p.add_argument(
        "--use-pixi",
        action="store_true",
        help="run the pixi binary on PATH (must match pixiVersion) instead of py-rattler",
    )
    p.set_defaults(handler=handler(LockArgs, run))


def run(args: LockArgs, console: Console) -> int:
    recipe_dir = resolve_recipe(args.recipe, args.recipes_root)
    with about_recipe(recipe_dir.recipe.recipeId):
        return lock_one(recipe_dir, args, console)


def warn_about_rules(recipe_dir: RecipeDir, console: Console) -> None:
    """pixi.toml's broken rules, as warnings: the lock is still solved (a half-edited pixi.toml may be locked
    on purpose), but lock-check and validate refuse the recipe until they are fixed.  A pixi.toml that
    cannot be read stops here, as the solve would."""
    path = recipe_dir.manifest_file
    problems = manifest_problems(load_manifest(path, describe_path(path)), recipe_dir.recipe)
    for problem in collect(problems):
        console.progress(replace(problem, severity="warning").render())
    if problems:
        recipe_id = recipe_dir.recipe.recipeId
        console.progress(f"warning: `scrollcase lock-check` and `validate` refuse {recipe_id} until these are fixed")


def lock_one(recipe_dir: RecipeDir, args: LockArgs, console: Console) -> int:
    overrides = channels.overrides_from_env(args.channel_override)
    target = recipe_dir.recipe.target.spec
    warn_about_rules(recipe_dir, console)
    console.progress(
        f"solving {recipe_dir.recipe.recipeId} for {target.subdir} "
        f"({', '.join(f'{k}={v}' for k, v in target.virtual_packages().items())})"
    )
    if args.use_pixi:
        if overrides:
            raise UsageError(
                "--use-pixi cannot apply channel overrides",
                fix="configure mirrors in pixi's own config, or drop --use-pixi",
            )
        from scrollcase.lock import solve as runner

        path = runner.lock_with_pixi(recipe_dir)
    else:
        path = engine.lock_recipe(
            recipe_dir, channel_overrides=overrides, exclude_newer=args.exclude_newer, progress=console.progress
        )
    lock = load_lock(path)
    packages = lock.environments["default"].packages.get(target.subdir, ())
    torch = classify_torch(packages)
    shown = describe_path(path)
    data = {
        "recipeId": recipe_dir.recipe.recipeId,
        "lock": shown,
        "lockVersion": lock.version,
        "subdir": target.subdir,
        "packages": len(packages),
        "torch": torch.to_json(),
    }
    torch_text = (
        f"; torch {torch.version}{' ' + torch.build if torch.build else ''} -> {torch.accelerator}"
        if torch.provider
        else ""
    )
    console.result(data, f"wrote {shown} (lock v{lock.version}, {len(packages)} packages{torch_text})")
    return 0
