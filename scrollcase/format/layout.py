"""Where things live inside a box, for every OS a box can target.  Pure: no disk access.

A box root holds the environment folder (the conda prefix), the model cache and ``box.json``.
The environment folder is derived from ``pythonEntryPoint``: on POSIX the interpreter is
``<env>/bin/python``, on Windows conda puts ``python.exe`` at the prefix root and scripts in
``Scripts/``, with the standard library under ``Lib/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from scrollcase.errors import Problem, RecipeError

BOX_JSON = "box.json"


@dataclass(frozen=True)
class BoxLayout:
    """Paths (POSIX, relative to the box root) of one box."""

    entry_point: PurePosixPath
    env_dir: PurePosixPath
    windows: bool
    python_version: str  # "3.11"
    model_cache: PurePosixPath

    @property
    def scripts_dir(self) -> PurePosixPath:
        return self.env_dir / ("Scripts" if self.windows else "bin")

    @property
    def stdlib_dir(self) -> PurePosixPath:
        return self.env_dir / ("Lib" if self.windows else f"lib/python{self.python_version}")

    @property
    def site_packages(self) -> PurePosixPath:
        return self.stdlib_dir / "site-packages"

    @property
    def conda_meta(self) -> PurePosixPath:
        return self.env_dir / "conda-meta"

    @property
    def box_json(self) -> PurePosixPath:
        return PurePosixPath(BOX_JSON)


def env_dir_for(entry_point: str, windows: bool) -> PurePosixPath:
    """The environment folder implied by the interpreter path, or RecipeError explaining the shape."""
    path = PurePosixPath(entry_point)
    if windows:
        if path.name.lower() != "python.exe" or len(path.parts) < 2:
            raise _entry_point_error(
                entry_point, "venv/python.exe", "on Windows the interpreter is python.exe at the environment root"
            )
        return path.parent
    if path.parent.name != "bin" or len(path.parts) < 3 or not path.name.startswith("python"):
        raise _entry_point_error(
            entry_point, "venv/bin/python", "on Linux and macOS the interpreter is <env>/bin/python"
        )
    return path.parent.parent


def _entry_point_error(value: str, example: str, why: str) -> RecipeError:
    return RecipeError(
        "pythonEntryPoint does not name an environment's interpreter",
        problems=[
            Problem(
                message=why, file="recipe.json", key="pythonEntryPoint", value=repr(value), fix=f'use e.g. "{example}"'
            )
        ],
    )


def box_layout(entry_point: str, platform: str, python_version: str, model_cache_subdir: str) -> BoxLayout:
    """The layout of a box for a target platform ("linux", "osx", "windows").

    ``model_cache_subdir`` is relative to the box root (the guide's ``"model-cache/my-model"``), so
    bundled weights land exactly at ``<box>/<modelCacheSubdir>/<asset path>``.
    """
    windows = platform == "windows"
    env_dir = env_dir_for(entry_point, windows)
    cache = PurePosixPath(model_cache_subdir)
    if cache.parts[: len(env_dir.parts)] == env_dir.parts:
        raise RecipeError(
            "modelCacheSubdir is inside the environment folder",
            problems=[
                Problem(
                    message="weights must live beside the environment, not inside it",
                    file="recipe.json",
                    key="modelCacheSubdir",
                    value=repr(model_cache_subdir),
                    fix='use e.g. "model-cache/<boxId>"',
                )
            ],
        )
    return BoxLayout(PurePosixPath(entry_point), env_dir, windows, python_version, cache)
