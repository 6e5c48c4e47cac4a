"""Reading a tar stream that arrives as decompressed chunks: exact byte counts and extended headers.

No disk: :class:`ChunkReader` serves exact byte counts across chunk boundaries without re-buffering
the member data (it hands out memoryview slices of the chunks as they came from the decompressor);
the header format itself (parse and write) is :mod:`scrollcase.format.archive.tar`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from scrollcase.format.archive.tar import BLOCK, MAX_META_SIZE, Header, TarFormatError, parse_meta


class ChunkReader:
    """Exact reads over a sequence of byte chunks; ``None`` from ``next_chunk`` means the end."""

    def __init__(self, next_chunk: Callable[[], bytes | None]) -> None:
        self._next = next_chunk
        self._view = memoryview(b"")
        self._pos = 0
        self.consumed = 0

    def _fill(self) -> bool:
        chunk = self._next()
        if chunk is None:
            return False
        self._view = memoryview(chunk)
        self._pos = 0
        return True

    def read(self, n: int) -> bytes:
        """Exactly ``n`` bytes (copied); TarFormatError when the stream ends first."""
        if len(self._view) - self._pos >= n:
            out = self._view[self._pos : self._pos + n].tobytes()
            self._pos += n
            self.consumed += n
            return out
        return b"".join(self.slices(n))

    def read_block_or_end(self) -> bytes | None:
        """The next 512-byte block, or None at a clean end of stream (no bytes left at all)."""
        if self._pos == len(self._view) and not self._fill():
            return None
        return self.read(BLOCK)

    def read_header_block(self) -> bytes | None:
        """The next member's header block, or None at the end-of-archive marker (a zero block);
        TarFormatError when the stream ends before the marker."""
        block = self.read_block_or_end()
        if block is None:
            raise TarFormatError("archive is truncated (no end-of-archive marker)")
        return block if any(block) else None

    def slices(self, n: int) -> Iterator[memoryview]:
        """``n`` bytes as consecutive zero-copy views (valid until the next call)."""
        while n:
            if self._pos == len(self._view) and not self._fill():
                raise TarFormatError("archive is truncated (the stream ends inside a member)")
            take = min(n, len(self._view) - self._pos)
            yield self._view[self._pos : self._pos + take]
            self._pos += take
            self.consumed += take
            n -= take

    def skip(self, n: int) -> None:
        for _ in self.slices(n):
            pass

    def drain(self, limit: int) -> int:
        """Consume everything left (at most ``limit`` bytes); returns how many bytes that was."""
        left = len(self._view) - self._pos
        while left <= limit and self._fill():
            left += len(self._view)
        self._pos = len(self._view)
        self.consumed += left
        if left > limit:
            raise TarFormatError(f"more than {limit} bytes after the end-of-archive marker")
        return left


def read_meta(header: Header, reader: ChunkReader, pending: dict[str, str]) -> None:
    """Read one extended header (pax, GNU long name/link) into ``pending`` for the member that follows."""
    if header.size > MAX_META_SIZE:
        raise TarFormatError("extended header larger than 1 MiB")
    data = reader.read(header.size)
    reader.skip(-header.size % BLOCK)
    pending.update(parse_meta(header.kind, data))
