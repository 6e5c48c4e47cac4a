"""check-jsonschema (GitHub's vendored schemas), jactionlint and zizmor --offline on every action and
workflow: the same commands as the lint job of ci.yml, so a broken action fails .ci/run too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.tools import tool

ROOT = Path(__file__).resolve().parents[2]
ACTION_PATHS = sorted([ROOT / "action.yml", *(ROOT / "actions").glob("*/action.yml")])
ACTIONS = [str(p.relative_to(ROOT)) for p in ACTION_PATHS]
WORKFLOWS = [str(p.relative_to(ROOT)) for p in sorted((ROOT / ".github" / "workflows").glob("*.yml"))]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_actions_match_githubs_action_schema() -> None:
    done = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", *ACTIONS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflows_match_githubs_workflow_schema() -> None:
    done = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_jactionlint_correctness_profile_is_clean() -> None:
    done = run(tool("jactionlint"), "--profile", "correctness", "--no-online", "--no-color", *WORKFLOWS, *ACTIONS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_offline_is_clean() -> None:
    done = run(tool("zizmor"), "--offline", "--no-progress", *WORKFLOWS, *ACTIONS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_action_or_workflow_is_git_ignored() -> None:
    """An ignored action.yml is never committed and linters that honour .gitignore skip it."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = run("git", "check-ignore", "--no-index", *ACTIONS, *WORKFLOWS)
    assert done.returncode == 1, f"ignored by .gitignore: {done.stdout}"
