"""The parity gate end to end: find the recipe and box, run the script per accelerator, compare, record.

``run_gate`` is what ``scrollcase parity RECIPE|RELEASE.json`` does; ``compare_saved`` is
``scrollcase parity compare REF CAND``.  Both return the report; the caller renders it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from scrollcase.errors import UsageError, describe_path
from scrollcase.format.release import ParityReport
from scrollcase.parity import locate
from scrollcase.parity.compare import compare_sets
from scrollcase.parity.outputs import open_outputs
from scrollcase.parity.report import junit_cases
from scrollcase.parity.runner import RunRecord, run_parity
from scrollcase.recipe.loader import RecipeDir, resolve_recipe
from scrollcase.recipe.model import Tolerances
from scrollcase.reports.junit import write_junit

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GateOptions:
    """What to run the gate on, and where its results go."""

    target: str  # a recipe (id, folder or recipe.json) or a *.release.json
    recipe_dir: Path | None = None  # the recipe of a release manifest (default recipes/<recipeId>)
    accelerators: str | None = None  # comma-separated, first is the reference (default: the recipe's)
    timeout: float = 600.0
    box: Path | None = None  # an unpacked box to run in
    python: Path | None = None  # an interpreter instead of the box's (the release is then not updated)
    keep_outputs: Path | None = None
    junit: Path | None = None


@dataclass(frozen=True)
class GateResult:
    report: ParityReport
    recipe_id: str
    script_file: str  # the parity script as messages name it (POSIX separators)
    junit: Path | None  # the JUnit report written, if any
    release: Path | None  # the release manifest the report was recorded in, if any


@dataclass(frozen=True)
class _Subject:
    recipe_dir: RecipeDir
    release: locate.ReleaseFile | None


def compare_saved(reference: Path, candidate: Path, tol: Tolerances) -> ParityReport:
    """Two saved output sets compared as a run's candidate is compared with its reference."""
    results = compare_sets(open_outputs(reference), open_outputs(candidate), "candidate", tol)
    return ParityReport(
        passed=all(r.passed for r in results),
        reference="reference",
        accelerators=["reference", "candidate"],
        tolerances=tol.model_dump(),
        results=results,
    )


def run_gate(options: GateOptions, progress: Progress) -> GateResult:
    """Run the recipe's parity script on every accelerator, compare, write JUnit and the release."""
    subject = _subject(options)
    parity = locate.parity_block(subject.recipe_dir)
    accelerators = locate.parse_accelerators(options.accelerators, list(parity.accelerators))
    script = subject.recipe_dir.path / parity.script
    with ExitStack() as stack:
        python, box = _interpreter(options, subject, stack, progress)
        out_root = options.keep_outputs or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="scrollcase-parity-out-"))
        )

        def on_run(record: RunRecord) -> None:
            state = "ok" if record.outcome.passed else "FAILED"
            progress(f"parity: {record.run.accelerator}: {state}: {record.outcome.message}")

        progress(f"parity: running {parity.script} on {', '.join(accelerators)} with {python}")
        report = run_parity(
            script,
            python,
            accelerators,
            parity.tolerances,
            out_root,
            timeout=options.timeout,
            box_dir=box,
            on_run=on_run,
        )
    return _record(options, subject, report, script)


def _subject(options: GateOptions) -> _Subject:
    if locate.is_release_arg(options.target):
        release = locate.read_release(Path(options.target))
        return _Subject(locate.recipe_for_release(release.manifest, options.recipe_dir), release)
    recipe_dir = resolve_recipe(options.target)
    built = locate.built_release(recipe_dir.recipe)
    return _Subject(recipe_dir, locate.read_release(built) if built else None)


def _interpreter(
    options: GateOptions, subject: _Subject, stack: ExitStack, progress: Progress
) -> tuple[Path, Path | None]:
    """(python, box folder) from --python, --box, or by unpacking the release into a temp folder."""
    entry = subject.release.manifest.pythonEntryPoint if subject.release else subject.recipe_dir.recipe.pythonEntryPoint
    if options.python:
        return options.python, options.box
    if options.box:
        return locate.box_python(options.box, entry), options.box
    if subject.release is None:
        recipe_id = subject.recipe_dir.recipe.recipeId
        raise UsageError(
            f"no built release of {recipe_id} in {locate.DIST_DIR}",
            fix=f"run `scrollcase build {recipe_id}` first, or pass --box DIR or --python PATH",
        )
    temp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scrollcase-parity-box-")))
    progress(f"parity: unpacking {subject.release.manifest.archive.name}")
    box = locate.unpack_release(subject.release, temp / "box")
    return locate.box_python(box, entry), box


def _record(options: GateOptions, subject: _Subject, report: ParityReport, script: Path) -> GateResult:
    """Write JUnit and the release manifest (not when another interpreter than the box's ran)."""
    recipe_id = subject.recipe_dir.recipe.recipeId
    script_file = (describe_path(script) or str(script)).replace("\\", "/")
    if options.junit:
        write_junit(
            options.junit,
            f"parity {recipe_id}",
            junit_cases(report, script_file, recipe_id),
            properties={"recipeId": recipe_id, "reference": report.reference},
        )
    release = None
    if subject.release and not options.python:
        locate.write_release(subject.release, subject.release.manifest.model_copy(update={"parity": report}))
        release = subject.release.path
    return GateResult(report, recipe_id, script_file, options.junit, release)
