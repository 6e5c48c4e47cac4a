"""Reading a tar stream that arrives as decompressed chunks: headers and member data.

Pure parsing (no disk): :func:`parse_header` turns one 512-byte block into a :class:`Header`;
:class:`ChunkReader` serves exact byte counts across chunk boundaries without re-buffering the
member data (it hands out memoryview slices of the chunks as they came from the decompressor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

BLOCK = 512
_TYPES = {
    b"0": "file",
    b"\x00": "file",
    b"7": "file",
    b"5": "dir",
    b"2": "symlink",
    b"1": "hardlink",
    b"3": "device",
    b"4": "device",
    b"6": "fifo",
    b"x": "pax",
    b"g": "paxglobal",
    b"L": "gnulongname",
    b"K": "gnulonglink",
}


class TarFormatError(ValueError):
    """The stream is not a well-formed tar (bad checksum, bad number, cut short)."""


@dataclass(frozen=True)
class Header:
    name: str
    kind: str  # file | dir | symlink | hardlink | device | fifo | pax | paxglobal | gnulong* | other:X
    mode: int
    size: int
    link: str


def parse_number(field: bytes) -> int:
    """A numeric header field: NUL/space-terminated octal, or GNU base-256 (high bit set)."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        if field[0] & 0x40:  # negative base-256: never valid for sizes or modes
            raise TarFormatError("negative number in a header field")
        return value | ((field[0] & 0x3F) << (8 * (len(field) - 1)))
    text = field.split(b"\x00", 1)[0].strip(b" ")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise TarFormatError(f"bad number {text!r} in a header field") from None


def _text(field: bytes) -> str:
    return field.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")


def is_zero_block(block: bytes | memoryview) -> bool:
    return not any(block)


def parse_header(block: bytes) -> Header:
    """One 512-byte ustar/GNU/v7 header; checksum verified."""
    stored = parse_number(block[148:156])
    actual = sum(block) - sum(block[148:156]) + 256  # the checksum field counts as 8 spaces
    if stored != actual:
        raise TarFormatError("header checksum mismatch (corrupt or not a tar stream)")
    name = _text(block[:100])
    if block[257:262] == b"ustar":
        prefix = _text(block[345:500])
        if prefix:
            name = prefix + "/" + name
    typeflag = block[156:157]
    kind = _TYPES.get(typeflag, f"other:{typeflag.decode('latin-1')!r}")
    return Header(
        name, kind, parse_number(block[100:108]) & 0o7777, parse_number(block[124:136]), _text(block[157:257])
    )


def parse_pax(data: bytes) -> dict[str, str]:
    """pax extended header records ``"%d key=value\\n"``."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            raise TarFormatError("malformed pax record")
        try:
            length = int(data[pos:space])
        except ValueError:
            raise TarFormatError("malformed pax record length") from None
        record = data[space + 1 : pos + length]
        if length <= 0 or not record.endswith(b"\n") or b"=" not in record:
            raise TarFormatError("malformed pax record")
        key, _, value = record[:-1].partition(b"=")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


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


META_KINDS = ("pax", "paxglobal", "gnulongname", "gnulonglink")


def read_meta(header: Header, reader: ChunkReader, pending: dict[str, str]) -> None:
    """Read one extended header (pax, GNU long name/link) into ``pending`` for the member that follows."""
    if header.size > 1 << 20:
        raise TarFormatError("extended header larger than 1 MiB")
    data = reader.read(header.size)
    reader.skip(-header.size % BLOCK)
    if header.kind == "pax":
        pending.update(parse_pax(data))
    elif header.kind == "gnulongname":
        pending["path"] = data.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
    elif header.kind == "gnulonglink":
        pending["linkpath"] = data.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
