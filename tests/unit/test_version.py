"""scrollcase.__version__ is the installed distribution's version (from the git tag: docs/releasing.md), looked up
only when asked for, so a CLI start does not pay for importlib.metadata."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

import scrollcase
from scrollcase.cli import main


def test_version_is_the_installed_distributions() -> None:
    assert scrollcase.__version__ == version("scrollcase")


def test_version_option_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"scrollcase {version('scrollcase')}\n"


def test_importing_the_cli_does_not_import_importlib_metadata() -> None:
    probe = "import sys, scrollcase.cli; print('importlib.metadata' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "False"


def test_an_unknown_attribute_is_still_an_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = scrollcase.nope
