"""Up-front checks of paths given on the command line, before a command spends minutes and then fails.

Pure apart from ``lstat``: a folder option must name a folder or nothing yet, a file option a file or
nothing yet, and no component on the way may be a regular file.  Each failure is a UsageError
naming the option and the path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from scrollcase.errors import UsageError, describe_path

NAME_MAX = 255


def _first_file_above(path: Path) -> Path | None:
    """The first existing ancestor of ``path`` that is not a folder (a file in the way), if any."""
    for parent in reversed(path.parents):
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            return None
        except OSError:
            return parent
        if not stat.S_ISDIR(mode):
            return parent
    return None


def _common(path: Path, option: str) -> None:
    shown = describe_path(path) or str(path)
    if str(path) == "":
        raise UsageError(f"{option} is empty", fix=f"pass a path to {option}, or omit it for the default")
    too_long = [part for part in path.parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        raise UsageError(
            f"{option} {shown}: the name {too_long[0][:40]}... is longer than {NAME_MAX} bytes",
            fix=f"pass a shorter path to {option}",
        )
    blocker = _first_file_above(path)
    if blocker is not None:
        raise UsageError(
            f"{option} {shown}: {describe_path(blocker)} is a file, not a folder",
            fix=f"pass a path below a folder to {option}",
        )


def require_folder_path(path: Path, option: str) -> None:
    """``path`` is a folder, or can be created as one."""
    _common(path, option)
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"{option} {describe_path(path)} is a file, not a folder",
            fix=f"pass a folder to {option} (it is created if missing)",
        )


def require_file_path(path: Path, option: str) -> None:
    """``path`` is a regular file, or can be created as one."""
    _common(path, option)
    if path.is_dir():
        raise UsageError(
            f"{option} {describe_path(path)} is a folder, not a file",
            fix=f"pass a file path to {option}, e.g. {describe_path(path / 'report.xml')}",
        )
