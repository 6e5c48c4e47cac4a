"""Reading recipe folders from disk and turning validation failures into located problems.

Reading (bytes from a path) is kept apart from :func:`parse_recipe` (bytes -> Recipe) so tests need
no disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scrollcase.errors import Problem, RecipeError, UsageError
from scrollcase.recipe import Recipe

RECIPE_FILE = "recipe.json"
MANIFEST_FILE = "pixi.toml"
LOCK_FILE = "pixi.lock"
MAX_RECIPE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class RecipeDir:
    """A recipe folder on disk and its parsed recipe."""

    path: Path
    recipe: Recipe

    @property
    def recipe_file(self) -> Path:
        return self.path / RECIPE_FILE

    @property
    def manifest_file(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK_FILE


def _json_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problem_from_pydantic(err: Any, file: str) -> Problem:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    ctx = err.get("ctx") or {}
    return Problem(
        message=err["msg"],
        file=file,
        key=_json_path(loc) or None,
        value=None if err["type"] == "missing" else json.dumps(err.get("input"), default=str)[:200],
        fix=ctx.get("fix") or _default_fix(err),
    )


def _default_fix(err: Any) -> str | None:
    kind = err["type"]
    if kind == "missing":
        return f"add the required field {err['loc'][-1]!r}"
    if kind == "extra_forbidden":
        return f"remove the unknown field {err['loc'][-1]!r}"
    return None


def parse_recipe(data: bytes | str, file: str = RECIPE_FILE, folder_name: str | None = None) -> Recipe:
    """Validate recipe.json content; raise :class:`RecipeError` listing every problem."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(f"{file} is not valid JSON", problems=[Problem(
            message=exc.msg, file=file, line=exc.lineno, column=exc.colno,
            fix="fix the JSON syntax at that position")]) from None
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as exc:
        problems = [_problem_from_pydantic(e, file) for e in exc.errors()]
        raise RecipeError(f"{file} has {len(problems)} problem(s)", problems=problems) from None
    problems = [Problem(message=m, file=file, key=k, value=json.dumps(v), fix=f)
                for k, m, v, f in recipe.cross_field_problems()]
    if folder_name is not None and folder_name != recipe.recipeId:
        problems.append(Problem(message="the recipe folder must be named after recipeId", file=file,
                                key="recipeId", value=json.dumps(recipe.recipeId),
                                fix=f"rename the folder {folder_name!r} to {recipe.recipeId!r}"))
    if problems:
        raise RecipeError(f"{file} has {len(problems)} problem(s)", problems=problems)
    return recipe


def read_recipe_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_RECIPE_BYTES:
            raise RecipeError(f"{path} is {size} bytes; a recipe.json is at most {MAX_RECIPE_BYTES}",
                              fix="recipe.json holds metadata only: move large data into assets")
        return path.read_bytes()
    except FileNotFoundError:
        raise RecipeError(f"{path} does not exist",
                          fix="create recipe.json in the recipe folder (see `scrollcase schema recipe`)") from None
    except OSError as exc:
        raise RecipeError(f"cannot read {path}: {exc.strerror}") from None


def load_recipe(path: Path) -> Recipe:
    """Read and validate ``path`` (a recipe.json or a recipe folder)."""
    file = path / RECIPE_FILE if path.is_dir() else path
    data = read_recipe_bytes(file)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{file} is not UTF-8", problems=[Problem(
            message=f"byte {exc.start} is not valid UTF-8", file=str(file),
            fix="save the file as UTF-8")]) from None
    return parse_recipe(text, file=str(file), folder_name=file.parent.name)


def resolve_recipe(arg: str, recipes_root: Path = Path("recipes")) -> RecipeDir:
    """A recipe given as an ID (folder under ``recipes/``), a folder, or a recipe.json path."""
    candidates = [Path(arg), recipes_root / arg]
    for candidate in candidates:
        if candidate.is_file() and candidate.name == RECIPE_FILE:
            return RecipeDir(candidate.parent, load_recipe(candidate))
        if (candidate / RECIPE_FILE).is_file():
            return RecipeDir(candidate, load_recipe(candidate))
    known = sorted(p.name for p in recipes_root.glob("*/") if (p / RECIPE_FILE).is_file()) \
        if recipes_root.is_dir() else []
    hint = f"known recipes: {', '.join(known)}" if known else f"no recipes under {recipes_root}/"
    raise UsageError(f"no recipe {arg!r} (looked for {', '.join(str(c) for c in candidates)})", fix=hint)


def discover_recipes(recipes_root: Path = Path("recipes")) -> list[Path]:
    """Every recipe folder under ``recipes_root``, sorted."""
    if not recipes_root.is_dir():
        return []
    return sorted(p.parent for p in recipes_root.glob(f"*/{RECIPE_FILE}"))
