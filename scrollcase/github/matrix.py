"""The job matrix: one entry per recipe, with the runner labels its target needs.

Pure: the command reads recipes, the runner map and the git diff; :func:`plan_matrix` decides.

Selection with a list of changed files: a recipe runs when a file under its folder changed; every
recipe runs when a file matching one of the *affects-all* globs changed (the runner map, and what the
repository says changes how every box is built: by default its workflow files; scrollcase's own
repository adds its package, actions and ``pyproject.toml``).  Anything else (docs) selects nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scrollcase.errors import GitHubError, Problem, UsageError
from scrollcase.io.documents import validation_problems
from scrollcase.recipe.model import Recipe
from scrollcase.targets import registry

# GitHub refuses a matrix that expands to more jobs than this.
MAX_JOBS = 256

# First match wins; a user map's patterns are tried before these (each accelerator's, targets/<accelerator>.py).
# Labels may use {platform}, {arch}, {accelerator} and the version field of an accelerator that has one.
DEFAULT_RUNNERS: dict[str, list[str]] = registry.default_runners()

# What selects every recipe unless the repository names its own globs (--affects-all): in a repository
# of recipes, nothing outside recipes/ but the workflows that build them.  fnmatch's * crosses "/".
DEFAULT_GLOBAL_PATTERNS: tuple[str, ...] = (".github/workflows/*",)

Label = Annotated[str, Field(min_length=1, max_length=200)]


class RunnerMap(BaseModel):
    """``--runner-map FILE``: target ID glob -> runs-on labels, tried before the defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    runners: dict[str, Annotated[list[Label], Field(min_length=1)]]


@dataclass(frozen=True)
class RecipeEntry:
    """A recipe as the matrix sees it: its repository-relative folder and parsed recipe.json."""

    path: str  # POSIX, relative to the repository root, e.g. "recipes/tiny-mlp-linux-x86_64-cpu"
    recipe: Recipe


@dataclass(frozen=True)
class Published:
    """A recipe whose (boxId, version, targetId) the store's index lists, as ``matrix --unpublished`` found it.

    ``stored`` and ``here``: what the box is built from (``pixi.lock`` and each ``asset <name>``, to its
    sha256) by the stored release manifest and by the recipe's folder now; ``stored`` None: the stored
    manifest could not be read.  ``recipe_file``/``version_line``: where the recipe's version is written.
    """

    release: str  # the stored release manifest's URL, for messages
    stored: Mapping[str, str] | None
    here: Mapping[str, str]
    recipe_file: str
    version_line: int | None = None

    def changed(self) -> list[str]:
        """What differs between the stored release's inputs and the recipe's (empty: nothing)."""
        if self.stored is None:
            return [f"{self.release} (unreadable)"]
        names = sorted(self.stored.keys() | self.here.keys())
        return [name for name in names if self.stored.get(name) != self.here.get(name)]


@dataclass(frozen=True)
class MatrixPlan:
    include: tuple[dict[str, Any], ...]
    reason: str  # why these recipes were selected, for the log and summary
    published: tuple[dict[str, Any], ...] = ()  # entries left out: the store already holds their release
    warnings: tuple[Problem, ...] = ()  # published recipes built again because their inputs changed

    @property
    def empty(self) -> bool:
        return not self.include

    def matrix(self) -> dict[str, list[dict[str, Any]]]:
        return {"include": list(self.include)}


def parse_runner_map(text: str, file: str) -> RunnerMap:
    """Validate a runner map (YAML or JSON); errors name the file and the key."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UsageError(
            f"{file} is not valid YAML/JSON",
            problems=[
                Problem(
                    message=str(getattr(exc, "problem", exc)),
                    file=file,
                    line=mark.line + 1 if mark is not None else None,
                    fix="fix the syntax; see docs/github.md for the format",
                )
            ],
        ) from None
    try:
        return RunnerMap.model_validate(raw)
    except ValidationError as exc:
        fix = 'write `version: 1` and `runners: {"<targetId glob>": [label, ...]}`'
        problems = validation_problems(exc, file, fix=fix, values=True)
        raise UsageError(f"{file} is not a valid runner map", problems=problems) from None


def runner_labels(recipe: Recipe, runner_map: RunnerMap | None = None) -> list[str]:
    """The runs-on labels for the recipe's target: user map first, then the defaults."""
    target = recipe.target
    rules: list[tuple[str, list[str]]] = list((runner_map.runners if runner_map else {}).items())
    rules += list(registry.default_runners().items())
    values = {
        **_version_values(recipe),
        "platform": target.platform,
        "arch": target.arch,
        "accelerator": target.accelerator,
    }
    for pattern, labels in rules:
        if fnmatch.fnmatchcase(recipe.target_id, pattern):
            return [_fill(label, values) for label in labels]
    raise UsageError(
        f"no runner labels for target {recipe.target_id}",
        fix=f'add "{recipe.target_id}": [labels...] to the runners of --runner-map',
    )


