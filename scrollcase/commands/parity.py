"""``scrollcase parity``: run the recipe's parity script on every accelerator and compare outputs.

Two forms share one parser (argparse cannot mix a free positional with sub-commands):
``parity RECIPE|RELEASE.json [...]`` runs the gate; ``parity compare REF CAND [...]`` only compares
two saved output sets.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scrollcase.box.release import ParityReport
from scrollcase.console import Console
from scrollcase.errors import ParityError, Problem, UsageError, describe_path
from scrollcase.io.pathcheck import require_file_path
from scrollcase.parity import locate
from scrollcase.parity.compare import compare_sets
from scrollcase.parity.outputs import open_outputs
from scrollcase.parity.report import junit_cases, render_table
from scrollcase.parity.runner import RunRecord, run_parity
from scrollcase.recipe.loader import RecipeDir, resolve_recipe
from scrollcase.recipe.model import Tolerances
from scrollcase.reports.junit import write_junit

NAME = "parity"
COMPARE = "compare"
USAGE = (
    "scrollcase parity RECIPE|RELEASE.json [--accelerators cpu,cuda] [--junit PATH] [--timeout S]\n"
    "                         [--box DIR | --python PATH] [--recipe-dir DIR] [--keep-outputs DIR]\n"
    "       scrollcase parity compare REF CAND --absolute A --relative R --minimum-cosine C"
)
DESCRIPTION = """\
Run the recipe's parity script with the box's own interpreter once per accelerator
(parity.accelerators, the first is the reference) and compare every output with the reference's:
each element must satisfy |a-b| <= absolute + relative*|ref| and the cosine similarity must reach
minimumCosine.  Results go to a table (or --json), to --junit, and into the release manifest.

