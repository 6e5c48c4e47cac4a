"""``scrollcase matrix``: the GitHub Actions job matrix for the recipes under recipes/."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import CommandArgs, SubParsers, handler
from scrollcase.console import Console
from scrollcase.errors import Problem, RecipeError, UsageError
from scrollcase.github import gitdiff, report
from scrollcase.github.matrix import (
    DEFAULT_GLOBAL_PATTERNS,
    DEFAULT_RUNNERS,
    MAX_JOBS,
    MatrixPlan,
    RecipeEntry,
    RunnerMap,
    parse_runner_map,
    plan_matrix,
)
from scrollcase.io.files import ReadErrors, read_text
from scrollcase.recipe.loader import discover_recipes, load_recipe

NAME = "matrix"
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class MatrixArgs(CommandArgs):
    recipes: Path
    changed_since: str | None
    runner_map: Path | None
    all_on: tuple[str, ...]
    affects_all: tuple[str, ...] | None
    hosted_only: bool


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    defaults = "; ".join(f"{k} -> {', '.join(v)}" for k, v in DEFAULT_RUNNERS.items())
    p = sub.add_parser(
        NAME,
        parents=[common],
        help="emit the GitHub Actions job matrix for the recipes",
        description='Read every recipes/<recipeId>/recipe.json and print {"include": [...]} with one job '
        "per recipe and the runs-on labels its target needs.  Under GitHub Actions the "
        "outputs `matrix`, `empty` and `count` are written to GITHUB_OUTPUT.",
        epilog=f"default runner map: {defaults}.  Matrices above {MAX_JOBS} jobs are an error.",
    )
    p.add_argument(
        "--recipes",
        type=Path,
        default=Path("recipes"),
        metavar="DIR",
        help="folder holding the recipe folders (default: recipes)",
    )
    p.add_argument(
        "--changed-since",
        metavar="REF",
        help="only recipes with files changed in `git diff REF...HEAD` (all of them when a file matching "
        "--affects-all or the runner map changed)",
    )
    p.add_argument(
        "--affects-all",
        action="append",
        default=None,
        metavar="GLOB",
        help="a repository path glob whose change selects every recipe (repeatable; replaces the default "
        + ", ".join(DEFAULT_GLOBAL_PATTERNS)
        + "; an empty GLOB alone: nothing but the runner map does)",
    )
    p.add_argument(
        "--runner-map",
        type=Path,
        metavar="FILE",
        help="YAML/JSON {version: 1, runners: {<targetId glob>: [labels]}}, tried before the defaults",
    )
    p.add_argument(
        "--all-on",
        action="append",
        default=[],
        metavar="GLOB",
        help="a glob added to --affects-all (or to its default) (repeatable)",
    )
    p.add_argument(
        "--hosted-only",
        action="store_true",
        help="leave out jobs for self-hosted runners (use for pull requests from forks)",
    )
    p.set_defaults(handler=handler(MatrixArgs, run))


_READ_RUNNER_MAP = ReadErrors(
    UsageError,
    missing="cannot read runner map {path}: {strerror}",
    missing_fix="pass an existing YAML/JSON file to --runner-map",
    unreadable="cannot read runner map {path}: {strerror}",
    fix="pass an existing YAML/JSON file to --runner-map",
)


def _read_runner_map(path: Path | None) -> RunnerMap | None:
    if path is None:
        return None
    return parse_runner_map(read_text(path, _READ_RUNNER_MAP), file=str(path))


def _load_entries(recipes_root: Path, base: Path | None) -> list[RecipeEntry]:
    """Every recipe, paths relative to ``base`` (the git root) when given; all errors at once."""
    entries: list[RecipeEntry] = []
    problems: list[Problem] = []
    for folder in discover_recipes(recipes_root):
        try:
            recipe = load_recipe(folder)
        except RecipeError as error:
            problems.extend(error.problems or [Problem(message=error.message, file=str(folder))])
            continue
        entries.append(RecipeEntry(path=_relative(folder, base), recipe=recipe))
    if problems:
        raise RecipeError(f"{len(problems)} problem(s) in the recipes under {recipes_root}", problems=problems)
    return entries


def _relative(path: Path, base: Path | None) -> str:
    if base is None:
        return path.as_posix()
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _missing_sha(ref: str) -> bool:
    """A full commit SHA (what GitHub sends as ``before`` and ``base.sha``) that the clone lacks.

    Other refs that do not resolve (a typo in a branch name) stay usage errors."""
    return bool(SHA.fullmatch(ref)) and not gitdiff.has_commit(ref, Path.cwd())


def _warn(console: Console, message: str, fix: str) -> None:
    console.progress(f"matrix: warning: {message}")
    if report.RunnerEnv.from_environ().in_actions:
        report.annotate(
            [Problem(message=message, fix=fix, severity="warning")],
            sys.stderr if console.json_mode else console.stdout,
            title="scrollcase matrix",
        )


def affects_all(args: MatrixArgs) -> list[str]:
    """The globs whose change selects every recipe: --affects-all (empty ones dropped) or the default,
    plus --all-on."""
    chosen = DEFAULT_GLOBAL_PATTERNS if args.affects_all is None else args.affects_all
    return [glob for glob in (*chosen, *args.all_on) if glob.strip()]


def _text(plan: MatrixPlan) -> str:
    if plan.empty:
        return f"no jobs ({plan.reason})"
    lines = [f"{len(plan.include)} job(s) ({plan.reason}):"]
    lines += [f"  {e['recipeId']:<48} runs-on: {', '.join(e['runs-on'])}" for e in plan.include]
    return "\n".join(lines)


def run(args: MatrixArgs, console: Console) -> int:
    if not args.recipes.is_dir():
        raise UsageError(f"no recipes folder {args.recipes}", fix="run from the repository root or pass --recipes")
    runner_map = _read_runner_map(args.runner_map)
    changed: list[str] | None = None
    base: Path | None = None
    patterns = affects_all(args)
    if args.changed_since is not None and set(args.changed_since) == {"0"}:
        # A push that creates a branch has no "before" commit (GitHub sends forty zeros).
        console.progress("matrix: --changed-since is the null commit; selecting every recipe")
    elif args.changed_since is not None and _missing_sha(args.changed_since):
        # After a force-push GitHub's `before` is a commit no clone has any more: nothing to diff against.
        _warn(
            console,
            f"--changed-since {args.changed_since} is not in this clone (force-pushed away, or a "
            "shallow checkout); selecting every recipe",
            fix="check out with fetch-depth: 0; after a force-push every recipe is rebuilt",
        )
    elif args.changed_since is not None:
        base = gitdiff.toplevel(Path.cwd())
        changed = gitdiff.changed_files(args.changed_since, Path.cwd())
        if args.runner_map is not None:
            patterns.append(_relative(args.runner_map, base))
    entries = _load_entries(args.recipes, base)
    plan = plan_matrix(entries, changed, runner_map, patterns, hosted_only=args.hosted_only)
    console.progress(f"matrix: {plan.reason}")
    report.set_outputs({"matrix": plan.matrix(), "empty": plan.empty, "count": len(plan.include)})
    console.result(plan.matrix(), _text(plan))
    return 0
