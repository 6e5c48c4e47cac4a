"""File paths as GitHub attaches annotations: relative to the repository root (GITHUB_WORKSPACE)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scrollcase.errors import Problem


def workspace_root() -> Path:
    """The repository root on a runner (GITHUB_WORKSPACE), else the current folder."""
    return Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()


def annotation_path(file: str | None, root: Path | None = None) -> str | None:
    """``file`` as GitHub attaches annotations: relative to the repository root, not the working directory.

    scrollcase names files relative to the folder it ran in (an action's ``working-directory``), so a
    relative path is read from there; one that only exists under the root is already root-relative.
    Paths outside the repository stay as they are.
    """
    if not file:
        return file
    base = (root or workspace_root()).resolve()
    path = Path(file)
    if not path.is_absolute():
        here = Path.cwd() / path
        if not here.exists() and (base / path).exists():
            return path.as_posix()
        path = here
    try:
        return path.resolve().relative_to(base).as_posix()
    except (ValueError, OSError):
        return file


def located(problems: Sequence[Problem], root: Path | None = None) -> list[Problem]:
    """``problems`` with repository-relative files (see :func:`annotation_path`)."""
    return [p if not p.file else replace(p, file=annotation_path(p.file, root)) for p in problems]


def repo_relative(path: Path | str, root: Path | None = None) -> str:
    """``path`` as a POSIX path relative to the repository root (GITHUB_WORKSPACE or the cwd).

    Annotations only attach to files named relative to the repository; anything outside stays as is.
    """
    base = (root or Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd())).resolve()
    candidate = Path(path)
    try:
        return candidate.resolve().relative_to(base).as_posix()
    except ValueError:
        return candidate.as_posix()
