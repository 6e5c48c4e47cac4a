"""Command-line tools installed by the test extras (ruff, mypy, check-jsonschema, jactionlint, zizmor)."""

from __future__ import annotations

import shutil
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
