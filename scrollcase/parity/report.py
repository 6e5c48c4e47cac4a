"""Rendering a ParityReport: a readable table and JUnit cases.  Pure."""

from __future__ import annotations

from scrollcase.errors import Problem
from scrollcase.format.release import ParityOutcome, ParityReport
from scrollcase.reports.junit import JUnitCase

COLUMNS = ("accelerator", "output", "result", "max abs", "max rel", "cosine", "worst index")


def _num(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def _row(o: ParityOutcome) -> tuple[str, ...]:
    return (
        o.accelerator,
        o.output,
        "pass" if o.passed else "FAIL",
        _num(o.maxAbsoluteError),
        _num(o.maxRelativeError),
        _num(o.cosine, ".8f"),
        "-" if o.worstIndex is None else str(o.worstIndex),
    )


def render_table(report: ParityReport) -> str:
    """Aligned columns, one row per outcome, then every failure's message in full."""
    rows = [COLUMNS, *(_row(o) for o in report.results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    tol = ", ".join(f"{k}={v:g}" for k, v in report.tolerances.items())
    head = f"parity: reference {report.reference}; tolerances {tol}"
    failures = [f"- {o.accelerator} {o.output}: {o.message}" for o in report.results if not o.passed]
    verdict = "parity passed" if report.passed else f"parity FAILED ({len(failures)} failure(s)):"
    return "\n".join([head, *lines, "", verdict, *failures])


def _properties(o: ParityOutcome) -> dict[str, str]:
    keys = (
        "maxAbsoluteError",
        "maxRelativeError",
        "cosine",
        "worstIndex",
        "referenceValue",
        "candidateValue",
        "elements",
        "violations",
        "durationSeconds",
    )
    data = o.model_dump()
    return {k: str(data[k]) for k in keys if data.get(k) is not None}


def junit_cases(report: ParityReport, script_file: str, recipe_id: str) -> list[JUnitCase]:
    """One case per script run and one per output per compared accelerator; file = the script."""
    return [
        JUnitCase(
            name=o.output if o.kind == "compare" else f"run on {o.accelerator}",
            classname=f"parity.{recipe_id}.{o.accelerator}",
            passed=o.passed,
            message=o.message,
            output=o.message,
            seconds=o.durationSeconds or 0.0,
            file=script_file,
            properties=_properties(o),
        )
        for o in report.results
    ]


def failure_problems(report: ParityReport, script_file: str | None) -> list[Problem]:
    """Each failed outcome as a problem located at the parity script (None: two saved sets compared)."""
    return [
        Problem(message=o.message, file=script_file, key=f"{o.accelerator}.{o.output}")
        for o in report.results
        if not o.passed
    ]
