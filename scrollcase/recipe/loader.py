"""Reading recipe folders from disk and turning validation failures into located problems.

Reading (bytes from a path) is kept apart from :func:`recipe_problems` (bytes -> Recipe or every
problem, each with its JSON path, line, column, bad value and fix) so unit tests need no disk.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from scrollcase.errors import Problem, RecipeError, UsageError, collect, describe_path
from scrollcase.recipe.jsonpos import JsonPath, PositionMap, has_duplicate_keys, position_map, render_path
from scrollcase.recipe.model import RULES_CHECKED, Recipe
from scrollcase.recipe.rules import RuleViolation, recipe_rules
from scrollcase.targets import registry

RECIPE_FILE = "recipe.json"
MANIFEST_FILE = "pixi.toml"
LOCK_FILE = "pixi.lock"
MAX_RECIPE_BYTES = 1024 * 1024  # recipe.json is metadata; anything bigger is a mistake, refused unread

# Common spellings of platform and arch values and what the recipe calls them (accelerators' own
# spellings, such as gpu and mps, come from the registry: targets/registry.py's device_aliases).
ALIASES = {
    "macos": "osx",
    "darwin": "osx",
    "mac": "osx",
    "win": "windows",
    "win32": "windows",
    "amd64": "x86_64",
    "x64": "x86_64",
}


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


# --- turning pydantic errors into problems -------------------------------------------------------


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside ``Model``, ``Model | None`` or ``list[Model]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _submodel(arg)
            if found:
                return found
    return None


def model_at(loc: JsonPath, root: type[BaseModel] = Recipe) -> type[BaseModel] | None:
    """The model class that validates the object at ``loc`` (list indexes are skipped)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        info = model.model_fields.get(part)
        model = _submodel(info.annotation) if info else None
    return model


def _unknown_key_fix(loc: JsonPath) -> tuple[str, str]:
    """(message, fix) for an unknown key, with a difflib "did you mean" against that level's fields."""
    key = str(loc[-1])
    model = model_at(loc[:-1])
    known = list(model.model_fields) if model else []
    lowered = {k.lower(): k for k in known}
    match = lowered.get(key.lower()) or next(iter(difflib.get_close_matches(key, known, n=1, cutoff=0.6)), None)
    if match:
        return f"unknown field {key!r}; did you mean {match!r}?", f"rename {key!r} to {match!r}"
    return f"unknown field {key!r}", f"remove {key!r}; fields allowed here: {', '.join(known)}"


def _literal_fix(err: Any) -> str:
    expected = (err.get("ctx") or {}).get("expected", "")
    value = err.get("input")
    aliases = ALIASES | {k: v for k, v in registry.device_aliases().items() if k != v}
    alias = aliases.get(value.lower()) if isinstance(value, str) else None
    if isinstance(value, str) and value.lower() != value and value.lower() in expected:
        alias = value.lower()
    hint = f"did you mean {alias!r}? " if alias and alias in expected else ""
    return f"{hint}use one of: {expected}"


_TYPE_FIXES = {
    "string_type": "write a JSON string in double quotes",
    "int_type": "write a whole number without quotes",
    "float_type": "write a number without quotes",
    "bool_type": "write true or false",
    "list_type": "write a JSON array: [ ... ]",
    "model_type": "write a JSON object: { ... }",
    "model_attributes_type": "write a JSON object: { ... }",
    "dict_type": "write a JSON object: { ... }",
    "string_pattern_mismatch": "match the pattern shown (no spaces)",
    "finite_number": "write a finite number (no NaN or Infinity)",
}


def _default_fix(err: Any, loc: JsonPath) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return f"add the required field {loc[-1]!r} (see `scrollcase schema recipe`)"
    if kind == "literal_error":
        return _literal_fix(err)
    if kind == "greater_than":
        return f"use a number greater than {ctx.get('gt')}"
    if kind == "greater_than_equal":
        return f"use a number of at least {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"use a number of at most {ctx.get('le')}"
    if kind in ("too_short", "string_too_short"):
        return "add at least one entry" if kind == "too_short" else "write a non-empty value"
    return _TYPE_FIXES.get(kind, "see `scrollcase schema recipe` for the allowed values")


