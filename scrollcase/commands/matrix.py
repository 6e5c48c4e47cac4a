"""``scrollcase matrix``: the GitHub Actions job matrix for the recipes under recipes/."""

from __future__ import annotations

import argparse
import os
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
    Published,
    RecipeEntry,
    RunnerMap,
    parse_runner_map,
    plan_matrix,
)
from scrollcase.io.digest import sha256_file
from scrollcase.io.files import ReadErrors, read_text
from scrollcase.recipe.loader import discover_recipes, load_recipe, locate_in_recipe

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
    unpublished: bool
    store: str | None
    endpoint_url: str | None


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
    _add_store_options(p)
    p.set_defaults(handler=handler(MatrixArgs, run))


def _add_store_options(p: argparse.ArgumentParser) -> None:
    """--unpublished and the store it reads."""
    p.add_argument(
        "--unpublished",
        action="store_true",
        help="leave out recipes whose (boxId, version, target) the store's index already lists, unless "
        "their pixi.lock or assets changed since (for release tags: build only new versions)",
    )
    p.add_argument(
        "--store",
        metavar="STORE",
        default=None,
        help="with --unpublished: the store to read, a directory, s3://bucket/prefix or http(s)://host/path "
        "(default: $SCROLLCASE_STORE)",
    )
    p.add_argument(
        "--endpoint-url",
        default=None,
        help="with --unpublished and an s3:// store: an S3-compatible endpoint (default: AWS, or $AWS_ENDPOINT_URL_S3)",
    )


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


def _warn(console: Console, message: str, fix: str, problem: Problem | None = None) -> None:
    console.progress(f"matrix: warning: {message}")
    if report.RunnerEnv.from_environ().in_actions:
        report.annotate(
            [problem or Problem(message=message, fix=fix, severity="warning")],
            sys.stderr if console.json_mode else console.stdout,
            title="scrollcase matrix",
        )


def affects_all(args: MatrixArgs) -> list[str]:
    """The globs whose change selects every recipe: --affects-all (empty ones dropped) or the default,
    plus --all-on."""
    chosen = DEFAULT_GLOBAL_PATTERNS if args.affects_all is None else args.affects_all
    return [glob for glob in (*chosen, *args.all_on) if glob.strip()]


def _text(plan: MatrixPlan) -> str:
    lines = [f"no jobs ({plan.reason})" if plan.empty else f"{len(plan.include)} job(s) ({plan.reason}):"]
    lines += [f"  {e['recipeId']:<48} runs-on: {', '.join(e['runs-on'])}" for e in plan.include]
    lines += [f"  {e['recipeId']:<48} left out: {e['version']} already published" for e in plan.published]
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
    store = _store_location(args)
    entries = _load_entries(args.recipes, base)
    published = _published(entries, args, store) if store is not None else None
    plan = plan_matrix(entries, changed, runner_map, patterns, hosted_only=args.hosted_only, published=published)
    console.progress(f"matrix: {plan.reason}")
    for warning in plan.warnings:
        _warn(console, warning.message, warning.fix or "", warning)
    outputs: dict[str, report.OutputValue] = {"matrix": plan.matrix(), "empty": plan.empty, "count": len(plan.include)}
    if store is not None:
        outputs["published"] = [e["recipeId"] for e in plan.published]
        env = report.RunnerEnv.from_environ()
        report.write_summary(report.render_summary([_summary(plan, store)], report.summary_room(env)), env)
    report.set_outputs(outputs)
    console.result(plan.matrix(), _text(plan))
    return 0


def _store_location(args: MatrixArgs) -> str | None:
    """The store --unpublished reads (None: no --unpublished); a usage error when one is given without the other."""
    if not args.unpublished:
        if args.store is not None or args.endpoint_url is not None:
            raise UsageError(
                "--store and --endpoint-url are only read with --unpublished",
                fix="add --unpublished to leave out the recipes the store already holds, or drop --store",
            )
        return None
    from scrollcase.store.factory import STORE_ENV  # not at import time: see _published

    location = args.store if args.store is not None else os.environ.get(STORE_ENV)
    if location is None:
        raise UsageError(
            "--unpublished needs the store to read: no --store and no $" + STORE_ENV,
            fix="pass --store DIRECTORY, s3://bucket/prefix or https://host/path (where publish puts the boxes)",
        )
    return location


def _published(entries: list[RecipeEntry], args: MatrixArgs, location: str) -> dict[str, Published]:
    """The recipes whose release the store already holds, by recipe ID, with what each was built from."""
    # Imported here: only --unpublished reads a store (boto3 for s3://); the matrix job stays light without it.
    from scrollcase.store.factory import open_read_store
    from scrollcase.store.index import HeldReleases, recipe_inputs

    held = HeldReleases(open_read_store(location, args.endpoint_url))
    found: dict[str, Published] = {}
    for entry in entries:
        recipe = entry.recipe
        release = held.find(recipe.boxId, recipe.version, recipe.target_id)
        if release is None:
            continue
        folder = args.recipes / recipe.recipeId
        lock = folder / "pixi.lock"
        here = recipe_inputs(recipe, sha256_file(lock)[0] if lock.is_file() else None)
        _, line, _ = locate_in_recipe(folder / "recipe.json", ("version",))
        recipe_file = f"{entry.path}/recipe.json"
        found[recipe.recipeId] = Published(release.release, release.inputs, here, recipe_file, line)
    return found


def _summary(plan: MatrixPlan, store: str) -> report.SummaryTable:
    rows = [[e["recipeId"], e["version"], "build"] for e in plan.include]
    rows += [[e["recipeId"], e["version"], f"left out: already published in {store}"] for e in plan.published]
    return report.SummaryTable(
        title="scrollcase matrix --unpublished",
        columns=["Recipe", "Version", "Job"],
        rows=sorted(rows),
        lead=f"{len(plan.include)} job(s) ({plan.reason})",
    )
