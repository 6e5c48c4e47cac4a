from __future__ import annotations

import json
import os
import signal
import sys
import venv
from pathlib import Path

import pytest

from scrollcase.build import selftest
from scrollcase.io.proc import RunResult
from scrollcase.recipe.model import SelfTest

RECIPE = """{
  "schemaVersion": 1,
  "selfTest": {
    "imports": [
      "numpy",
      "yaml"
    ],
    "files": ["model-cache/m/w.bin"],
    "pythonCode": "print(1)"
  },
  "prunePaths": []
}
"""
SELF_TEST = SelfTest(imports=["numpy", "yaml"], files=["model-cache/m/w.bin"], pythonCode="print(1)")


def result(code: int | None, stdout: str = "", stderr: str = "") -> RunResult:
    return RunResult(("python",), code, stdout, stderr, 0.5)


def test_plan_orders_checks_and_finds_their_lines() -> None:
    checks = selftest.plan_checks(SELF_TEST, "venv/bin/python", RECIPE)
    assert [(c.kind, c.name, c.line) for c in checks] == [
        ("entrypoint", "entrypoint venv/bin/python", 3),
        ("import", "import numpy", 5),
        ("import", "import yaml", 6),
        ("file", "file model-cache/m/w.bin", 8),
        ("code", "pythonCode", 9),
    ]
    assert checks[1].args == ("-c", "import numpy")
    assert checks[3].args[-1] == "model-cache/m/w.bin"


def test_plan_without_text_or_code() -> None:
    checks = selftest.plan_checks(SelfTest(imports=["a.b"], files=[], pythonCode="  "), "venv/bin/python")
    assert [c.kind for c in checks] == ["entrypoint", "import"] and checks[1].line is None


def test_plan_skips_files_that_are_not_in_the_box() -> None:
    checks = selftest.plan_checks(SELF_TEST, "venv/bin/python", None, frozenset({"model-cache/m/w.bin"}))
    assert [c.skip is not None for c in checks] == [False, False, False, True, False]


def test_judge_maps_exit_status_timeout_and_prefix(tmp_path: Path) -> None:
    check = selftest.Check("import yaml", "import", ("-c", "import yaml"))
    trace = "Traceback (most recent call last):\n  File ...\nModuleNotFoundError: No module named 'yaml'\n"
    assert selftest.judge(check, result(1, stderr=trace), tmp_path) == "ModuleNotFoundError: No module named 'yaml'"
    assert selftest.judge(check, result(None), tmp_path) == "timed out after 0s"
    assert selftest.judge(check, result(3), tmp_path) == "exited with status 3"
    assert selftest.judge(check, result(0), tmp_path) is None
    entry = selftest.Check("entrypoint", "entrypoint", ())
    assert selftest.judge(entry, result(0, stdout=f"{tmp_path}\n"), tmp_path) is None
    assert "not the box's environment" in (selftest.judge(entry, result(0, stdout=sys.prefix), tmp_path) or "")


def _results() -> list[selftest.CheckResult]:
    checks = selftest.plan_checks(SELF_TEST, "venv/bin/python", RECIPE, frozenset({"model-cache/m/w.bin"}))
    runs = [
        result(0),
        result(0),
        result(1, stderr="ModuleNotFoundError: No module named 'yaml'"),
        result(0),
        result(0),
    ]
    return [
        selftest.CheckResult(c, r, None if r.ok else "ModuleNotFoundError: No module named 'yaml'")
        for c, r in zip(checks, runs, strict=True)
    ]


def test_outcomes_and_failure_list_failed_checks() -> None:
    results = _results()
    report = selftest.outcomes(results)
    assert not report.passed
    assert [c.passed for c in report.checks] == [True, True, False, True, True]
    assert report.checks[3].message.startswith("skipped")
    error = selftest.failure(results, "recipes/x/recipe.json", "the box")
    assert error is not None and error.exit_code == 6
    assert len(error.problems) == 1
    problem = error.problems[0]
    assert problem.line == 6 and "import yaml" in problem.message and problem.fix
    assert selftest.failure([r for r in results if r.passed], None, "the box") is None


