"""``scrollcase lock-check [RECIPES...]``: prove committed locks are fresh and the build their target says.

Reads recipe.json, pixi.toml and pixi.lock of every recipe (no network, no pixi, no GPU), runs the
pure rules of :mod:`scrollcase.pixi.lockcheck`, and reports every problem of every recipe in one run.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.console import Console
from scrollcase.errors import LockError, Problem, ScrollcaseError, UsageError, collect, describe_path
from scrollcase.pixi import engine
from scrollcase.pixi.lockcheck import ENVIRONMENT, LockCheckInput, LockCheckResult, check_lock
from scrollcase.pixi.lockfile import parse_lock, read_lock_text
from scrollcase.pixi.manifest import load_manifest
from scrollcase.recipe.loader import LOCK_FILE, MANIFEST_FILE, discover_recipes, load_recipe, resolve_recipe

NAME = "lock-check"


@dataclass(frozen=True)
class Outcome:
    path: str
    recipe_id: str | None
    result: LockCheckResult | None
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "recipeId": self.recipe_id,
            "ok": self.ok,
            "platform": self.result.platform if self.result else None,
            "torch": self.result.torch.to_json() if self.result else None,
            "problems": [p.to_json() for p in self.problems],
        }

    def line(self) -> str:
        status = "OK  " if self.ok else "FAIL"
        torch = self.result.torch if self.result else None
        what = (
            f"torch {torch.version} {torch.build or ''} -> {torch.accelerator}".replace("  ", " ")
            if torch and torch.provider
            else "no torch"
        )
        tail = what if self.ok else f"{len(self.problems)} problem(s)"
        return f"{status}  {self.recipe_id or self.path}: {tail}"


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        NAME,
        parents=[common],
        help="check committed pixi.lock files against pixi.toml and the recipe's target",
        description="For every recipe: the lock exists and parses, covers the target platform, was solved "
        "with the manifest's channels, satisfies every dependency spec of pixi.toml (not stale), and for a "
        "CUDA target holds a GPU build of torch for exactly the recipe's cudaVersion with a matching "
        "cuda-version record (or CUDA wheels for that version); a CPU target holding CUDA builds fails "
        "too.  All problems of all recipes are reported in one run, each with file and line.  Exit 4 "
        "when any recipe fails.",
    )
    p.add_argument(
        "recipes",
        nargs="*",
        metavar="RECIPE",
        help="recipe IDs or folders (default: every recipe under --recipes-root)",
    )
    p.add_argument("--recipes-root", type=Path, default=Path("recipes"), help="where recipes live (default: recipes)")
    p.add_argument(
        "--channel-override",
        action="append",
        default=[],
        metavar="NAME=URL",
        help=f"the same overrides `lock` was given (also {engine.OVERRIDES_ENV})",
    )
    p.set_defaults(handler=run)


def recipe_folders(args: argparse.Namespace) -> list[Path]:
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
    """Read one recipe's three files and run the lock rules; reading errors become problems."""
    shown = describe_path(folder) or str(folder)
    recipe_id: str | None = None
    try:
        recipe = load_recipe(folder)
        recipe_id = recipe.recipeId
        manifest = load_manifest(Path(shown) / MANIFEST_FILE)
        lock_file = str(Path(shown) / LOCK_FILE)
        lock = parse_lock(read_lock_text(folder / LOCK_FILE), lock_file, environments={ENVIRONMENT})
        inp = LockCheckInput(
            recipe.recipeId,
            recipe.target.spec,
            manifest,
            lock,
            engine.apply_overrides(manifest.channels, overrides),
            pixi_version=recipe.pixiVersion,
        )
        result = check_lock(inp)
    except ScrollcaseError as error:
        return Outcome(shown, recipe_id, None, problems_of(error, shown))
    return Outcome(shown, recipe_id, result, result.problems)


def run(args: argparse.Namespace, console: Console) -> int:
    overrides = engine.overrides_from_env(args.channel_override)
    outcomes = [check_folder(folder, overrides) for folder in recipe_folders(args)]
    failed = [o for o in outcomes if not o.ok]
    if failed:
        for outcome in outcomes:
            console.progress(outcome.line())
        problems = collect(p for o in failed for p in o.problems)
        raise LockError(
            f"lock-check: {len(failed)} of {len(outcomes)} recipe(s) failed ({len(problems)} problem(s))",
            problems=problems,
            fix="fix pixi.toml if needed, then `scrollcase lock <recipeId>` and commit pixi.lock",
        )
    console.result(
        {"ok": True, "recipes": [o.to_json() for o in outcomes]},
        "\n".join(o.line() for o in outcomes) + f"\n{len(outcomes)} lock(s) OK",
    )
    return 0
