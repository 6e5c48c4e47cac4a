"""File I/O helpers: atomic writes (a unique temp file beside the target, then rename) and the user cache.

A reader never sees a half-written file: the bytes go to a temp file in the same folder (same
filesystem, so the rename is atomic), which is removed again if anything fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "SCROLLCASE_CACHE_DIR"


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temp file and a rename; the folder is created if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:80]}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        Path(tmp).replace(path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def user_cache_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """Where downloads are kept between runs: ``$SCROLLCASE_CACHE_DIR``, else the OS's user cache folder
    (``%LOCALAPPDATA%\\scrollcase\\Cache``, ``~/Library/Caches/scrollcase``, ``$XDG_CACHE_HOME/scrollcase``)."""
    env = os.environ if env is None else env
    platform = platform or sys.platform
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
    if platform.startswith("win"):
        base = env.get("LOCALAPPDATA")
        return (Path(base) if base else home / "AppData" / "Local") / "scrollcase" / "Cache"
    if platform == "darwin":
        return home / "Library" / "Caches" / "scrollcase"
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else home / ".cache") / "scrollcase"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (True when that cannot be told: keep its files)."""
    if pid == os.getpid():
        return True
    if sys.platform == "win32":
        return True  # no cheap, safe probe: never delete what might be in use
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists, owned by someone else
    return True
