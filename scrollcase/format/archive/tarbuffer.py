"""The buffered writer under the packer: tar bytes gathered in one reused buffer, handed to zstd whole.

Files are read straight into the buffer (``os.readv``; one extra copy where there is no ``readv``) and
zstd gets multi-MiB buffers, whose worker threads compress while Python reads the next files.  Memory
stays constant whatever the tree size.  The file zstd writes into
(:class:`~scrollcase.io.digest.HashingWriter`) hashes and counts the compressed bytes on their way to
disk, so the archive is never read back for its digest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import zstandard

from scrollcase.errors import BuildError
from scrollcase.format.archive.tar import padding

CHUNK = 8 << 20  # bytes handed to zstd per call; large so its workers get whole jobs


class _Overflow:
    """The sink while a unit fills its own buffer: more bytes than planned means the tree changed."""

    def write(self, data: memoryview) -> int:
        raise BuildError(
            "the box tree changed while it was being packed (a unit grew past its planned size)",
            fix="do not modify the box tree while packing it",
        )


class TarBuffer:
    """Fills one reused buffer with tar bytes and hands it to zstd when full."""

    def __init__(self, sink: zstandard.ZstdCompressionWriter, on_bytes: Callable[[int], None] | None = None) -> None:
        self.sink = sink
        self.on_bytes = on_bytes
        self.buf: bytearray | memoryview = bytearray(CHUNK)
        self.view = memoryview(self.buf)
        self.limit = CHUNK
        self.pos = 0
        self.total = 0

    @contextmanager
    def filling(self, target: memoryview) -> Iterator[None]:
        """The tar bytes of one unit straight into ``target``, its exact size (a unit compressed whole): no
        copy out of the reused buffer, which is kept for the next streamed unit."""
        saved = self.buf, self.view, self.limit, self.pos, self.sink
        self.buf, self.view, self.limit, self.pos = target, target, len(target), 0
        self.sink = cast("zstandard.ZstdCompressionWriter", _Overflow())
        try:
            yield
            filled = self.pos
        finally:
            self.buf, self.view, self.limit, self.pos, self.sink = saved
        self.total += filled
        if self.on_bytes is not None and filled:
            self.on_bytes(filled)

    def put(self, data: bytes) -> None:
        end = self.pos + len(data)
        if end < self.limit:  # the common case: a header or padding that fits
            self.buf[self.pos : end] = data
            self.pos = end
            return
        while data:
            if self.pos == self.limit:  # drained only for more bytes: a unit's own buffer may end full
                self.drain()
            n = min(len(data), self.limit - self.pos)
            self.buf[self.pos : self.pos + n] = data[:n]
            self.pos += n
            data = data[n:]

    def put_file(self, fd: int, size: int, path: Callable[[], str]) -> None:
        """Exactly ``size`` bytes of the open file ``fd``, then the padding to a whole block."""
        left = size
        while left:
            if self.pos == self.limit:
                self.drain()
            want = min(left, self.limit - self.pos)
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
