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

# GitHub refuses a matrix that expands to more jobs than this.
MAX_JOBS = 256

# First match wins; a user map's patterns are tried before these.  Labels may use {cudaVersion},
# {platform}, {arch} and {accelerator}.
DEFAULT_RUNNERS: dict[str, list[str]] = {
    "linux-x86_64-cuda*": ["self-hosted", "linux", "x64", "gpu", "cuda-{cudaVersion}"],
    "linux-aarch64-cuda*": ["self-hosted", "linux", "arm64", "gpu", "cuda-{cudaVersion}"],
    "windows-x86_64-cuda*": ["self-hosted", "windows", "x64", "gpu", "cuda-{cudaVersion}"],
    "linux-x86_64-cpu": ["ubuntu-24.04"],
    "linux-aarch64-cpu": ["ubuntu-24.04-arm"],
    "windows-x86_64-cpu": ["windows-2022"],
    "osx-arm64-*": ["macos-15"],
    "osx-x86_64-cpu": ["macos-15-intel"],
}

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
class MatrixPlan:
    include: tuple[dict[str, Any], ...]
    reason: str  # why these recipes were selected, for the log and summary

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
    rules += list(DEFAULT_RUNNERS.items())
    values = {
        "cudaVersion": target.cudaVersion or "",
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
        "cudaVersion": recipe.target.cudaVersion or "",
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
) -> MatrixPlan:
    """The matrix for ``entries``, filtered by ``changed``; fails above GitHub's job limit.

    ``hosted_only`` drops jobs for self-hosted runners: pull requests from forks must never run
    their code on them.
    """
    selected, reason = select(entries, changed, global_patterns)
    ordered = sorted(selected, key=lambda e: e.recipe.recipeId)
    include = tuple(matrix_entry(e, runner_map) for e in ordered)
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
    return MatrixPlan(include=include, reason=reason)
