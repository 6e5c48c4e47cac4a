"""``scrollcase validate [PATHS...]``: check recipe.json files and their folders, all problems at once."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.console import Console
from scrollcase.errors import Problem, RecipeError, UsageError, describe_path
from scrollcase.recipe.loader import RECIPE_FILE, check_recipe_dir, discover_recipes

NAME = "validate"


@dataclass(frozen=True)
class Outcome:
    path: str
    recipe_id: str | None
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "recipeId": self.recipe_id,
            "ok": self.ok,
            "problems": [p.to_json() for p in self.problems],
        }

    def line(self) -> str:
        name = f" ({self.recipe_id})" if self.recipe_id else ""
        if self.ok:
            return f"OK    {self.path}{name}"
        return f"FAIL  {self.path}{name}: {len(self.problems)} problem(s)"


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        NAME,
        parents=[common],
        help="check recipes (recipe.json + folder) and report every problem",
        description="Validate recipe folders: every field of recipe.json, the cross-field rules, the folder "
        "name, pixi.toml present and parity.script present.  All problems of all recipes are reported "
        "in one run, each with file, line, JSON path, bad value and fix.  Exit 3 when any recipe fails.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="recipe folders or recipe.json files (default: every recipe under --recipes-root)",
    )
    p.add_argument("--recipes-root", type=Path, default=Path("recipes"), help="where recipes live (default: recipes)")
    p.set_defaults(handler=run)


def targets_to_check(paths: list[str], root: Path) -> list[Path]:
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


def validate_paths(files: list[Path]) -> list[Outcome]:
    outcomes = []
    for file in files:
        recipe, problems = check_recipe_dir(file)
        recipe_id = recipe.recipeId if recipe is not None else None
        outcomes.append(Outcome(describe_path(file), recipe_id, tuple(problems)))
    return outcomes


def run(args: argparse.Namespace, console: Console) -> int:
    outcomes = validate_paths(targets_to_check(list(args.paths), args.recipes_root))
    failed = [o for o in outcomes if not o.ok]
    summary = f"{len(outcomes) - len(failed)} of {len(outcomes)} recipe(s) valid"
    if console.json_mode:
        console.result({"recipes": [o.to_json() for o in outcomes], "ok": not failed})
        return RecipeError.exit_code if failed else 0
    console.result(None, "\n".join([*(o.line() for o in outcomes), summary]))
    if failed:
        problems = [p for o in failed for p in o.problems]
        raise RecipeError(
            f"{len(failed)} of {len(outcomes)} recipe(s) failed validation",
            problems=problems,
            fix="fix each problem above; docs/recipes.md describes every field",
        )
    return 0
