"""The actions' shared setup (actions/setup_scrollcase.py) really installing scrollcase: a venv from this
interpreter, uv from an offline wheelhouse through pip, scrollcase through uv, no index."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.act import copy_tree, working_tree_files
from tests.support.wheelhouse import build_wheelhouse
from tests.test_setup_scrollcase import env, setup


@pytest.mark.slow
def test_install_with_uv_from_an_offline_wheelhouse(tmp_path: Path) -> None:
    """The real thing: a venv from this interpreter, uv from the wheelhouse via pip, scrollcase via uv,
    no index; the venv runs `scrollcase --version`.  A second install for the same key reuses it."""
    wheels = tmp_path / "wheels"
    build_wheelhouse(wheels)
    # A copy of the checkout, as a runner downloads the action: builds in this shared tree would collide.
    source = tmp_path / "action"
    copy_tree(source, working_tree_files())
    environment = {
        **env(tmp_path),
        "PATH": "/usr/bin:/bin",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "HOME": str(tmp_path),
        "SETUPTOOLS_SCM_PRETEND_VERSION": "1.2.3",  # the copy has no .git to read the version from
    }
    said = setup.install(source, environment)
    assert "with uv" in said, said
    python = Path(setup.locate(source, environment)["python"])
    done = subprocess.run(
        [str(python), "-m", "scrollcase", "--version"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "scrollcase 1.2.3", done.stdout + done.stderr
    assert (python.parent / "uv").exists()
    assert setup.install(source, environment).startswith("scrollcase: reusing")
