from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from scrollcase.errors import RecipeError
from scrollcase.format.layout import box_layout, env_dir_for


@pytest.mark.parametrize(
    ("platform", "entry", "env", "scripts", "site"),
    [
        ("linux", "venv/bin/python", "venv", "venv/bin", "venv/lib/python3.11/site-packages"),
        ("osx", "env/bin/python3", "env", "env/bin", "env/lib/python3.11/site-packages"),
        ("windows", "venv/python.exe", "venv", "venv/Scripts", "venv/Lib/site-packages"),
        (
            "linux",
            "runtime/env/bin/python",
            "runtime/env",
            "runtime/env/bin",
            "runtime/env/lib/python3.11/site-packages",
        ),
    ],
)
def test_layout_per_os(platform: str, entry: str, env: str, scripts: str, site: str) -> None:
    layout = box_layout(entry, platform, "3.11", "model-cache/m")
    assert layout.env_dir == PurePosixPath(env)
    assert layout.scripts_dir == PurePosixPath(scripts)
    assert layout.site_packages == PurePosixPath(site)
    assert layout.conda_meta == PurePosixPath(env) / "conda-meta"
    assert layout.model_cache == PurePosixPath("model-cache/m")
    assert layout.windows is (platform == "windows")


@pytest.mark.parametrize(
    ("entry", "windows"),
    [
        ("venv/python", False),
        ("python", False),
        ("bin/python", False),
        ("venv/bin/ruby", False),
        ("venv/bin/python", True),
        ("python.exe", True),
        ("venv/Scripts/pythonw.exe", True),
    ],
)
def test_entry_points_that_name_no_environment(entry: str, windows: bool) -> None:
    with pytest.raises(RecipeError) as caught:
        env_dir_for(entry, windows)
    problem = caught.value.problems[0]
    assert problem.key == "pythonEntryPoint" and problem.fix and entry in (problem.value or "")


def test_windows_interpreter_name_is_case_insensitive() -> None:
    assert env_dir_for("venv/Python.EXE", True) == PurePosixPath("venv")


def test_model_cache_inside_env_is_refused() -> None:
    with pytest.raises(RecipeError, match="inside the environment"):
        box_layout("venv/bin/python", "linux", "3.11", "venv/models")


def test_model_cache_with_env_name_prefix_is_fine() -> None:
    assert box_layout("venv/bin/python", "linux", "3.11", "venv-models/m").model_cache.parts[0] == "venv-models"
