"""README's command 1 leaves its next command runnable as printed: the venv's ``scrollcase`` is run by its
path (the venv is not activated, so PATH has no ``scrollcase``), and the demo's "next:" line, pasted into a
shell with the same PATH, runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="the demo runs on Linux")]


def test_the_demos_next_line_runs_as_printed(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "scrollcase"
    if not script.is_file():
        pytest.skip(f"no console script beside {sys.executable} (scrollcase not pip-installed in this venv)")
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(script, venv / "bin" / "scrollcase")  # README: `.venv/bin/scrollcase demo` from the folder above
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != script.parent)
    env = {**os.environ, "PATH": path}
    found = shutil.which("scrollcase", path=path)
    assert found is None or Path(found).resolve() != script.resolve(), "this venv's scrollcase is still on PATH"
    done = subprocess.run(
        [".venv/bin/scrollcase", "demo", "--workdir", "scrollcase demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("next: ")]
    assert len(lines) == 1, done.stdout
    command = lines[0].removeprefix("next: ")
    assert command.startswith(".venv/bin/scrollcase verify "), command
    ran = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "self-test" in (ran.stdout + ran.stderr)
