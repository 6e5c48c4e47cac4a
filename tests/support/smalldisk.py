"""A real small file system for full-disk tests: a tmpfs of a given size mounted on a test's folder, resized
(``mount -o remount``) and unmounted by the test.  Mounting needs root and CAP_SYS_ADMIN (a container or VM
run as root); elsewhere the test is skipped, saying so."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False, timeout=60)


@contextlib.contextmanager
def small_disk(where: Path, size: int) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes at ``where`` (created) for the block; pytest.skip where none can be mounted."""
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk needs a tmpfs mounted as root; this run is not root (or has no mount)")
    where.mkdir(parents=True, exist_ok=True)
    done = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): no real full disk")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False, timeout=60)


def resize(where: Path, size: int) -> None:
    """Grow or shrink the tmpfs at ``where`` to ``size`` bytes (not below what it holds)."""
    done = _mount("-o", f"remount,size={size}", str(where))
    assert done.returncode == 0, done.stderr


def used(where: Path) -> int:
    """Bytes the file system at ``where`` holds (blocks in use)."""
    st = os.statvfs(where)
    return (st.f_blocks - st.f_bfree) * st.f_frsize
