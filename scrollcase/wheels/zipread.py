"""Reading a wheel's members fast: stored or deflated, inflated with ISA-L when it is installed.

Inflating is most of a wheel install (torch's 770 MB wheel holds 1.5 GB), and the standard library's
zlib inflates about half as fast as ISA-L's (``isal.isal_zlib``, a drop-in zlib with the same
streams); both release the GIL.  :class:`MemberReader` does what ``zipfile.ZipFile.open`` does for a
member — the local header's signature, flags and file name checked against the central directory,
no overlap with the next member, and at the end the CRC-32 and the size — with the faster inflater,
and without ZipExtFile's copies between buffers.  Other compression methods use ``zipfile`` itself.
"""

from __future__ import annotations

import importlib
import itertools
import struct
import zipfile
import zlib
from types import ModuleType
from typing import BinaryIO, Protocol

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zipfile's structFileHeader
_LOCAL_MAGIC = b"PK\x03\x04"
_UNSUPPORTED_FLAGS = 0x01 | 0x20 | 0x40  # encrypted, compressed patched data, strong encryption
_UTF8_NAME = 0x800


class _Inflater(Protocol):
    unconsumed_tail: bytes
    eof: bool

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...
    def flush(self) -> bytes: ...


def _fast_zlib() -> ModuleType:
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:  # a platform without an isal wheel: the standard library's zlib
        return zlib


FAST_ZLIB = _fast_zlib()


def member_ends(infos: list[zipfile.ZipInfo], archive_size: int) -> list[int]:
    """Where each member's bytes must end at the latest (in ``infos`` order): the next member's header
    or the end of the archive, so that no two members share bytes (a zip bomb's trick, which newer
    zipfile versions refuse too)."""
    order = sorted(range(len(infos)), key=lambda k: infos[k].header_offset)
    ends = [archive_size] * len(infos)
    for here, after in itertools.pairwise(order):
        ends[here] = infos[after].header_offset
    return ends


class MemberReader:
    """A stored or deflated member of an open wheel file, as a stream: ``read``, ``readline``,
    ``seek(0)``.  Raises ``zipfile.BadZipFile`` for a bad header, a bad CRC-32 or a wrong size."""

    def __init__(self, fp: BinaryIO, info: zipfile.ZipInfo, end: int, chunk: int) -> None:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ValueError(f"use zipfile for compression method {info.compress_type}")
        self._fp, self._info, self._chunk = fp, info, chunk
        self._start = _data_offset(fp, info)
        if self._start + info.compress_size > end:
            raise zipfile.BadZipFile(f"Overlapped entries: {info.orig_filename!r} (possible zip bomb)")
        self.seek(0)

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise OSError("a wheel member only rewinds to its start")
        self._fp.seek(self._start)
        self._left = self._info.compress_size
        deflated = self._info.compress_type == zipfile.ZIP_DEFLATED
        self._inflater: _Inflater | None = FAST_ZLIB.decompressobj(-15) if deflated else None
        self._buffer = b""
        self._crc = self._size = 0
        self._eof = False
        return 0

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            return b"".join(iter(lambda: self.read(self._chunk), b""))
        while not self._buffer and not self._eof:
            self._buffer = self._next()
        if n >= len(self._buffer):
            data, self._buffer = self._buffer, b""
            return data
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def readline(self, limit: int = -1) -> bytes:
        line = b""
        while not line.endswith(b"\n") and (limit < 0 or len(line) < limit):
            while not self._buffer and not self._eof:
                self._buffer = self._next()
            if not self._buffer:
                break
            want = self._buffer.find(b"\n") + 1 or len(self._buffer)
            if limit >= 0:
                want = min(want, limit - len(line))
            line += self._buffer[:want]
            self._buffer = self._buffer[want:]
        return line

    def _next(self) -> bytes:
        """The next piece of the member's bytes (maybe empty); at the end, the CRC and size checks."""
        tail = self._inflater.unconsumed_tail if self._inflater is not None else b""
        raw = tail or self._fp.read(min(self._chunk, self._left))
        if not tail:
            if not raw and self._left:
                raise zipfile.BadZipFile(f"{self._info.filename}: the archive ends inside this member")
            self._left -= len(raw)
        data = raw if self._inflater is None else self._inflater.decompress(raw, self._chunk)
        if self._left == 0 and (self._inflater is None or not self._inflater.unconsumed_tail):
            if self._inflater is not None:
                data += self._inflater.flush()
            self._eof = True
        self._crc = FAST_ZLIB.crc32(data, self._crc)
        self._size += len(data)
        if self._eof:
            self._check()
        return data

    def _check(self) -> None:
        if self._size != self._info.file_size:
            raise zipfile.BadZipFile(
                f"{self._info.filename}: {self._size} bytes, the archive says {self._info.file_size}"
            )
        if self._crc != self._info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {self._info.filename!r}")

    def close(self) -> None:
        self._buffer = b""


def _data_offset(fp: BinaryIO, info: zipfile.ZipInfo) -> int:
    """Where the member's bytes start, after the local header checks ``zipfile.ZipFile.open`` does."""
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        raise zipfile.BadZipFile("Truncated file header")
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != _LOCAL_MAGIC:
        raise zipfile.BadZipFile("Bad magic number for file header")
    if info.flag_bits & _UNSUPPORTED_FLAGS:
        raise zipfile.BadZipFile(f"{info.filename}: encrypted or patched members are not supported")
    name_length, extra_length = int(fields[10]), int(fields[11])
    raw_name = fp.read(name_length)
    name = raw_name.decode("utf-8" if fields[3] & _UTF8_NAME else "cp437")
    if name != info.orig_filename:
        raise zipfile.BadZipFile(f"File name in directory {info.orig_filename!r} and header {raw_name!r} differ.")
    return info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
