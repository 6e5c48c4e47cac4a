"""The parity gate end to end with a real interpreter running a real numpy parity script.

``sys.executable`` stands in for the box's interpreter; the script is the numpy twin of the example
recipes' torch script (tests/fixtures/parity/numpy_mlp.py), made to misbehave through scenario.json.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scrollcase.format.release import ParityOutcome, ParityReport
from scrollcase.parity.runner import RunRecord, run_parity
from scrollcase.recipe.model import Tolerances

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "parity" / "numpy_mlp.py"
TOL = Tolerances(absolute=1e-4, relative=1e-3, minimumCosine=0.9999)


def gate(
    tmp_path: Path,
    scenario: dict[str, Any] | None = None,
    accelerators: tuple[str, ...] = ("cpu", "cuda"),
    timeout: float = 60.0,
    tol: Tolerances = TOL,
) -> ParityReport:
    checks = tmp_path / "recipe" / "checks"
    checks.mkdir(parents=True, exist_ok=True)
    script = checks / "parity.py"
    shutil.copyfile(FIXTURE, script)
    if scenario is not None:
        (checks / "scenario.json").write_text(json.dumps(scenario))
    return run_parity(script, Path(sys.executable), list(accelerators), tol, tmp_path / "out", timeout=timeout)


def by_key(report: ParityReport) -> dict[tuple[str, str], ParityOutcome]:
    return {(r.accelerator, r.output): r for r in report.results}


def failures(report: ParityReport) -> dict[tuple[str, str], str]:
    return {(r.accelerator, r.output): r.message for r in report.results if not r.passed}


def test_agreement_within_tolerance(tmp_path: Path) -> None:
    seen: list[RunRecord] = []
    report = run_parity(
        FIXTURE, Path(sys.executable), ["cpu", "cuda", "metal"], TOL, tmp_path / "out", on_run=seen.append
    )
    assert report.passed, failures(report)
    assert [r.run.accelerator for r in seen] == ["cpu", "cuda", "metal"]
    assert report.reference == "cpu" and report.accelerators == ["cpu", "cuda", "metal"]
    results = by_key(report)
    assert set(results) == {
        ("cpu", "<run>"),
        ("cuda", "<run>"),
        ("metal", "<run>"),
        ("cuda", "hidden"),
        ("cuda", "logits"),
        ("metal", "hidden"),
        ("metal", "logits"),
    }
    logits = results[("cuda", "logits")]
    # float32 vs float64-then-rounded kernels really differ, by far less than the tolerance.
    assert 0 < (logits.maxAbsoluteError or 0) < 1e-5 and (logits.cosine or 0) > 0.99999
    assert report.devices["cuda"]["accelerator"] == "cuda"
    assert report.tolerances == {"absolute": 1e-4, "relative": 1e-3, "minimumCosine": 0.9999}
    assert (tmp_path / "out" / "cuda" / "outputs.npz").is_file()


@pytest.mark.parametrize(("delta", "passes"), [(0.9e-4, True), (1.1e-4, False)])
def test_perturbation_around_the_absolute_tolerance(tmp_path: Path, delta: float, passes: bool) -> None:
    loose_rel = Tolerances(absolute=1e-4, relative=1e-9, minimumCosine=0.9999)
    report = gate(tmp_path, {"cuda": {"perturb": {"logits": [[2, 3], delta]}}}, tol=loose_rel)
    logits = by_key(report)[("cuda", "logits")]
    assert logits.passed is passes, logits.message
    assert logits.worstIndex == [2, 3]
    assert report.passed is passes


@pytest.mark.parametrize(("factor", "passes"), [(0.99, True), (1.01, False)])
def test_perturbation_around_the_relative_tolerance(tmp_path: Path, factor: float, passes: bool) -> None:
    tol = Tolerances(absolute=1e-5, relative=1e-2, minimumCosine=0.99)
    assert gate(tmp_path, tol=tol).passed
    with np.load(tmp_path / "out" / "cpu" / "outputs.npz") as saved:
        ref = float(saved["logits"][0, 0])
    value = ref + factor * (tol.absolute + tol.relative * abs(ref))
    report = gate(tmp_path, {"cuda": {"set": {"logits": [[0, 0], repr(value)]}}}, tol=tol)
    logits = by_key(report)[("cuda", "logits")]
    assert logits.passed is passes, logits.message
    assert logits.worstIndex == [0, 0]
    assert (logits.maxRelativeError or 0) == pytest.approx(factor * (1e-2 + 1e-5 / abs(ref)), rel=1e-4)


@pytest.mark.parametrize(("factor", "passes"), [(0.005, True), (0.05, False)])
def test_rotation_around_the_minimum_cosine(tmp_path: Path, factor: float, passes: bool) -> None:
    tol = Tolerances(absolute=10.0, relative=10.0, minimumCosine=0.999)
    report = gate(tmp_path, {"cuda": {"rotate": {"hidden": factor}}}, tol=tol)
    hidden = by_key(report)[("cuda", "hidden")]
    assert hidden.passed is passes, hidden.message
    if not passes:
        assert "< minimumCosine 0.999" in hidden.message


@pytest.mark.parametrize(("value", "word"), [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")])
def test_non_finite_outputs_fail(tmp_path: Path, value: str, word: str) -> None:
    report = gate(tmp_path, {"cuda": {"set": {"hidden": [[1, 2], value]}}})
    message = failures(report)[("cuda", "hidden")]
    assert message.startswith(f"non-finite value: candidate has {word} at flat index 66")
    assert ("cuda", "logits") not in failures(report)


def test_shape_dtype_missing_extra_and_zero_outputs_each_fail(tmp_path: Path) -> None:
    report = gate(
        tmp_path,
        {
            "cuda": {"reshape": ["hidden"], "dtype": {"logits": "float64"}, "extra": ["bonus"]},
            "metal": {"drop": ["logits"], "zero": ["hidden"]},
        },
        accelerators=("cpu", "cuda", "metal"),
    )
    found = failures(report)
    assert found[("cuda", "hidden")] == "shape mismatch: reference [16, 64], candidate [1024]"
    assert found[("cuda", "logits")] == "dtype mismatch: reference float32, candidate float64"
    assert found[("cuda", "bonus")].startswith("extra output: 'bonus' is not in the reference")
    assert found[("metal", "logits")].startswith("missing output:")
    assert found[("metal", "hidden")].endswith("candidate is an all-zero vector: cosine similarity is undefined")
    assert not report.passed


def test_a_script_that_lies_about_its_device_fails(tmp_path: Path) -> None:
    report = gate(tmp_path, {"cuda": {"lie": "cpu"}})
    assert failures(report) == {
        ("cuda", "<run>"): "asked to run on cuda but the script reports it ran on "
        f"cpu (numpy {np.__version__}): a silent fallback"
    }


def test_a_gpu_run_without_meta_fails(tmp_path: Path) -> None:
    report = gate(tmp_path, {"cuda": {"no_meta": True}})
    assert failures(report)[("cuda", "<run>")].startswith("no meta.json was saved")


def test_a_hang_times_out(tmp_path: Path) -> None:
    report = gate(tmp_path, {"cuda": {"hang": 60}}, timeout=3)
    message = failures(report)[("cuda", "<run>")]
    assert message.startswith("the parity script timed out after 3 s on cuda")


def test_a_crash_reports_its_stderr(tmp_path: Path) -> None:
    report = gate(tmp_path, {"cuda": {"crash": "RuntimeError: CUDA error: no kernel image is available"}})
    message = failures(report)[("cuda", "<run>")]
    assert message.startswith("the parity script crashed on cuda (exit code 3); stderr:")
    assert "no kernel image is available" in message
    assert set(failures(report)) == {("cuda", "<run>")}


def test_a_failed_reference_fails_every_comparison(tmp_path: Path) -> None:
    report = gate(tmp_path, {"cpu": {"crash": "boom"}})
    found = failures(report)
    assert found[("cuda", "<outputs>")] == "not compared: the reference run on cpu failed"
    assert "boom" in found[("cpu", "<run>")]


def test_npy_folder_outputs_compare_with_npz(tmp_path: Path) -> None:
    report = gate(tmp_path, {"cuda": {"format": "npy"}})
    assert report.passed, failures(report)
    assert (tmp_path / "out" / "cuda" / "logits.npy").is_file()


def test_the_script_runs_isolated_from_host_python_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the fixture asserts PYTHONPATH is absent
    assert gate(tmp_path).passed
