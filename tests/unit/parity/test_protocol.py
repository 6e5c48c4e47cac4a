"""The parity protocol: run plans and the judgement of one run (pure: no processes, no disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.io.proc import RunResult
from scrollcase.parity.protocol import RUN_OUTPUT, ParityRun, judge_run, parse_meta, plan_runs


def run_for(accelerator: str) -> ParityRun:
    return plan_runs(Path("/box/checks/parity.py"), [accelerator], Path("/tmp/out"))[0]


def result(code: int | None = 0, stderr: str = "") -> RunResult:
    return RunResult(("python",), code, "", stderr, 1.25)


def meta(accelerator: str, **extra: str) -> str:
    return json.dumps({"accelerator": accelerator, **extra})


def test_plan_tells_the_script_its_accelerator_by_argument_and_environment() -> None:
    runs = plan_runs(Path("/r/checks/parity.py"), ["cpu", "cuda"], Path("/o"), box_dir=Path("/box"))
    assert [r.accelerator for r in runs] == ["cpu", "cuda"]
    cpu, cuda = runs
    assert cuda.args == ("/r/checks/parity.py", "--accelerator", "cuda", "--output-dir", str(Path("/o/cuda")))
    assert cuda.env == {
        "SCROLLCASE_ACCELERATOR": "cuda",
        "SCROLLCASE_PARITY_OUTPUT": str(Path("/o/cuda")),
        "CUDA_VISIBLE_DEVICES": "0",
        "SCROLLCASE_BOX_DIR": "/box",
    }
    assert "CUDA_VISIBLE_DEVICES" not in cpu.env
    assert cpu.output_dir != cuda.output_dir


def test_a_clean_run_passes_and_returns_its_metadata() -> None:
    outcome, data = judge_run(run_for("cuda"), result(), meta("cuda", device="H200"), True, 60)
    assert outcome.passed and outcome.kind == "run" and outcome.output == RUN_OUTPUT
    assert outcome.message == "ran on cuda in 1.2 s" and outcome.durationSeconds == 1.25
    assert data == {"accelerator": "cuda", "device": "H200"}


def test_a_script_that_lies_about_its_device_fails_as_a_silent_fallback() -> None:
    outcome, _ = judge_run(run_for("cuda"), result(), meta("cpu", device="x86"), True, 60)
    assert not outcome.passed
    assert outcome.message == ("asked to run on cuda but the script reports it ran on cpu (x86): a silent fallback")


def test_device_aliases_are_accepted() -> None:
    assert judge_run(run_for("metal"), result(), meta("mps"), True, 60)[0].passed
    assert judge_run(run_for("cuda"), result(), meta("CUDA"), True, 60)[0].passed


@pytest.mark.parametrize(("text", "why"), [(None, "no meta.json was saved"), ("{}", 'meta.json has no "accelerator"')])
def test_an_accelerator_run_must_report_its_device(text: str | None, why: str) -> None:
    outcome, _ = judge_run(run_for("cuda"), result(), text, True, 60)
    assert not outcome.passed and outcome.message.startswith(why)
    assert "silent" in outcome.message


def test_a_cpu_run_may_omit_meta() -> None:
    assert judge_run(run_for("cpu"), result(), None, True, 60)[0].passed


def test_timeout_crash_and_missing_outputs_each_have_their_own_message() -> None:
    timed_out, _ = judge_run(run_for("cuda"), result(None, "step 1\n"), None, False, 5)
    assert timed_out.message == "the parity script timed out after 5 s on cuda; stderr:\nstep 1"
    crashed, _ = judge_run(run_for("cuda"), result(1, "Traceback\nRuntimeError: no kernel image"), None, False, 5)
    assert crashed.message.startswith("the parity script crashed on cuda (exit code 1); stderr:")
    assert crashed.message.endswith("RuntimeError: no kernel image")
    silent, _ = judge_run(run_for("cpu"), result(0), None, False, 5)
    assert silent.message.startswith("the parity script saved no outputs on cpu")
    assert not (timed_out.passed or crashed.passed or silent.passed)


def test_stderr_is_cut_to_its_tail() -> None:
    stderr = "\n".join(f"line {i}" for i in range(100))
    outcome, _ = judge_run(run_for("cpu"), result(2, stderr), None, False, 5)
    assert "line 99" in outcome.message and "line 79" not in outcome.message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "is not valid JSON"),
        ("[1]", "must hold a JSON object, got list"),
        ('{"accelerator": 3}', '"accelerator" must be a string'),
        (json.dumps({"accelerator": "cuda", "log": "x" * 70000}), "at most 65536 are allowed"),
    ],
)
def test_bad_meta_is_reported(text: str, problem: str) -> None:
    assert problem in (parse_meta(text, "cuda/meta.json")[1] or "")
    outcome, _ = judge_run(run_for("cuda"), result(), text, True, 60)
    assert not outcome.passed and problem in outcome.message