def _clean_loc(loc: Sequence[Any]) -> JsonPath:
    # Annotated validators add steps such as "function-after[...]" that are not JSON keys.
    return tuple(p for p in loc if not (isinstance(p, str) and (p.startswith("function-") or p.endswith("]"))))


def _render_value(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _pydantic_problem(err: Any, file: str, positions: PositionMap) -> Problem:
    loc = _clean_loc(err["loc"])
    kind = err["type"]
    message, fix = err["msg"], (err.get("ctx") or {}).get("fix") or _default_fix(err, loc)
    value: str | None = None if kind == "missing" else _render_value(err.get("input"))
    where = positions.value_at(loc)
    if kind == "extra_forbidden":
        message, fix = _unknown_key_fix(loc)
        where = positions.key_at(loc)
    elif kind == "missing":
        message = f"required field {loc[-1]!r} is missing"
    line, column = where or (None, None)
    return Problem(
        message=message,
        file=file,
        line=line,
        column=column,
        key=render_path(loc) or None,
        value=value,
        fix=fix,
    )


# --- the pure check -------------------------------------------------------------------------------


def _decode(data: bytes | str, file: str) -> str:
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        # A UTF-8 BOM (Windows Notepad writes one) is accepted and dropped.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise RecipeError(
            f"{file} is not UTF-8",
            problems=[
                Problem(
                    message=f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not valid UTF-8",
                    file=file,
                    line=line,
                    column=column,
                    value=repr(data[exc.start : exc.start + 8]),
                    fix="save the file as UTF-8 (most editors: File > Save with encoding > UTF-8)",
                )
            ],
        ) from None


