"""`scrollcase cache` on the cache a real build filled: shown, pruned, emptied, and a build after it the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def scrollcase(cache: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SCROLLCASE_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def result(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def held(cache: Path, cwd: Path) -> dict[str, int]:
    return {s["name"]: s["files"] for s in result(scrollcase(cache, cwd, "cache", "info", "--json"))["sections"]}


@pytest.mark.slow
def test_a_pruned_and_cleaned_cache_is_refilled_by_the_next_build_with_the_same_bytes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = result(scrollcase(cache, tmp_path, "demo", "--workdir", "one", "--json"))
    filled = held(cache, tmp_path)
    assert filled["pyc"] > 800 and filled["packframes"] > 3  # every module's bytecode, every unit's frame

    frames = len(list((cache / "packframes").glob("??/*")))  # its indexes (*.json) are not entries
    pruned = result(scrollcase(cache, tmp_path, "cache", "prune", "--older-than", "0", "--json"))["pruned"]

    assert pruned["pyc"]["entries"] == filled["pyc"]  # all older than now
    assert pruned["packframes"]["entries"] == frames > 3
    assert held(cache, tmp_path)["pyc"] == 0

    text = scrollcase(cache, tmp_path, "cache", "clean")
    assert text.returncode == 0 and "removed" in text.stdout, text.stderr
    assert set(held(cache, tmp_path).values()) == {0} and not any(cache.iterdir())

    second = result(scrollcase(cache, tmp_path, "demo", "--workdir", "two", "--json"))
    assert second["sha256"] == first["sha256"]
    assert held(cache, tmp_path)["pyc"] == filled["pyc"]


def test_an_unknown_section_is_a_usage_error_naming_the_sections(tmp_path: Path) -> None:
    done = scrollcase(tmp_path / "cache", tmp_path, "cache", "clean", "wheel")
    assert done.returncode == 2
    assert "no cache section named 'wheel'" in done.stderr and "wheels, unpacked" in done.stderr
    assert not (tmp_path / "cache").exists()  # nothing was touched
