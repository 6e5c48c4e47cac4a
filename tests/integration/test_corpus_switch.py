"""Defect 2: the real-world corpus tests raised at import when shared/ was missing and CI was set, and GitHub
sets CI=true too, so ci.yml's test job could never pass on GitHub.  The corpus modules are copied into a
checkout that has no shared/ beside it and collected the way each CI would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS_MODULES = ("test_real_world_lockcheck.py", "test_real_world_locks.py", "test_real_world_wheels.py")


@pytest.fixture
def bare_checkout(tmp_path: Path) -> Path:
    """tmp/outer/clone/tests/... : the corpus would be tmp/outer/shared/, which does not exist."""
    clone = tmp_path / "outer" / "clone"
    shutil.copytree(
        ROOT / "tests" / "support", clone / "tests" / "support", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(ROOT / "tests" / "__init__.py", clone / "tests" / "__init__.py")
    (clone / "tests" / "integration").mkdir()
    shutil.copy2(ROOT / "tests" / "integration" / "__init__.py", clone / "tests" / "integration" / "__init__.py")
    for name in CORPUS_MODULES:
        shutil.copy2(ROOT / "tests" / "integration" / name, clone / "tests" / "integration" / name)
    return clone


def collect(clone: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "SCROLLCASE_REQUIRE_CORPUS")}
    environ.update({"PYTHONPATH": f"{clone}{os.pathsep}{ROOT}", **env})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(clone),
            "tests/integration",
        ],
        cwd=clone,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_github_checkout_skips_the_corpus_tests_and_says_why(bare_checkout: Path) -> None:
    done = collect(bare_checkout, CI="true")  # what GitHub sets, with no shared/ beside the checkout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "real-world corpus not present" in done.stdout and "SCROLLCASE_REQUIRE_CORPUS" in done.stdout
    assert " passed" not in done.stdout and "skipped" in done.stdout


def test_ci_run_requires_the_corpus(bare_checkout: Path) -> None:
    done = collect(bare_checkout, CI="true", SCROLLCASE_REQUIRE_CORPUS="1")  # what .ci/run sets
    assert done.returncode != 0
    assert "real-world pixi corpus is missing" in done.stdout + done.stderr


def test_ci_run_sets_the_switch_and_githubs_ci_turns_it_off() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'export SCROLLCASE_REQUIRE_CORPUS="${SCROLLCASE_REQUIRE_CORPUS:-1}"' in script
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pytest_line = script.rstrip().splitlines()[-1]  # .ci/run ends with the README's test command
    assert pytest_line.startswith(".venv/bin/python -m pytest") and pytest_line in readme
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    (step,) = [s for s in ci["jobs"]["test"]["steps"] if s.get("run") == ".ci/run"]
    assert step["env"]["SCROLLCASE_REQUIRE_CORPUS"] == "0"  # GitHub's checkout has no shared/ beside it
