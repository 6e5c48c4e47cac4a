"""Wheel members checked against the wheel's RECORD as they are read: the one pass of an install.

:class:`CheckedWheel` is installer's ``WheelFile`` whose members are :class:`CheckedMember` streams:
each hashes the bytes as they are read (with the algorithm RECORD names, and sha256 for the installed
RECORD, once when they are the same) and at the member's end compares hash and size with RECORD, so a
member is inflated, checked and written in one pass (:mod:`scrollcase.wheels.install`).  A member the
unpacked-wheel cache already holds is a :class:`LinkedMember`: linked, not copied.
"""

from __future__ import annotations

import base64
import io
import os
import stat
import threading
import zipfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from installer.records import RecordEntry, parse_record_file
from installer.sources import WheelContentElement, WheelFile

from scrollcase.io.digest import hash_file, new_hash
from scrollcase.wheels.zipread import MemberReader, member_ends

if TYPE_CHECKING:
    from scrollcase.io.digest import Hasher

CHUNK = 1 << 18  # 256 KiB reads: few GIL round trips, and small enough to stay out of mmap


class MemberMismatchError(Exception):
    """A member's bytes differ from what the wheel's RECORD says."""

    def __init__(self, member: str, detail: str) -> None:
        super().__init__(f"{member}: {detail}")
        self.member, self.detail = member, detail


class CancelledInstallError(Exception):
    """Another wheel failed: stop at the next read."""


class CheckedMember:
    """A member's stream that hashes what is read and checks RECORD's hash and size at its end.

    Supports what installer does with a stream: ``read``, ``readline`` and ``seek(0)`` (which starts
    the hash again, so the check always covers the whole member exactly once)."""

    def __init__(self, raw: BinaryIO, expected: RecordEntry, cancel: threading.Event) -> None:
        assert expected.hash_ is not None and expected.size is not None
        self._raw, self._expected, self._cancel = raw, expected, cancel
        self._hash_name, self._want, self._want_size = expected.hash_.name, expected.hash_.value, expected.size
        self._restart()

    def _restart(self) -> None:
        self._hasher = new_hash(self._hash_name)
        self._sha = self._hasher if self._hash_name == "sha256" else new_hash()  # installed RECORDs'
        self.size = 0
        self.sha256 = ""  # RECORD's form of the sha256 of the bytes, once they passed the check

    @property
    def identity(self) -> str:
        """What RECORD promises for these bytes: equal identities mean equal files."""
        return f"{self._hash_name}={self._want},{self._want_size}"

    @property
    def verified(self) -> bool:
        return bool(self.sha256)

    def read(self, n: int = -1) -> bytes:
        if self._cancel.is_set():
            raise CancelledInstallError
        data = self._raw.read(n)
        if data:
            self._update(data)
        elif n != 0:
            self._finish()
        return data

    def readline(self, limit: int = -1) -> bytes:
        data = self._raw.readline(limit)
        self._update(data)
        return data

    def _update(self, data: bytes) -> None:
        self._hasher.update(data)
        if self._sha is not self._hasher:
            self._sha.update(data)
        self.size += len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) != (0, io.SEEK_SET):
            raise io.UnsupportedOperation("a checked wheel member only rewinds to its start")
        self._raw.seek(0)
        self._restart()
        return 0

    def drain(self) -> None:
        """Read to the end, so the member is checked even when nobody wanted its bytes."""
        while not self.verified:
            self.read(CHUNK)

    def _finish(self) -> None:
        if self.verified:
            return
        got = record_digest(self._hasher)
        if self.size != self._want_size:
            raise MemberMismatchError(self._expected.path, f"{self.size} bytes, RECORD says {self._want_size}")
        if got != self._want:
            raise MemberMismatchError(self._expected.path, f"{self._hash_name} {got}, RECORD says {self._want}")
        self.sha256 = got if self._sha is self._hasher else record_digest(self._sha)


def record_digest(hasher: Hasher) -> str:
    return base64.urlsafe_b64encode(hasher.digest()).decode("ascii").rstrip("=")


class CheckedWheel(WheelFile):
    """installer's WheelFile whose members check themselves against RECORD while they are read."""

    def __init__(self, f: zipfile.ZipFile, cancel: threading.Event) -> None:
        super().__init__(f)
        self._zip, self._cancel = f, cancel

    def get_contents(self) -> Iterator[WheelContentElement]:
        """As WheelFile.get_contents (same members, order and executable bits), with checked streams."""
        records = {row[0]: row for row in parse_record_file(self.read_dist_info("RECORD").splitlines())}
        infos = self._zip.infolist()
        with Path(str(self._zip.filename)).open("rb", buffering=0) as fp:
            ends = member_ends(infos, os.fstat(fp.fileno()).st_size)
            for item, end in zip(infos, ends, strict=True):
                if item.filename.endswith("/"):
                    continue
                row = records.pop(item.filename, (item.filename, "", ""))
                with closing(self._open(fp, item, end)) as raw:
                    yield from self._checked(row, raw, is_executable(item))

    def _open(self, fp: BinaryIO, item: zipfile.ZipInfo, end: int) -> BinaryIO:
        if item.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return cast(BinaryIO, MemberReader(fp, item, end, CHUNK))
        return cast(BinaryIO, self._zip.open(item))  # bzip2, lzma: zipfile's own streams

    def _checked(self, row: tuple[str, str, str], raw: BinaryIO, executable: bool) -> Iterator[WheelContentElement]:
        entry = RecordEntry.from_elements(*row)
        if entry.hash_ is None or entry.size is None:  # RECORD itself, signatures: nothing to check
            yield row, raw, executable
            return
        member = CheckedMember(raw, entry, self._cancel)
        yield row, cast(BinaryIO, member), executable
        member.drain()  # installer skipped it (__pycache__): still checked


def is_executable(item: zipfile.ZipInfo) -> bool:
    mode = item.external_attr >> 16  # as installer (and pip) read it
    return bool(mode and stat.S_ISREG(mode) and mode & 0o111)


class LinkedMember:
    """A member already unpacked and checked (:mod:`scrollcase.wheels.cache`), as installer's stream:
    the destination links ``path`` instead of copying bytes; installer itself only reads it for the
    scripts whose ``#!python`` shebang it rewrites."""

    def __init__(self, path: str, hash_name: str, hash_value: str, size: int) -> None:
        self.path, self.size = path, size
        self.identity = f"{hash_name}={hash_value},{size}"  # as CheckedMember's
        self._sha256 = hash_value if hash_name == "sha256" else None
        self._file: BinaryIO | None = None

    @property
    def sha256(self) -> str:
        """RECORD's form of the file's sha256 (hashed here only for a wheel that lists another hash)."""
        if self._sha256 is None:
            self._sha256 = record_digest(hash_file(self.path))
        return self._sha256

    def _open(self) -> BinaryIO:
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: PTH123, SIM115 - closed by close()
        return self._file

    def read(self, n: int = -1) -> bytes:
        return self._open().read(n)

    def readline(self, limit: int = -1) -> bytes:
        return self._open().readline(limit)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._open().seek(offset, whence)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