def _parse_json(text: str, file: str) -> Any:
    if not text.strip():
        raise RecipeError(
            f"{file} is empty",
            problems=[
                Problem(
                    message="the file is empty",
                    file=file,
                    line=1,
                    column=1,
                    fix="write the recipe object; start from a recipes/*/recipe.json example "
                    "or `scrollcase schema recipe`",
                )
            ],
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(
            f"{file} is not valid JSON",
            problems=[
                Problem(
                    message=f"invalid JSON: {exc.msg}",
                    file=file,
                    line=exc.lineno,
                    column=exc.colno,
                    value=_render_value(text[exc.pos : exc.pos + 20]) if text[exc.pos :] else None,
                    fix="fix the JSON syntax there (a missing comma or quote, or a trailing comma, is the usual cause)",
                )
            ],
        ) from None
    except RecursionError:
        raise RecipeError(
            f"{file} is nested too deeply",
            problems=[
                Problem(
                    message="JSON nesting is too deep",
                    file=file,
                    line=1,
                    fix="a recipe is a flat object; remove the nesting",
                )
            ],
        ) from None


def _violation_problem(violation: RuleViolation, file: str, positions: PositionMap) -> Problem:
    line, column = positions.value_at(violation.path) or (None, None)
    return Problem(
        message=violation.message,
        file=file,
        line=line,
        column=column,
        key=render_path(violation.path),
        value=None if violation.value is None else _render_value(violation.value),
        fix=violation.fix,
    )


def _duplicate_problems(positions: PositionMap, file: str) -> list[Problem]:
    out = []
    for path, offset in positions.duplicates:
        line, column = positions.line_col(offset)
        out.append(
            Problem(
                message=f"key {path[-1]!r} appears more than once in this object (JSON keeps only the last)",
                file=file,
                line=line,
                column=column,
                key=render_path(path),
                value=_render_value(path[-1]),
                fix="keep one of them and delete the other",
            )
        )
    return out


def _folder_problem(recipe_id: Any, folder_name: str, file: str, positions: PositionMap) -> Problem:
    line, column = positions.value_at(("recipeId",)) or (None, None)
    return Problem(
        message="the recipe folder must be named after recipeId",
        file=file,
        line=line,
        column=column,
        key="recipeId",
        value=_render_value(recipe_id),
        fix=f"rename the folder {folder_name!r} to {recipe_id!r} (or fix recipeId)",
    )


def recipe_problems(
    data: bytes | str, file: str = RECIPE_FILE, folder_name: str | None = None
) -> tuple[Recipe | None, list[Problem]]:
    """Validate recipe.json content: the Recipe, or None and every problem found (all at once)."""
    try:
        text = _decode(data, file)
        raw = _parse_json(text, file)
    except RecipeError as error:
        return None, list(error.problems)
    dupes = has_duplicate_keys(text)
    # The cross-field rules run once, here, over the raw JSON: all of them, even beside a field error.
    violations = recipe_rules(raw)
    recipe: Recipe | None = None
    errors: list[Any] = []
    try:
        recipe = Recipe.model_validate(raw, context=RULES_CHECKED)
    except ValidationError as exc:
        errors = exc.errors()
    if violations:
        recipe = None
    folder_wrong = (
        folder_name is not None
        and isinstance(raw, dict)
        and isinstance(raw.get("recipeId"), str)
        and raw["recipeId"] != folder_name
    )
    if recipe is not None and not dupes and not folder_wrong:
        return recipe, []
    positions = position_map(text)
    problems = [_pydantic_problem(e, file, positions) for e in errors]
    problems += [_violation_problem(v, file, positions) for v in violations]
    problems += _duplicate_problems(positions, file)
    if folder_wrong and folder_name is not None:
        problems.append(_folder_problem(raw["recipeId"], folder_name, file, positions))
    return None, list(collect(problems))


def parse_recipe(data: bytes | str, file: str = RECIPE_FILE, folder_name: str | None = None) -> Recipe:
    """Validate recipe.json content; raise :class:`RecipeError` listing every problem."""
    recipe, problems = recipe_problems(data, file=file, folder_name=folder_name)
    if recipe is None:
        raise RecipeError(
            f"{file} has {len(problems)} problem(s)",
            problems=problems,
            fix="see docs/recipes.md or `scrollcase schema recipe` for every field",
        )
    return recipe


def folder_problems(recipe: Recipe, file: str, exists: Callable[[str], bool], text: str | None = None) -> list[Problem]:
    """What the recipe folder must hold besides recipe.json; ``exists`` answers for folder-relative
    paths and ``text`` (the recipe.json text) locates findings.  parity.script is recipe-relative and
    checked; selfTest.files are paths inside the built box, so the self-test checks them, not this."""
    out: list[Problem] = []
    if not exists(MANIFEST_FILE):
        out.append(
            Problem(
                message="pixi.toml is missing from the recipe folder",
                file=file,
                key=None,
                value=MANIFEST_FILE,
                fix="add pixi.toml next to recipe.json (docs/recipes.md shows one)",
            )
        )
    if recipe.parity is not None and not exists(recipe.parity.script):
        where = position_map(text.removeprefix("\ufeff")).value_at(("parity", "script")) if text else None
        line, column = where or (None, None)
        out.append(
            Problem(
                message="parity.script does not exist in the recipe folder",
                file=file,
                line=line,
                column=column,
                key="parity.script",
                value=_render_value(recipe.parity.script),
                fix=f"add {recipe.parity.script} to the recipe folder or fix the path "
                "(it is relative to the folder holding recipe.json)",
            )
        )
    return out


# --- reading from disk ----------------------------------------------------------------------------


def folder_name_of(file: Path) -> str:
    parent = file.parent
    return parent.name if parent.name not in ("", ".", "..") else parent.resolve().name


def read_recipe_bytes(path: Path, limit: int = MAX_RECIPE_BYTES, shown: str | None = None) -> bytes:
    """The bytes of ``path``; refuses (by size, before reading) anything over ``limit``."""
    shown = shown or describe_path(path)
    too_big = RecipeError(
        f"{shown} is larger than {limit} bytes; a recipe.json is small metadata",
        fix="recipe.json holds metadata only: move large data into assets",
    )
    try:
        if path.stat().st_size > limit:
            raise too_big
        with path.open("rb") as handle:
            data = handle.read(limit + 1)  # a file that grew (or lies about its size) is still capped
    except FileNotFoundError:
        raise RecipeError(
            f"{shown} does not exist",
            fix="create recipe.json in the recipe folder (see `scrollcase schema recipe`)",
        ) from None
    except IsADirectoryError:
        raise RecipeError(f"{shown} is a directory", fix="pass the recipe folder or its recipe.json") from None
    except OSError as exc:
        raise RecipeError(f"cannot read {shown}: {exc.strerror}") from None
    if len(data) > limit:
        raise too_big
    return data


def locate_in_recipe(file: Path, path: JsonPath) -> tuple[str, int | None, int | None]:
    """recipe.json as messages name it, and the line and column of the value at ``path`` in it: where a
    problem found later (a download, a digest) points on the user's diff.  (None, None) for the
    position when the file can no longer be read or parsed: the problem still names the file."""
    shown = describe_path(file)
    try:
        text = _decode(read_recipe_bytes(file, shown=shown), shown)
        json.loads(text)  # the position map needs well-formed JSON
    except (RecipeError, ValueError):
        return shown, None, None
    line, column = position_map(text).value_at(path) or (None, None)
    return shown, line, column


def check_recipe_dir(path: Path) -> tuple[Recipe | None, list[Problem]]:
    """Everything ``validate`` checks for one folder (or recipe.json path): the file and the folder.
    The recipe is returned whenever recipe.json itself is valid, even if the folder has problems."""
    file = path / RECIPE_FILE if path.is_dir() else path
    shown = describe_path(file)
    try:
        data = read_recipe_bytes(file, shown=shown)
    except RecipeError as error:
        return None, [Problem(message=error.message, file=shown, fix=error.fix)]
    recipe, problems = recipe_problems(data, file=shown, folder_name=folder_name_of(file))
    if recipe is not None:
        text = data.decode("utf-8-sig")
        problems = folder_problems(recipe, shown, lambda rel: (file.parent / rel).is_file(), text)
    return recipe, problems


def load_recipe(path: Path) -> Recipe:
    """Read and validate ``path`` (a recipe.json or a recipe folder); RecipeError lists every problem."""
    file = path / RECIPE_FILE if path.is_dir() else path
    shown = describe_path(file)
    data = read_recipe_bytes(file, shown=shown)
    return parse_recipe(data, file=shown, folder_name=folder_name_of(file))


def resolve_recipe(arg: str, recipes_root: Path = Path("recipes")) -> RecipeDir:
    """A recipe given as an ID (folder under ``recipes/``), a folder, or a recipe.json path."""
    candidates = [Path(arg), recipes_root / arg]
    for candidate in candidates:
        if candidate.is_file() and candidate.name == RECIPE_FILE:
            return RecipeDir(candidate.parent, load_recipe(candidate))
        if (candidate / RECIPE_FILE).is_file():
            return RecipeDir(candidate, load_recipe(candidate))
    known = (
        sorted(p.name for p in recipes_root.glob("*/") if (p / RECIPE_FILE).is_file()) if recipes_root.is_dir() else []
    )
    close = difflib.get_close_matches(arg, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    hint += f"known recipes: {', '.join(known)}" if known else f"no recipes under {recipes_root}/"
    raise UsageError(f"no recipe {arg!r} (looked for {', '.join(str(c) for c in candidates)})", fix=hint)


def discover_recipes(recipes_root: Path = Path("recipes")) -> list[Path]:
    """Every recipe folder under ``recipes_root``, sorted."""
    if not recipes_root.is_dir():
        return []
    return sorted(p.parent for p in recipes_root.glob(f"*/{RECIPE_FILE}"))