`parity compare REF CAND` compares two saved output sets (.npz, or folders of .npy) the same way.
Exit codes: 0 passed, 7 a parity check failed, 2 usage, 3 recipe, 8 archive integrity."""
FAIL_FIX = (
    "keep the outputs with --keep-outputs DIR and inspect them with `scrollcase parity compare`; "
    "widen parity.tolerances in recipe.json only if the difference is expected"
)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        NAME,
        parents=[common],
        usage=USAGE,
        help="prove the box computes the same on every accelerator (the parity gate)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target",
        metavar="RECIPE|RELEASE.json|compare",
        help="a recipe (id, folder or recipe.json), a *.release.json, or `compare`",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="REF CAND",
        help="with `compare`: two saved output sets "
        "(.npz file, a folder holding outputs.npz, or a folder of .npy files)",
    )
    run = p.add_argument_group("running the gate")
    run.add_argument("--accelerators", help="comma-separated, first is the reference (default: recipe's)")
    run.add_argument("--junit", type=Path, metavar="PATH", help="write a JUnit XML report here")
    run.add_argument("--timeout", type=float, default=600.0, metavar="S", help="per run (default 600)")
    run.add_argument("--box", type=Path, metavar="DIR", help="an already unpacked box to run in")
    run.add_argument(
        "--python",
        type=Path,
        metavar="PATH",
        help="run this interpreter instead of the box's (the release is then not updated)",
    )
    run.add_argument(
        "--recipe-dir", type=Path, metavar="DIR", help="the recipe of a RELEASE.json (default recipes/<recipeId>)"
    )
    run.add_argument(
        "--keep-outputs",
        type=Path,
        metavar="DIR",
        help="keep each accelerator's outputs in DIR/<accelerator>/ (default: a temporary folder, deleted)",
    )
    cmp = p.add_argument_group("compare REF CAND")
    cmp.add_argument("--absolute", type=float, metavar="A", help="absolute tolerance")
    cmp.add_argument("--relative", type=float, metavar="R", help="relative tolerance (times |ref|)")
    cmp.add_argument("--minimum-cosine", type=float, metavar="C", help="least cosine similarity")
    p.set_defaults(handler=run_command)


RUN_OPTIONS = ("accelerators", "junit", "box", "python", "recipe_dir", "keep_outputs")
COMPARE_OPTIONS = ("absolute", "relative", "minimum_cosine")


def _reject(args: argparse.Namespace, names: tuple[str, ...], form: str, fix: str) -> None:
    given = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be used with {form}", fix=fix)


def run_command(args: argparse.Namespace, console: Console) -> int:
    if getattr(args, "junit", None) is not None:
        require_file_path(args.junit, "--junit")
    if args.target == COMPARE:
        _reject(args, RUN_OPTIONS, "`parity compare`", "compare takes only REF CAND and the tolerances")
        return _compare(args, console)
    _reject(args, COMPARE_OPTIONS, "a parity run", "a run uses parity.tolerances from recipe.json")
    if args.paths:
        raise UsageError(
            f"unexpected arguments {' '.join(args.paths)!r} after {args.target!r}",
            fix="`scrollcase parity RECIPE` takes one recipe or release manifest",
        )
    return _gate(args, console)


# ------------------------------------------------------------------------------------ compare


def _tolerances(args: argparse.Namespace) -> Tolerances:
    missing = [
        f"--{n.replace('_', '-')}" for n in ("absolute", "relative", "minimum_cosine") if getattr(args, n) is None
    ]
    if missing:
        raise UsageError(
            f"parity compare needs {', '.join(missing)}",
            fix="e.g. --absolute 1e-4 --relative 1e-3 --minimum-cosine 0.9999",
        )
    try:
        return Tolerances(absolute=args.absolute, relative=args.relative, minimumCosine=args.minimum_cosine)
    except ValidationError as exc:
        problems = [Problem(message=e["msg"], key=str(e["loc"][0]), value=repr(e.get("input"))) for e in exc.errors()]
        raise UsageError(
            "invalid tolerances", problems=problems, fix="absolute and relative > 0, 0 < minimum-cosine <= 1"
        ) from None


def _compare(args: argparse.Namespace, console: Console) -> int:
    if len(args.paths) != 2:
        raise UsageError(
            f"parity compare takes two output sets, got {len(args.paths)}",
            fix="scrollcase parity compare REF.npz CAND.npz --absolute A --relative R --minimum-cosine C",
        )
    tol = _tolerances(args)
    ref, cand = (open_outputs(Path(p)) for p in args.paths)
    results = compare_sets(ref, cand, "candidate", tol)
    report = ParityReport(
        passed=all(r.passed for r in results),
        reference="reference",
        accelerators=["reference", "candidate"],
        tolerances=tol.model_dump(),
        results=results,
    )
    return _finish(console, report, {"reference": args.paths[0], "candidate": args.paths[1]}, None)


# --------------------------------------------------------------------------------------- gate


@dataclass(frozen=True)
class _Subject:
    recipe_dir: RecipeDir
    release: locate.ReleaseFile | None


def _subject(args: argparse.Namespace) -> _Subject:
    if locate.is_release_arg(args.target):
        release = locate.read_release(Path(args.target))
        return _Subject(locate.recipe_for_release(release.manifest, args.recipe_dir), release)
    recipe_dir = resolve_recipe(args.target)
    built = locate.built_release(recipe_dir.recipe)
    return _Subject(recipe_dir, locate.read_release(built) if built else None)


def _interpreter(
    args: argparse.Namespace, subject: _Subject, stack: ExitStack, console: Console
) -> tuple[Path, Path | None]:
    """(python, box folder) from --python, --box, or by unpacking the release into a temp folder."""
    entry = subject.release.manifest.pythonEntryPoint if subject.release else subject.recipe_dir.recipe.pythonEntryPoint
    if args.python:
        return args.python, args.box
    if args.box:
        return locate.box_python(args.box, entry), args.box
    if subject.release is None:
        recipe_id = subject.recipe_dir.recipe.recipeId
        raise UsageError(
            f"no built release of {recipe_id} in {locate.DIST_DIR}",
            fix=f"run `scrollcase build {recipe_id}` first, or pass --box DIR or --python PATH",
        )
    temp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scrollcase-parity-box-")))
    console.progress(f"parity: unpacking {subject.release.manifest.archive.name}")
    box = locate.unpack_release(subject.release, temp / "box")
    return locate.box_python(box, entry), box


def _gate(args: argparse.Namespace, console: Console) -> int:
    subject = _subject(args)
    parity = locate.parity_block(subject.recipe_dir)
    accelerators = locate.parse_accelerators(args.accelerators, list(parity.accelerators))
    script = subject.recipe_dir.path / parity.script
    with ExitStack() as stack:
        python, box = _interpreter(args, subject, stack, console)
        out_root = args.keep_outputs or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="scrollcase-parity-out-"))
        )

        def on_run(record: RunRecord) -> None:
            state = "ok" if record.outcome.passed else "FAILED"
            console.progress(f"parity: {record.run.accelerator}: {state}: {record.outcome.message}")

        console.progress(f"parity: running {parity.script} on {', '.join(accelerators)} with {python}")
        report = run_parity(
            script, python, accelerators, parity.tolerances, out_root, timeout=args.timeout, box_dir=box, on_run=on_run
        )
    return _record(args, console, subject, report, script)


def _record(args: argparse.Namespace, console: Console, subject: _Subject, report: ParityReport, script: Path) -> int:
    """Write JUnit and the release manifest, then print the result."""
    recipe_id = subject.recipe_dir.recipe.recipeId
    script_file = (describe_path(script) or str(script)).replace("\\", "/")
    extra: dict[str, Any] = {"recipeId": recipe_id}
    if args.junit:
        write_junit(
            args.junit,
            f"parity {recipe_id}",
            junit_cases(report, script_file, recipe_id),
            properties={"recipeId": recipe_id, "reference": report.reference},
        )
        extra["junit"] = str(args.junit)
    if subject.release and not args.python:
        locate.write_release(subject.release, subject.release.manifest.model_copy(update={"parity": report}))
        extra["release"] = str(subject.release.path)
    return _finish(console, report, extra, script_file)


def _finish(console: Console, report: ParityReport, extra: dict[str, Any], script_file: str | None) -> int:
    data = {**extra, "report": report.model_dump(mode="json", exclude_none=True)}
    console.result(data, render_table(report))
    if report.passed:
        return 0
    if console.json_mode:  # the report above is the one JSON document on stdout
        return ParityError.exit_code
    problems = [
        Problem(message=o.message, file=script_file, key=f"{o.accelerator}.{o.output}")
        for o in report.results
        if not o.passed
    ]
    raise ParityError(f"parity failed: {len(problems)} failure(s)", problems=problems, fix=FAIL_FIX)
