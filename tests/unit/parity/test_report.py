"""Rendering a parity report as a table and as JUnit cases (pure)."""

from __future__ import annotations

from scrollcase.format.release import ParityOutcome, ParityReport
from scrollcase.parity.report import junit_cases, render_table


def report() -> ParityReport:
    return ParityReport(
        passed=False,
        reference="cpu",
        accelerators=["cpu", "cuda"],
        tolerances={"absolute": 1e-4, "relative": 1e-3, "minimumCosine": 0.9999},
        results=[
            ParityOutcome(
                accelerator="cpu", output="<run>", kind="run", passed=True, message="ran", durationSeconds=0.5
            ),
            ParityOutcome(accelerator="cuda", output="<run>", kind="run", passed=True, message="ran"),
            ParityOutcome(
                accelerator="cuda",
                output="logits",
                passed=False,
                message="1 of 4 exceed",
                maxAbsoluteError=0.5,
                maxRelativeError=0.25,
                cosine=0.99,
                worstIndex=[0, 1],
                referenceValue=2.0,
                candidateValue=2.5,
                elements=4,
                violations=1,
            ),
        ],
    )


def test_table_has_a_row_per_outcome_and_lists_failures() -> None:
    text = render_table(report())
    lines = text.splitlines()
    assert lines[0] == ("parity: reference cpu; tolerances absolute=0.0001, relative=0.001, minimumCosine=0.9999")
    assert lines[1].split() == [
        "accelerator",
        "output",
        "result",
        "max",
        "abs",
        "max",
        "rel",
        "cosine",
        "worst",
        "index",
    ]
    assert lines[5].split() == ["cuda", "logits", "FAIL", "0.5", "0.25", "0.99000000", "[0,", "1]"]
    assert "parity FAILED (1 failure(s)):" in text
    assert "- cuda logits: 1 of 4 exceed" in text


def test_junit_cases_carry_file_metrics_and_verdict() -> None:
    cases = junit_cases(report(), "recipes/r/checks/parity.py", "r")
    assert [c.name for c in cases] == ["run on cpu", "run on cuda", "logits"]
    logits = cases[2]
    assert logits.classname == "parity.r.cuda" and logits.file == "recipes/r/checks/parity.py"
    assert not logits.passed and logits.message == "1 of 4 exceed"
    assert logits.properties["maxAbsoluteError"] == "0.5"
    assert logits.properties["worstIndex"] == "[0, 1]"
    assert cases[0].seconds == 0.5 and cases[0].passed
