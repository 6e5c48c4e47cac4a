"""``scrollcase report junit``: JUnit results -> annotations, step summary, outputs and a check run."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import Problem, UsageError
from scrollcase.format.release import ReleaseManifest, parse_release
from scrollcase.github import buildcache, checks, report
from scrollcase.github.paths import located, repo_relative
from scrollcase.io.files import ReadErrors, read_bytes, user_cache_dir
from scrollcase.recipe.loader import LOCK_FILE, resolve_recipe
from scrollcase.reports.junit import JUnitResult, read_junit, result_problem, tally

if TYPE_CHECKING:
    from scrollcase.store.base import Store

NAME = "report"
HELP = "render results for GitHub (annotations, summary, checks)"
DESCRIPTION = "Turn results into GitHub annotations, a step summary, step outputs and optionally a check run."
_RELEASE_FIX = "pass the *.release.json written by `scrollcase build`"
_READ_RELEASE = ReadErrors(
    UsageError, missing="cannot read {path}: {strerror}", missing_fix=_RELEASE_FIX, fix=_RELEASE_FIX
)


@dataclass(frozen=True)
class ReportJunitArgs(CommandArgs):
    files: tuple[Path, ...]
    check_run_name: str | None
    title: str | None
    sha: str | None
    repo: str | None
    api_url: str | None
    token_env: str
    missing_ok: bool
    strict: bool


@dataclass(frozen=True)
class ReportBuildCacheArgs(CommandArgs):
    recipe: str
    recipes_root: Path
    state_dir: Path


@dataclass(frozen=True)
class ReportReleaseArgs(CommandArgs):
    release: Path | None
    recipe: str | None
    out: Path
    to: str | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    kinds = p.add_subparsers(dest="report_kind", metavar="KIND", required=True)
    _register_junit(kinds, common)
    _register_release(kinds, common)
    _register_build_cache(kinds, common)


JUNIT_DESCRIPTION = (
    "Read JUnit XML files (from build/parity/verify --junit or any tool), "
    "print at most 10 error annotations per step (plus a notice counting "
    "the rest), append a table to GITHUB_STEP_SUMMARY, write the outputs "
    "total/passed/failed/skipped/conclusion, and with --check-run-name "
    "create a check run carrying every annotation (needs checks: write)."
)
JUNIT_EPILOG = (
    "the check run uses the token in $GITHUB_TOKEN (or --token-env), the "
    "repository in $GITHUB_REPOSITORY and the API at $GITHUB_API_URL."
)
RELEASE_DESCRIPTION = (
    "Read a *.release.json and write its facts as step outputs (release, "
    "archive, sha256, size, box-id, version, target-id, recipe-id, "
    "archive-key, release-key, self-test, parity) and a summary table. With --to, the keys are those "
    "publish gives the objects in that store (its prefix included), beside their URLs and the index's."
)


def _register_junit(kinds: SubParsers, common: argparse.ArgumentParser) -> None:
    j = add_command(kinds, common, "junit", "report JUnit XML files", JUNIT_DESCRIPTION, epilog=JUNIT_EPILOG)
    j.add_argument("files", nargs="+", type=Path, metavar="FILE", help="JUnit XML file(s)")
    j.add_argument("--check-run-name", metavar="NAME", help="also create a check run with this name")
    j.add_argument("--title", metavar="TEXT", help="heading of the summary and check run")
    j.add_argument("--sha", help="commit for the check run (default: the PR head, else GITHUB_SHA)")
    j.add_argument("--repo", metavar="OWNER/NAME", help="repository (default: $GITHUB_REPOSITORY)")
    j.add_argument("--api-url", metavar="URL", help="GitHub API URL (default: $GITHUB_API_URL)")
    j.add_argument(
        "--token-env",
        default="GITHUB_TOKEN",
        metavar="VAR",
        help="environment variable holding the token (default: GITHUB_TOKEN)",
    )
    j.add_argument(
        "--missing-ok",
        action="store_true",
        help="skip files that do not exist (a step that failed before writing its report)",
    )
    j.add_argument("--strict", action="store_true", help="exit 1 when any case failed")
    j.set_defaults(handler=handler(ReportJunitArgs, run))


def _register_release(kinds: SubParsers, common: argparse.ArgumentParser) -> None:
    r = add_command(kinds, common, "release", "expose a release manifest as step outputs", RELEASE_DESCRIPTION)
    r.add_argument(
        "release",
        type=Path,
        nargs="?",
        metavar="RELEASE.json",
        help="the manifest (or give --recipe to find it in --out)",
    )
    r.add_argument("--recipe", metavar="RECIPE", help="recipe ID or folder whose release to report")
    r.add_argument(
        "--out",
        type=Path,
        default=Path(".scrollcase/dist"),
        metavar="DIR",
        help="where build wrote the release (default: .scrollcase/dist)",
    )
    r.add_argument(
        "--to",
        metavar="STORE",
        help="the store publish will write to (s3://bucket/prefix or a folder): report each object's key there, "
        "the prefix included, and its URL, as publish's outputs do (nothing is read or written)",
    )
    r.set_defaults(handler=handler(ReportReleaseArgs, run_release))


BUILD_CACHE_DESCRIPTION = (
    "Write the step outputs path, key and restore-keys with which actions/cache carries a recipe's build "
    "caches between runs (the user cache's wheels, packframes and pyc; --state-dir's conda packages and "
    "assets), keyed by the runner's OS and architecture, the recipe and the sha256 of its pixi.lock."
)


def _register_build_cache(kinds: SubParsers, common: argparse.ArgumentParser) -> None:
    b = add_command(
        kinds, common, "build-cache", "the build caches' paths and keys for actions/cache", BUILD_CACHE_DESCRIPTION
    )
    b.add_argument("recipe", metavar="RECIPE", help="recipe ID or folder")
    b.add_argument("--recipes-root", type=Path, default=Path("recipes"), help="where recipes live (default: recipes)")
    b.add_argument(
        "--state-dir", type=Path, default=Path(".scrollcase"), help="build's --state-dir (default: %(default)s)"
    )
    b.set_defaults(handler=handler(ReportBuildCacheArgs, run_build_cache))


def run_build_cache(args: ReportBuildCacheArgs, console: Console) -> int:
    found = resolve_recipe(args.recipe, args.recipes_root)
    lock = found.path / LOCK_FILE
    env = report.RunnerEnv.from_environ()
    cache = buildcache.build_cache(
        found.recipe.recipeId,
        lock.read_bytes() if lock.is_file() else None,
        os.environ.get("RUNNER_OS") or platform.system(),
        os.environ.get("RUNNER_ARCH") or platform.machine(),
        user_cache_dir(),
        (args.state_dir / "cache").resolve(),
    )
    outputs = cache.outputs()
    report.set_outputs(outputs, env)
    console.result(outputs, "\n".join(f"{k}: {v}" for k, v in outputs.items()))
    return 0


def _read_all(files: Sequence[Path], missing_ok: bool) -> tuple[list[JUnitResult], list[Problem], int]:
    results: list[JUnitResult] = []
    problems: list[Problem] = []
    read = 0
    for path in files:
        if missing_ok and not path.exists():
            continue
        found = read_junit(path)
        read += 1
        fallback = repo_relative(path)
        results.extend(found)
        problems.extend(result_problem(r, fallback) for r in found if r.failed)
    return results, located(problems), read


def _check_run(
    args: ReportJunitArgs,
    name: str,
    env: report.RunnerEnv,
    problems: Sequence[Problem],
    summary: str,
    title: str,
    fallback: str,
) -> checks.CheckRunResult:
    token = os.environ.get(args.token_env, "")
    repo = args.repo or env.repository
    sha = args.sha or report.head_sha(env)
    if not token:
        raise UsageError(
            f"--check-run-name needs a token in ${args.token_env}",
            fix="pass github-token: ${{ github.token }} with `permissions: checks: write`",
        )
    if not repo or not sha:
        raise UsageError(
            "--check-run-name needs the repository and commit",
            fix="run under GitHub Actions, or pass --repo OWNER/NAME and --sha SHA",
        )
    plan = checks.plan_check_run(
        name,
        sha,
        problems,
        summary,
        fallback,
        title=f"{title}: {sum(p.severity == 'error' for p in problems)} failure(s)",
    )
    api_url = args.api_url or env.api_url
    client = checks.make_client(token, api_url)
    return checks.publish_check_run(checks.repository(client, repo), plan, api_url)


def run(args: ReportJunitArgs, console: Console) -> int:
    env = report.RunnerEnv.from_environ()
    results, problems, read = _read_all(args.files, args.missing_ok)
    counts = tally(results, read)
    title = args.title or args.check_run_name or "scrollcase results"
    if read:
        markdown = report.render_summary([report.summary_table(title, results, counts)], report.summary_room(env))
    else:  # the step died before it wrote a report: say so instead of an empty "0 of 0" table
        names = ", ".join(str(f) for f in args.files)
        markdown = f"### {title}\n\nNo results: {names} was not written (the step failed before reporting).\n\n"
    if env.in_actions:
        report.annotate(
            problems,
            sys.stderr if console.json_mode else console.stdout,
            title=title,
            where_else="the step summary" + (" and the check run" if args.check_run_name else ""),
        )
    report.write_summary(markdown, env)
    data: dict[str, object] = {
        "total": counts.total,
        "passed": counts.passed,
        "failed": counts.failed,
        "skipped": counts.skipped,
        "conclusion": counts.conclusion,
        "problems": [p.to_json() for p in problems],
    }
    # Outputs first: whatever the check run does, the workflow sees the JUnit result.
    report.set_outputs(
        {k: v for k, v in data.items() if k in ("total", "passed", "failed", "skipped", "conclusion")}, env
    )
    if args.check_run_name and read:
        data["checkRun"] = _check_run_or_warn(args, args.check_run_name, env, problems, markdown, title, console)
    elif args.check_run_name:
        console.progress(f"no check run {args.check_run_name!r}: there are no results to report")
    text = f"{title}: {counts.passed} passed, {counts.failed} failed, {counts.skipped} skipped"
    if problems and not env.in_actions:
        text += "\n" + "\n".join(p.render() for p in problems)
    console.result(data, text)
    return 1 if args.strict and counts.failed else 0


def _check_run_or_warn(
    args: ReportJunitArgs,
    name: str,
    env: report.RunnerEnv,
    problems: Sequence[Problem],
    markdown: str,
    title: str,
    console: Console,
) -> dict[str, object]:
    """The check run, or, when the token may not write checks (a fork's pull request), one warning.

    A refused check run changes nothing about the result: the annotations and the step summary above
    carry it, and the JUnit alone decides pass or fail.
    """
    fallback = repo_relative(args.files[0])
    try:
        result = _check_run(args, name, env, problems, markdown, title, fallback)
    except checks.CheckRunRefusedError as refused:
        warning = Problem(
            message=f"no check run {name!r}: the token may not write checks "
            "(pull requests from forks get a read-only GITHUB_TOKEN); the results are in "
            "the annotations and the step summary",
            severity="warning",
        )
        console.progress(f"warning: {refused.message}")
        if env.in_actions:
            report.annotate([warning], sys.stderr if console.json_mode else console.stdout, title="check run")
        return {"refused": refused.status, "message": refused.message}
    console.progress(f"check run {name!r}: {result.annotations} annotation(s) in {result.requests} request(s)")
    return {"id": result.id, "url": result.url, "annotations": result.annotations, "requests": result.requests}


def _release_path(args: ReportReleaseArgs) -> Path:
    if args.release is not None and args.recipe is None:
        return args.release
    if args.recipe is not None and args.release is None:
        return args.out / resolve_recipe(args.recipe).recipe.release_name
    raise UsageError(
        "give either RELEASE.json or --recipe",
        fix="e.g. `scrollcase report release --recipe tiny-mlp-linux-x86_64-cpu --out .scrollcase/dist`",
    )


def store_outputs(manifest: ReleaseManifest, store: Store) -> dict[str, object]:
    """Where publish puts each object of the release in ``store``: its key there (an S3 store's prefix
    included, as publish's outputs name it) and its URL; the SBOM's are empty when the release has none."""
    from scrollcase.store.factory import object_key  # only with --to: `report junit` runs in every action
    from scrollcase.store.index import index_key
    from scrollcase.store.remote import sbom_key

    keys = {
        "archive": manifest.keys.archive,
        "release": manifest.keys.release,
        "sbom": sbom_key(manifest),
        "index": index_key(manifest.boxId),
    }
    outputs: dict[str, object] = {"store": store.url}
    for kind, key in keys.items():
        outputs[f"{kind}-key"] = object_key(store, key) if key else ""
        outputs[f"{kind}-url"] = store.url_for(key) if key else ""
    return outputs


def run_release(args: ReportReleaseArgs, console: Console) -> int:
    env = report.RunnerEnv.from_environ()
    path = _release_path(args)
    manifest = parse_release(read_bytes(path, _READ_RELEASE), file=str(path))
    outputs = report.release_outputs(manifest, path.resolve())
    if args.to is not None:
        from scrollcase.store.factory import open_store

        outputs |= store_outputs(manifest, open_store(args.to, None))
    table = report.SummaryTable(
        title=f"{manifest.boxId} {manifest.version} ({manifest.targetId})",
        columns=["Field", "Value"],
        rows=[[k, str(v)] for k, v in outputs.items()],
    )
    report.write_summary(report.render_summary([table], report.summary_room(env)), env)
    report.set_outputs(outputs, env)
    console.result(outputs, "\n".join(f"{k}: {v}" for k, v in outputs.items()))
    return 0
