"""The project's own static checks run as tests, so `.ci/run` (and the README's test command) enforce them."""

import subprocess
from pathlib import Path

import pytest

from tests.support.tools import tool

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    done = subprocess.run(
        [tool("ruff"), "check", "scrollcase", "tests", "benchmarks", "actions"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean():
    done = subprocess.run(
        [tool("ruff"), "format", "--check", "scrollcase", "tests", "benchmarks", "actions"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, "run `ruff format` on:\n" + done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_strict_is_clean():
    done = subprocess.run([tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
