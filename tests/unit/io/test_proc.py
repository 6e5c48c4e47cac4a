import sys
from pathlib import Path

from scrollcase.io import proc


def test_isolated_env_drops_python_variables():
    env = proc.isolated_env(
        {"CUDA_VISIBLE_DEVICES": "0"}, base={"PATH": "/bin", "PYTHONPATH": "/x", "PYTHONHOME": "/y", "HOME": "/h"}
    )
    assert "PYTHONPATH" not in env and "PYTHONHOME" not in env
    assert env["PATH"] == "/bin" and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["PYTHONNOUSERSITE"] == "1"


def test_host_pythonpath_does_not_leak_into_a_box_run(tmp_path: Path, monkeypatch):
    (tmp_path / "only_on_host.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = proc.run_python(Path(sys.executable), ["-c", "import only_on_host"], timeout=60)
    assert not result.ok
    assert "ModuleNotFoundError" in result.stderr


def test_timeout_is_reported_not_raised():
    result = proc.run_python(Path(sys.executable), ["-c", "import time; time.sleep(30)"], timeout=0.5)
    assert result.timed_out and result.returncode is None


def test_missing_interpreter_is_reported_not_raised(tmp_path: Path):
    result = proc.run_python(tmp_path / "no-such-python", ["-c", "pass"])
    assert result.returncode == 127 and "cannot execute" in result.stderr


def test_output_is_captured():
    result = proc.run_python(Path(sys.executable), ["-c", "import sys; print('out'); print('err', file=sys.stderr)"])
    assert result.ok and result.stdout.strip() == "out" and result.stderr.strip() == "err"


def test_run_python_writes_no_bytecode(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("VALUE = 1\n")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import mod; print(sys.flags.dont_write_bytecode)"
    result = proc.run_python(Path(sys.executable), ["-c", code], timeout=60)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mod.py"]  # no __pycache__ (read-only installs)