def _version_values(recipe: Recipe) -> dict[str, str]:
    """Every accelerator's version field -> the recipe's value, ``""`` when unset (the matrix has each key)."""
    fields = recipe.target.model_dump()
    return {name: fields.get(name) or "" for name in registry.version_fields()}


def _fill(label: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        label = label.replace("{" + key + "}", value)
    return label


def matrix_entry(entry: RecipeEntry, runner_map: RunnerMap | None = None) -> dict[str, Any]:
    recipe = entry.recipe
    labels = runner_labels(recipe, runner_map)
    return {
        "recipeId": recipe.recipeId,
        "boxId": recipe.boxId,
        "targetId": recipe.target_id,
        "version": recipe.version,
        "platform": recipe.target.platform,
        "arch": recipe.target.arch,
        "accelerator": recipe.target.accelerator,
        **_version_values(recipe),
        "runs-on": labels,
        "selfHosted": "self-hosted" in labels,
        "parity": recipe.parity is not None,  # lets workflows skip the parity step for recipes without one
        "recipePath": entry.path,
    }


def select(
    entries: Sequence[RecipeEntry],
    changed: Sequence[str] | None,
    global_patterns: Sequence[str] = DEFAULT_GLOBAL_PATTERNS,
) -> tuple[list[RecipeEntry], str]:
    """The recipes to build and why.  ``changed`` None means no filter (every recipe)."""
    if changed is None:
        return list(entries), "all recipes"
    for name in changed:
        for pattern in global_patterns:
            if fnmatch.fnmatchcase(name, pattern):
                return list(entries), f"{name} changed (matches {pattern!r}, which affects every recipe)"
    selected = [e for e in entries if any(name.startswith(e.path.rstrip("/") + "/") for name in changed)]
    return selected, f"{len(selected)} recipe(s) with changed files"


def plan_matrix(
    entries: Sequence[RecipeEntry],
    changed: Sequence[str] | None = None,
    runner_map: RunnerMap | None = None,
    global_patterns: Sequence[str] = DEFAULT_GLOBAL_PATTERNS,
    max_jobs: int = MAX_JOBS,
    hosted_only: bool = False,
    published: Mapping[str, Published] | None = None,
) -> MatrixPlan:
    """The matrix for ``entries``, filtered by ``changed``; fails above GitHub's job limit.

    ``hosted_only`` drops jobs for self-hosted runners: pull requests from forks must never run
    their code on them.  ``published`` (by recipe ID): releases the store already holds, left out
    unless the recipe's inputs changed since (:func:`leave_out_published`).
    """
    selected, reason = select(entries, changed, global_patterns)
    ordered = sorted(selected, key=lambda e: e.recipe.recipeId)
    include = tuple(matrix_entry(e, runner_map) for e in ordered)
    left_out: tuple[dict[str, Any], ...] = ()
    warnings: tuple[Problem, ...] = ()
    if published is not None:
        include, left_out, warnings = leave_out_published(include, published)
        if left_out:
            named = ", ".join(f"{e['recipeId']} {e['version']}" for e in left_out)
            reason += f"; {len(left_out)} recipe(s) left out, already published: {named}"
    if hosted_only:
        kept = tuple(e for e in include if not e["selfHosted"])
        if len(kept) != len(include):
            reason += f"; {len(include) - len(kept)} self-hosted job(s) left out (hosted runners only)"
        include = kept
    if len(include) > max_jobs:
        raise GitHubError(
            f"the matrix has {len(include)} jobs; GitHub allows at most {max_jobs} per matrix",
            fix="narrow it with --changed-since, or split recipes/ across several workflows "
            "(e.g. one matrix per accelerator with --recipes)",
        )
    return MatrixPlan(include=include, reason=reason, published=left_out, warnings=warnings)


def leave_out_published(
    include: Sequence[dict[str, Any]], published: Mapping[str, Published]
) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...], tuple[Problem, ...]]:
    """The entries to build, those left out because the store holds their release, and a warning for each
    published release built again because its recipe's inputs changed since (an unbumped version: the
    build runs, so that publish refuses it and says to bump the version, instead of nothing happening)."""
    kept: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    warnings: list[Problem] = []
    for entry in include:
        found = published.get(entry["recipeId"])
        changed = found.changed() if found is not None else []
        if found is not None and not changed:
            left_out.append(entry)
            continue
        kept.append(entry)
        if found is not None:
            warnings.append(
                Problem(
                    message=f"{entry['recipeId']} {entry['version']} is already published ({found.release}), but "
                    f"{', '.join(changed)} changed since: it is built again, and publishing it will be refused",
                    file=found.recipe_file,
                    line=found.version_line,
                    key="version",
                    fix=f"bump `version` in {found.recipe_file}: a published release is never replaced",
                    severity="warning",
                )
            )
    return tuple(kept), tuple(left_out), tuple(warnings)
