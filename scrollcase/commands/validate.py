"""``scrollcase validate [PATHS...]``: check recipe.json files and their folders, all problems at once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scrollcase.commands import (
    CommandArgs,
    SubParsers,
    add_command,
    add_recipe_list,
    add_recipes_root,
    fail_after_result,
    handler,
)
from scrollcase.console import Console
from scrollcase.errors import Problem, RecipeError, UsageError, describe_path
from scrollcase.lock.rules import recipe_manifest_problems
from scrollcase.recipe.loader import MANIFEST_FILE, RECIPE_FILE, check_recipe_dir, discover_recipes
from scrollcase.recipe.model import Recipe
from scrollcase.reports.outcome import RecipeOutcome, failures

NAME = "validate"
HELP = "check recipes (recipe.json + folder) and report every problem"
DESCRIPTION = (
    "Validate recipe folders: every field of recipe.json, the cross-field rules, the folder "
    "name, parity.script present, and pixi.toml present and following the rules for the target "
    "(platforms, CUDA system requirement and cuda-version pin, pytorch build, python, torch index).  "
    "All problems of all recipes are reported in one run, each with file, line, key, bad value and "
    "fix.  Exit 3 when any recipe fails."
)


@dataclass(frozen=True)
class ValidateArgs(CommandArgs):
    paths: tuple[str, ...]
    recipes_root: Path


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    add_recipe_list(p, "paths", "PATH", "recipe folders or recipe.json files")
    add_recipes_root(p)
    p.set_defaults(handler=handler(ValidateArgs, run))


def targets_to_check(paths: Sequence[str], root: Path) -> list[Path]:
    """The recipe.json files to validate for the command line ``paths``."""
    if not paths:
        found = discover_recipes(root)
        if not found:
            raise UsageError(
                f"no recipes found under {root}/",
                fix="pass recipe folders as arguments or create recipes/<recipeId>/recipe.json",
            )
        return [p / RECIPE_FILE for p in found]
    out: list[Path] = []
    for arg in paths:
        path = Path(arg)
        if path.is_dir() and not (path / RECIPE_FILE).exists() and not path.name.startswith("."):
            nested = discover_recipes(path)
            if nested:  # a folder of recipes, e.g. `validate recipes`
                out.extend(p / RECIPE_FILE for p in nested)
                continue
        out.append(path / RECIPE_FILE if path.is_dir() or not path.suffix else path)
    return out


def manifest_rules(file: Path, shown: str, recipe: Recipe) -> list[Problem]:
    """pixi.toml's rules for the recipe at ``file`` (shown as ``shown``); a missing pixi.toml is a folder
    problem already, reported once."""
    folder, shown_folder = (file, PurePosixPath(shown)) if file.is_dir() else (file.parent, PurePosixPath(shown).parent)
    if not (folder / MANIFEST_FILE).is_file():
        return []
    return recipe_manifest_problems(folder / MANIFEST_FILE, recipe, (shown_folder / MANIFEST_FILE).as_posix())


def validate_paths(files: list[Path]) -> list[RecipeOutcome[None]]:
    from scrollcase.build.assets import local_asset_problems  # the build's rules for assets, loaded when used

    outcomes: list[RecipeOutcome[None]] = []
    for file in files:
        recipe, problems = check_recipe_dir(file)
        if recipe is not None:  # file:// assets: their size and sha256, before any build
            problems = [*problems, *local_asset_problems(recipe, file / RECIPE_FILE if file.is_dir() else file)]
        shown = describe_path(file)
        if recipe is not None:
            problems = [*problems, *manifest_rules(file, shown, recipe)]
        recipe_id = recipe.recipeId if recipe is not None else None
        outcomes.append(RecipeOutcome(shown, recipe_id, tuple(problems)))
    return outcomes


def line(outcome: RecipeOutcome[None]) -> str:
    name = f" ({outcome.recipe_id})" if outcome.recipe_id else ""
    if outcome.ok:
        return f"OK    {outcome.path}{name}"
    return f"FAIL  {outcome.path}{name}: {len(outcome.problems)} problem(s)"


def run(args: ValidateArgs, console: Console) -> int:
    outcomes = validate_paths(targets_to_check(args.paths, args.recipes_root))
    failed = failures(outcomes)
    summary = f"{len(outcomes) - len(failed)} of {len(outcomes)} recipe(s) valid"
    console.result(
        {"recipes": [o.to_json() for o in outcomes], "ok": not failed},
        "\n".join([*(line(o) for o in outcomes), summary]),
    )
    if failed:
        problems = [p for o in failed for p in o.problems]
        error = RecipeError(
            f"{len(failed)} of {len(outcomes)} recipe(s) failed validation",
            problems=problems,
            fix="fix each problem above; docs/recipes.md describes every field",
        )
        fail_after_result(console, error)
    return 0
