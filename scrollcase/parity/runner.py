"""Executing the parity protocol: run the script per accelerator, then compare with the reference."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.errors import ParityError
from scrollcase.format.release import ParityOutcome, ParityReport
from scrollcase.io.proc import run_python
from scrollcase.parity.compare import OutputSet, compare_sets
from scrollcase.parity.outputs import META_FILE, OUTPUTS_FILE, open_outputs
from scrollcase.parity.protocol import ParityRun, judge_run, plan_runs
from scrollcase.recipe.model import Tolerances


@dataclass(frozen=True)
class RunRecord:
    """What one script run left behind."""

    run: ParityRun
    outcome: ParityOutcome
    meta: dict[str, Any]
    outputs: OutputSet | None  # None when the run failed


def execute(run: ParityRun, python: Path, timeout: float) -> RunRecord:
    """Run the script once in a fresh output folder and judge the run."""
    if run.output_dir.exists():
        shutil.rmtree(run.output_dir)
    run.output_dir.mkdir(parents=True)
    result = run_python(python, run.args, env=run.env, timeout=timeout, cwd=run.output_dir)
    meta_file = run.output_dir / META_FILE
    meta_text = meta_file.read_text(encoding="utf-8", errors="replace") if meta_file.is_file() else None
    has_outputs = (run.output_dir / OUTPUTS_FILE).is_file() or any(run.output_dir.glob("*.npy"))
    outcome, meta = judge_run(run, result, meta_text, has_outputs, timeout)
    outputs = open_outputs(run.output_dir) if outcome.passed else None
    return RunRecord(run, outcome, meta, outputs)


def evaluate(records: Sequence[RunRecord], tol: Tolerances) -> ParityReport:
    """Compare every accelerator's outputs with the first one's (the reference)."""
    reference = records[0]
    results: list[ParityOutcome] = [r.outcome for r in records]
    for record in records[1:]:
        results.extend(_compare(reference, record, tol))
    return ParityReport(
        passed=all(r.passed for r in results),
        reference=reference.run.accelerator,
        accelerators=[r.run.accelerator for r in records],
        tolerances=tol.model_dump(),
        results=results,
        devices={r.run.accelerator: r.meta for r in records},
    )


def _compare(reference: RunRecord, record: RunRecord, tol: Tolerances) -> list[ParityOutcome]:
    acc = record.run.accelerator
    if reference.outputs is None:
        failed = reference.run.accelerator
        return [
            ParityOutcome(
                accelerator=acc,
                output="<outputs>",
                passed=False,
                message=f"not compared: the reference run on {failed} failed",
            )
        ]
    if record.outputs is None:
        return []  # the failed run is already reported
    try:
        return compare_sets(reference.outputs, record.outputs, acc, tol)
    except ParityError as exc:  # an unreadable outputs file fails this accelerator, not the command
        return [ParityOutcome(accelerator=acc, output="<outputs>", passed=False, message=exc.render())]


def run_parity(
    script: Path,
    python: Path,
    accelerators: Sequence[str],
    tol: Tolerances,
    output_root: Path,
    *,
    timeout: float = 600.0,
    box_dir: Path | None = None,
    on_run: Callable[[RunRecord], None] | None = None,
) -> ParityReport:
    """The whole gate: plan, execute each run, compare.  ``on_run(record)`` reports progress."""
    # Absolute paths because each run's working directory is its output folder.  absolute(), not
    # resolve(): a venv's python is a symlink, and following it would leave the venv.
    records = []
    box = box_dir.absolute() if box_dir else None
    for run in plan_runs(script.absolute(), accelerators, output_root.absolute(), box):
        record = execute(run, python.absolute(), timeout)
        if on_run is not None:
            on_run(record)
        records.append(record)
    return evaluate(records, tol)