def test_junit_cases_carry_file_line_and_skips() -> None:
    cases = selftest.junit_cases(_results(), "recipes/x/recipe.json", "selftest")
    assert [(c.name, c.passed, c.skipped, c.line) for c in cases][2:4] == [
        ("import yaml", False, False, 6),
        ("file model-cache/m/w.bin", True, True, 8),
    ]
    assert all(c.file == "recipes/x/recipe.json" for c in cases)
    assert "No module named 'yaml'" in cases[2].output


def test_check_env() -> None:
    env = selftest.check_env(True, Path("/b"), Path("/b/model-cache/m"))
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["SCROLLCASE_MODEL_CACHE"] == str(Path("/b/model-cache/m"))
    assert "CUDA_VISIBLE_DEVICES" not in selftest.check_env(False, Path("/b"), Path("/b/m"))


def test_run_checks_uses_a_real_isolated_interpreter(tmp_path: Path, monkeypatch: object) -> None:
    """The host interpreter (not a box) stands in: its prefix is not ``tmp_path``, imports still run."""
    (tmp_path / "present.txt").write_text("x")
    checks = selftest.plan_checks(
        SelfTest(
            imports=["json", "no_such_module_xyz"],
            files=["present.txt", "gone"],
            pythonCode="import os; assert os.environ['SCROLLCASE_BOX_ROOT']",
        ),
        "venv/bin/python",
    )
    env = selftest.check_env(False, tmp_path, tmp_path)
    results = selftest.run_checks(checks, Path(sys.executable), Path(sys.prefix), tmp_path, env=env, timeout=60)
    assert [r.passed for r in results] == [True, True, False, True, False, True]
    assert "no_such_module_xyz" in (results[2].problem or "")
    assert json.dumps(selftest.outcomes(results).model_dump(mode="json"))


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_a_check_whose_process_dies_by_a_signal_fails(tmp_path: Path) -> None:
    """A segfaulting ``import torch`` (a broken CUDA library, a wrong glibc) prints nothing and exits by
    SIGSEGV: the self-test must fail it, naming the signal — on a real interpreter whose torch kills itself."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, symlinks=True)
    python = env_dir / "bin" / "python"
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    (site / "torch.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    checks = selftest.plan_checks(
        SelfTest(imports=["json", "torch"], pythonCode="import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
        "venv/bin/python",
    )
    env = selftest.check_env(False, tmp_path, tmp_path)
    results = selftest.run_checks(checks, python, env_dir, tmp_path, env=env, timeout=60)
    assert [(r.check.name, r.passed) for r in results] == [
        ("entrypoint venv/bin/python", True),
        ("import json", True),
        ("import torch", False),
        ("pythonCode", False),
    ]
    assert results[2].run.returncode == -signal.SIGSEGV
    assert (results[2].problem or "").startswith("killed by SIGSEGV")
    assert (results[3].problem or "").startswith("killed by SIGKILL")
    error = selftest.failure(results, None, "the box")
    assert error is not None and error.exit_code == 6 and len(error.problems) == 2
    assert not selftest.outcomes(results).passed


def test_a_signal_is_named_even_after_other_output() -> None:
    check = selftest.Check("import torch", "import", ("-c", "import torch"))
    said = selftest.judge(check, result(-11, stderr="UserWarning: something\n"), Path("/nowhere"))
    assert said == "killed by SIGSEGV (the process crashed or was killed); its last words: UserWarning: something"
    assert "killed by signal 999" in (selftest.judge(check, result(-999), Path("/nowhere")) or "")


def test_only_the_files_not_in_the_box_are_skipped() -> None:
    checks = selftest.plan_checks(
        SelfTest(imports=[], files=["a.bin", "b.bin"]), "venv/bin/python", None, frozenset({"a.bin"})
    )
    assert [(c.name, c.skip is not None) for c in checks] == [
        ("entrypoint venv/bin/python", False),
        ("file a.bin", True),
        ("file b.bin", False),
    ]
