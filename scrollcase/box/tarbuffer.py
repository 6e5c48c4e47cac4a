"""The buffered writer under the packer: tar bytes gathered in one reused buffer, handed to zstd whole.

Files are read straight into the buffer (``os.readv``; one extra copy where there is no ``readv``) and
zstd gets multi-MiB buffers, whose worker threads compress while Python reads the next files.  Memory
stays constant whatever the tree size.  :class:`HashingWriter` is the file zstd writes into: it hashes
and counts the compressed bytes on their way to disk, so the archive is never read back for its digest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import BinaryIO

import zstandard

from scrollcase.box.tarformat import padding
from scrollcase.errors import BuildError

CHUNK = 8 << 20  # bytes handed to zstd per call; large so its workers get whole jobs


class HashingWriter:
    """The file zstd writes into: hashes and counts every compressed byte on its way to disk."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


class TarBuffer:
    """Fills one reused buffer with tar bytes and hands it to zstd when full."""

    def __init__(self, sink: zstandard.ZstdCompressionWriter, on_bytes: Callable[[int], None] | None = None) -> None:
        self.sink = sink
        self.on_bytes = on_bytes
        self.buf = bytearray(CHUNK)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.total = 0

    def put(self, data: bytes) -> None:
        end = self.pos + len(data)
        if end < CHUNK:  # the common case: a header or padding that fits
            self.buf[self.pos : end] = data
            self.pos = end
            return
        while data:
            n = min(len(data), CHUNK - self.pos)
            self.buf[self.pos : self.pos + n] = data[:n]
            self.pos += n
            data = data[n:]
            if self.pos == CHUNK:
                self.drain()

    def put_file(self, fd: int, size: int, path: Callable[[], str]) -> None:
        """Exactly ``size`` bytes of the open file ``fd``, then the padding to a whole block."""
        left = size
        while left:
            if self.pos == CHUNK:
                self.drain()
            want = min(left, CHUNK - self.pos)
            got = _read_into(fd, self.view[self.pos : self.pos + want])
            if got == 0:
                raise BuildError(
                    f"{path()} shrank while it was being packed", fix="do not modify the box tree while packing it"
                )
            self.pos += got
            left -= got
        self.put(padding(size))

    def drain(self) -> None:
        if self.pos:
            self.sink.write(self.view[: self.pos])
            self.total += self.pos
            if self.on_bytes is not None:
                self.on_bytes(self.pos)
            self.pos = 0


def _read_into(fd: int, view: memoryview) -> int:
    return os.readv(fd, [view])


def _read_into_copy(fd: int, view: memoryview) -> int:
    """Windows has no readv: read, then copy into the buffer (one extra copy)."""
    data = os.read(fd, len(view))
    view[: len(data)] = data
    return len(data)


if not hasattr(os, "readv"):
    _read_into = _read_into_copy  # the portable fallback
