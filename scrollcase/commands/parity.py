"""``scrollcase parity``: run the recipe's parity script on every accelerator and compare outputs.

Two forms share one parser (argparse cannot mix a free positional with sub-commands):
``parity RECIPE|RELEASE.json [...]`` runs the gate; ``parity compare REF CAND [...]`` only compares
two saved output sets.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scrollcase.commands import CommandArgs, SubParsers, fail_after_result, handler
from scrollcase.console import Console
from scrollcase.errors import ParityError, UsageError
from scrollcase.format.release import ParityReport
from scrollcase.io.documents import validation_problems
from scrollcase.io.pathcheck import require_file_path
from scrollcase.parity.gate import GateOptions, compare_saved, run_gate
from scrollcase.parity.report import failure_problems, render_table
from scrollcase.recipe.model import Tolerances

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


@dataclass(frozen=True)
class ParityArgs(CommandArgs):
    target: str
    paths: tuple[str, ...]
    accelerators: str | None
    junit: Path | None
    timeout: float
    box: Path | None
    python: Path | None
    recipe_dir: Path | None
    keep_outputs: Path | None
    absolute: float | None
    relative: float | None
    minimum_cosine: float | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
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
    p.set_defaults(handler=handler(ParityArgs, run_command))


RUN_OPTIONS = ("accelerators", "junit", "box", "python", "recipe_dir", "keep_outputs")
COMPARE_OPTIONS = ("absolute", "relative", "minimum_cosine")


def _reject(args: ParityArgs, names: tuple[str, ...], form: str, fix: str) -> None:
    given = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be used with {form}", fix=fix)


def run_command(args: ParityArgs, console: Console) -> int:
    if args.junit is not None:
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


def _tolerances(args: ParityArgs) -> Tolerances:
    missing = [
        f"--{n.replace('_', '-')}" for n in ("absolute", "relative", "minimum_cosine") if getattr(args, n) is None
    ]
    absolute, relative, cosine = args.absolute, args.relative, args.minimum_cosine
    if missing or absolute is None or relative is None or cosine is None:
        raise UsageError(
            f"parity compare needs {', '.join(missing)}",
            fix="e.g. --absolute 1e-4 --relative 1e-3 --minimum-cosine 0.9999",
        )
    try:
        return Tolerances(absolute=absolute, relative=relative, minimumCosine=cosine)
    except ValidationError as exc:
        problems = validation_problems(exc, values=True)
        raise UsageError(
            "invalid tolerances", problems=problems, fix="absolute and relative > 0, 0 < minimum-cosine <= 1"
        ) from None


def _compare(args: ParityArgs, console: Console) -> int:
    if len(args.paths) != 2:
        raise UsageError(
            f"parity compare takes two output sets, got {len(args.paths)}",
            fix="scrollcase parity compare REF.npz CAND.npz --absolute A --relative R --minimum-cosine C",
        )
    tol = _tolerances(args)
    report = compare_saved(Path(args.paths[0]), Path(args.paths[1]), tol)
    return _finish(console, report, {"reference": args.paths[0], "candidate": args.paths[1]}, None)


# --------------------------------------------------------------------------------------- gate


def _gate(args: ParityArgs, console: Console) -> int:
    options = GateOptions(
        target=args.target,
        recipe_dir=args.recipe_dir,
        accelerators=args.accelerators,
        timeout=args.timeout,
        box=args.box,
        python=args.python,
        keep_outputs=args.keep_outputs,
        junit=args.junit,
    )
    result = run_gate(options, console.progress)
    extra: dict[str, Any] = {"recipeId": result.recipe_id}
    if result.junit:
        extra["junit"] = str(result.junit)
    if result.release:
        extra["release"] = str(result.release)
    return _finish(console, result.report, extra, result.script_file)


def _finish(console: Console, report: ParityReport, extra: dict[str, Any], script_file: str | None) -> int:
    data = {**extra, "report": report.model_dump(mode="json", exclude_none=True)}
    console.result(data, render_table(report))
    if not report.passed:
        problems = failure_problems(report, script_file)
        error = ParityError(f"parity failed: {len(problems)} failure(s)", problems=problems, fix=FAIL_FIX)
        fail_after_result(console, error)
    return 0
