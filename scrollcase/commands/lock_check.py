"""``scrollcase lock-check [RECIPES...]``: prove committed locks are fresh and the build their target says.

Reads recipe.json, pixi.toml and pixi.lock of every recipe (no network, no pixi, no GPU), runs the
pure rules of :mod:`scrollcase.lock.rules` (pixi.toml on its own, as ``validate`` does) and of
:mod:`scrollcase.lock.check` (the lock against both), and reports every problem of every recipe in
one run.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scrollcase.commands import (
    CommandArgs,
    SubParsers,
    add_channel_override,
    add_command,
    add_recipe_list,
    add_recipes_root,
    handler,
)
from scrollcase.console import Console
from scrollcase.errors import RECIPE_ID, LockError, Problem, ScrollcaseError, UsageError, collect, describe_path
from scrollcase.lock import channels
from scrollcase.lock.check import ENVIRONMENT, LockCheckInput, LockCheckResult, check_lock
from scrollcase.lock.manifest import load_manifest
from scrollcase.lock.read import parse_lock, read_lock_text
from scrollcase.lock.rules import manifest_problems
from scrollcase.recipe.loader import LOCK_FILE, MANIFEST_FILE, discover_recipes, load_recipe, resolve_recipe
from scrollcase.reports.junit import write_junit
from scrollcase.reports.outcome import RecipeOutcome, failures, junit_cases

NAME = "lock-check"
HELP = "check committed pixi.lock files against pixi.toml and the recipe's target"
DESCRIPTION = (
    "For every recipe: pixi.toml follows the rules for the target (as `validate` checks: "
    "platforms, CUDA system requirement and cuda-version pin, pytorch build, python, torch index); "
    "the lock exists and parses, covers the target platform, was solved "
    "with the manifest's channels, satisfies every dependency spec of pixi.toml (not stale), and for a "
    "CUDA target holds a GPU build of torch for exactly the target's CUDA version with a matching "
    "cuda-version record (or CUDA wheels for that version); a CPU target holding CUDA builds fails "
    "too.  All problems of all recipes are reported in one run, each with file and line.  Exit 4 "
    "when any recipe fails."
)


@dataclass(frozen=True)
class LockCheckArgs(CommandArgs):
    recipes: tuple[str, ...]
    recipes_root: Path
    channel_override: tuple[str, ...]
    junit: Path | None


Outcome = RecipeOutcome[LockCheckResult]


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    add_recipe_list(p, "recipes", "RECIPE", "recipe IDs or folders")
    add_recipes_root(p)
    add_channel_override(p, f"the same overrides `lock` was given (also {channels.OVERRIDES_ENV})")
    p.add_argument(
        "--junit",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the results as JUnit XML: a case per sound recipe, a failed case per problem, at its "
        "file and line (`scrollcase report junit` turns it into annotations and a summary)",
    )
    p.set_defaults(handler=handler(LockCheckArgs, run))


def recipe_folders(args: LockCheckArgs) -> list[Path]:
    if args.recipes:
        return [resolve_recipe(r, args.recipes_root).path for r in args.recipes]
    found = discover_recipes(args.recipes_root)
    if not found:
        raise UsageError(
            f"no recipes found under {args.recipes_root}/",
            fix="pass recipe folders as arguments or create recipes/<recipeId>/recipe.json",
        )
    return found


def problems_of(error: ScrollcaseError, file: str) -> tuple[Problem, ...]:
    if error.problems:
        return tuple(error.problems)
    return (Problem(message=error.message, file=file, fix=error.fix),)


def check_folder(folder: Path, overrides: Mapping[str, str]) -> Outcome:
    """Read one recipe's three files, run pixi.toml's rules (:mod:`scrollcase.lock.rules`, as ``validate``
    does) and then the lock rules; reading errors become problems beside the rules' findings."""
    shown = describe_path(folder) or str(folder)
    recipe_id: str | None = None
    rules: tuple[Problem, ...] = ()
    try:
        recipe = load_recipe(folder)
        recipe_id = recipe.recipeId
        manifest = load_manifest(folder / MANIFEST_FILE, describe_path(folder / MANIFEST_FILE))
        rules = tuple(manifest_problems(manifest, recipe))
        lock_file = str(Path(shown) / LOCK_FILE)
        lock = parse_lock(read_lock_text(folder / LOCK_FILE), lock_file, environments={ENVIRONMENT})
        inp = LockCheckInput(
            recipe.recipeId,
            recipe.target.spec,
            manifest,
            lock,
            channels.apply_overrides(manifest.channels, overrides),
            pixi_version=recipe.pixiVersion,
        )
        result = check_lock(inp)
    except ScrollcaseError as error:
        return Outcome(shown, recipe_id, (*rules, *problems_of(error, shown)))
    return Outcome(shown, recipe_id, (*rules, *result.problems), result)


def facts(outcome: Outcome) -> dict[str, Any]:
    """What lock-check learned of one recipe besides its problems, for ``--json``."""
    result = outcome.detail
    return {"platform": result.platform if result else None, "torch": result.torch.to_json() if result else None}


def line(outcome: Outcome) -> str:
    status = "OK  " if outcome.ok else "FAIL"
    torch = outcome.detail.torch if outcome.detail else None
    what = (
        f"torch {torch.version} {torch.build or ''} -> {torch.accelerator}".replace("  ", " ")
        if torch and torch.provider
        else "no torch"
    )
    tail = what if outcome.ok else f"{len(outcome.problems)} problem(s)"
    return f"{status}  {outcome.recipe_id or outcome.path}: {tail}"


def named(outcome: Outcome) -> Outcome:
    """The outcome with its recipe's ID in the fixes written before the recipe was known (reading its lock)."""
    if outcome.recipe_id is None:
        return outcome
    return replace(outcome, problems=tuple(p.for_recipe(outcome.recipe_id) for p in outcome.problems))


def relock_fix(failed: Sequence[Outcome], overrides: Mapping[str, str]) -> str:
    """Re-lock each failed recipe by its ID, with this run's channel overrides when it had any."""
    commands = ", ".join(f"`scrollcase lock {o.recipe_id or RECIPE_ID}`" for o in failed)
    fix = f"fix pixi.toml if needed, then {commands} and commit pixi.lock"
    if overrides:
        pairs = ",".join(f"{name}={url}" for name, url in overrides.items())
        fix += f" (with the same channel overrides: {channels.OVERRIDES_ENV}={pairs})"
    return fix


def run(args: LockCheckArgs, console: Console) -> int:
    overrides = channels.overrides_from_env(args.channel_override)
    outcomes = [named(check_folder(folder, overrides)) for folder in recipe_folders(args)]
    if args.junit is not None:
        write_junit(args.junit, NAME, junit_cases(outcomes, NAME, LOCK_FILE))
    failed = failures(outcomes)
    if failed:
        for outcome in outcomes:
            console.progress(line(outcome))
        problems = collect(p for o in failed for p in o.problems)
        raise LockError(
            f"lock-check: {len(failed)} of {len(outcomes)} recipe(s) failed ({len(problems)} problem(s))",
            problems=problems,
            fix=relock_fix(failed, overrides),
        )
    console.result(
        {"ok": True, "recipes": [o.to_json(facts(o)) for o in outcomes]},
        "\n".join(line(o) for o in outcomes) + f"\n{len(outcomes)} lock(s) OK",
    )
    return 0
