"""Command-line tools installed by the test extras (ruff, mypy, check-jsonschema, jactionlint, zizmor), and
scrollcase itself run as a subprocess that sees none of this machine's AWS or scrollcase settings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def tool(name: str) -> str:
    """The tool's path: beside this interpreter first (the venv .ci/run made), then PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


REPO = Path(__file__).resolve().parents[2]


def run_isolated(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m scrollcase ARGS`` from this checkout, with no AWS profile, instance metadata or
    ``SCROLLCASE_*`` setting of this machine (``env`` adds some back)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SCROLLCASE_", "GITHUB_"))}
    full_env.update(
        {
            "PYTHONPATH": str(REPO),
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120
    )
