"""One file's content placed at a second path without copying its bytes: a copy-on-write clone where the
file system has them, else a hard link, else (where a caller allows it) a copy.

Which methods are tried, and in what order, depends on the OS (:func:`link_chain`, pure): Linux tries a
reflink (the ``FICLONE`` ioctl: Btrfs, XFS, bcachefs, OCFS2), macOS an APFS clone (``clonefile``),
Windows an NTFS hard link only (ReFS block cloning is not tried).  :func:`place` walks the chain with the
operations it is given (:class:`LinkOps`, injected in tests to play each OS and each file system), the
first that works wins, and a method that fails leaves no file behind.

A clone is a new file sharing the blocks until one side writes: editing it never changes the other.  A hard
link is the same file under two names: editing it in place changes both (docs/install.md#shared-files).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Method = Literal["reflink", "clone", "hardlink", "copy"]
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


def link_chain(platform: str = sys.platform) -> tuple[Method, ...]:
    """The methods tried on ``platform`` (``sys.platform``'s values), best first."""
    if platform.startswith("linux"):
        return ("reflink", "hardlink", "copy")
    if platform == "darwin":
        return ("clone", "hardlink", "copy")
    return ("hardlink", "copy")  # win32 (NTFS has hard links, no clones) and every other OS


def _reflink(source: Path, target: Path) -> None:
    import fcntl  # POSIX only: Windows has no fcntl, and never tries a reflink

    with source.open("rb") as src:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.ioctl(fd, FICLONE, src.fileno())
        finally:
            os.close(fd)


def _clonefile(source: Path, target: Path) -> None:
    clonefile = getattr(ctypes.CDLL(None, use_errno=True), "clonefile", None)
    if clonefile is None:
        raise OSError(errno.ENOTSUP, "clonefile() is not available on this OS", str(target))
    if clonefile(os.fsencode(source), os.fsencode(target), 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def _hardlink(source: Path, target: Path) -> None:
    os.link(source, target)


def _copy(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)


@dataclass(frozen=True)
class LinkOps:
    """The operations behind each method: each makes ``target`` (absent before) or raises OSError."""

    reflink: Callable[[Path, Path], None] = _reflink
    clone: Callable[[Path, Path], None] = _clonefile
    hardlink: Callable[[Path, Path], None] = _hardlink
    copy: Callable[[Path, Path], None] = _copy

    def of(self, method: Method) -> Callable[[Path, Path], None]:
        ops: dict[Method, Callable[[Path, Path], None]] = {
            "reflink": self.reflink,
            "clone": self.clone,
            "hardlink": self.hardlink,
            "copy": self.copy,
        }
        return ops[method]


SYSTEM_OPS = LinkOps()


def place(source: Path, target: Path, chain: Sequence[Method], ops: LinkOps = SYSTEM_OPS) -> Method:
    """Make ``target`` (which must not exist) hold ``source``'s content by the first method of ``chain``
    that works; which one.  OSError (the last method's) when none did: then ``target`` does not exist."""
    failed: OSError = OSError(errno.ENOTSUP, "no method to try", str(target))
    for method in chain:
        try:
            ops.of(method)(source, target)
        except OSError as exc:
            failed = exc
            with suppress(OSError):
                target.unlink()  # a clone that failed after creating its file
            continue
        return method
    raise failed
