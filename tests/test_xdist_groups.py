"""`.ci/run` relies on `--dist loadgroup`: tests marked `xdist_group("torch")` (or "act") share one worker, so
their heavy session set-up (the ~20 GB torch box) is built once.  pytest 9.2 silently broke that grouping
(pytest-xdist#1386): both workers built the torch box and the CI disk filled up.  This runs a real two-worker
session and fails if a group is ever split again."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("heavy")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    print("WORKER", os.environ["PYTEST_XDIST_WORKER"])
"""
OTHERS = """
import time
import pytest


@pytest.mark.parametrize("i", range(12))
def test_other(i):
    time.sleep(0.05)
"""


def test_a_marked_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_others.py").write_text(OTHERS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    workers = set(re.findall(r"\[(gw\d+)\] .*PASSED test_grouped\.py", done.stdout))
    assert len(re.findall(r"PASSED test_grouped\.py", done.stdout)) == 6, done.stdout[-3000:]
    assert len(workers) == 1, f"the 'heavy' group was split over {sorted(workers)}:\n{done.stdout[-3000:]}"
