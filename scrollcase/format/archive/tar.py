"""The tar format, both ways: header blocks written for packing and parsed for unpacking (pure, no I/O).

Writing: plain ustar headers with the fields that never vary in a box (mtime 0, uid/gid 0, empty
uname/gname) built once; pax records only for names or link targets that are long or not ASCII, and
for sizes beyond ustar's 11 octal digits.  Reading: ustar, GNU and v7 headers (checksum verified), pax
records and GNU long names, so archives from other tools parse too.  Keeping both in one module lets
the tests check the writer against this parser as well as against Python's ``tarfile``.
:class:`ChunkReader` reads a tar stream as it arrives in decompressed chunks (still no disk).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

BLOCK = 512
FIXED_MTIME = 0
USTAR_MAX_SIZE = 0o77777777777  # 11 octal digits
ZEROS = bytes(BLOCK)
END_OF_ARCHIVE = bytes(2 * BLOCK)


def padding(size: int) -> bytes:
    """The NUL bytes that fill a member's data of ``size`` bytes up to a whole block."""
    return ZEROS[: -size % BLOCK]


# ---------------------------------------------------------------- writing


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\x00" % (width - 1, value)


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body)
    while len(str(length).encode()) + len(body) != length:
        length = len(str(length).encode()) + len(body)
    return str(length).encode() + body


def _split_ustar(name: str) -> tuple[bytes, bytes] | None:
    """(name, prefix) fields for ``name`` if it fits ustar as ASCII, else None (pax needed)."""
    if not name.isascii():
        return None
    raw = name.encode("ascii")
    if len(raw) <= 100:
        return raw, b""
    cut = raw.rfind(b"/", 0, 156)
    while cut > 0:
        if len(raw) - cut - 1 <= 100:
            return raw[cut + 1 :], raw[:cut]
        cut = raw.rfind(b"/", 0, cut)
    return None


# Fields that never vary (uid, gid, mtime; magic, uname, gname, devices) are built once, and so is
# their share of the header checksum (plus 256: the checksum field itself counts as 8 spaces).
_OWNER = _octal(0, 8) + _octal(0, 8)
_MTIME = _octal(FIXED_MTIME, 12)
_MAGIC_TO_DEVICES = b"ustar\x0000" + b"\x00" * 64 + _octal(0, 8) + _octal(0, 8)
_TRAILER = b"\x00" * 12
_FIXED_SUM = sum(_OWNER) + sum(_MTIME) + sum(_MAGIC_TO_DEVICES) + 256


def _ustar(name: bytes, prefix: bytes, *, mode: int, size: int, typeflag: bytes, link: bytes = b"") -> bytes:
    mode_field, size_field = _octal(mode, 8), _octal(size, 12)
    checksum = (
        _FIXED_SUM + sum(name) + sum(prefix) + sum(link) + sum(mode_field) + sum(size_field) + typeflag[0]
    )  # NUL padding adds nothing
    return b"".join(
        (
            name.ljust(100, b"\x00"),
            mode_field,
            _OWNER,
            size_field,
            _MTIME,
            b"%06o\x00 " % checksum,
            typeflag,
            link.ljust(100, b"\x00"),
            _MAGIC_TO_DEVICES,
            prefix.ljust(155, b"\x00"),
            _TRAILER,
        )
    )


def build_header(name: str, *, kind: str, mode: int = 0o644, size: int = 0, link: str = "") -> bytes:
    """The header block(s) for one member: a plain ustar header, or a pax header plus ustar."""
    if kind == "file" and len(name) <= 100 and size <= USTAR_MAX_SIZE and name.isascii():
        return _ustar(name.encode("ascii"), b"", mode=mode, size=size, typeflag=b"0")  # most members
    typeflag = {"file": b"0", "dir": b"5", "symlink": b"2"}[kind]
    tar_name = name + "/" if kind == "dir" else name
    records: list[bytes] = []
    fields = _split_ustar(tar_name)
    if fields is None:
        records.append(_pax_record("path", tar_name))
        fields = (tar_name.encode("ascii", "replace")[:100], b"")
    link_raw = link.encode("utf-8")
    if not link.isascii() or len(link_raw) > 100:
        records.append(_pax_record("linkpath", link))
        link_raw = link.encode("ascii", "replace")[:100]
    if size > USTAR_MAX_SIZE:
        records.append(_pax_record("size", str(size)))
    field_size = 0 if size > USTAR_MAX_SIZE else size  # the pax "size" record rules then
    main = _ustar(*fields, mode=mode, size=field_size, typeflag=typeflag, link=link_raw)
    if not records:
        return main
    pax = b"".join(records)
    pax_header = _ustar(b"././@PaxHeader", b"", mode=0o644, size=len(pax), typeflag=b"x")
    return pax_header + pax + padding(len(pax)) + main


def header_size(name: str, *, kind: str, size: int = 0, link: str = "") -> int:
    """``len(build_header(...))`` without building it when it is one block (most members: measuring a
    unit's tar bytes before it is packed, or reused from the pack cache, is a hot loop too)."""
    tar_name = name + "/" if kind == "dir" else name
    if len(tar_name) <= 100 and len(link) <= 100 and size <= USTAR_MAX_SIZE and tar_name.isascii() and link.isascii():
        return BLOCK
    return len(build_header(name, kind=kind, size=size, link=link))


# ---------------------------------------------------------------- reading

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
META_KINDS = ("pax", "paxglobal", "gnulongname", "gnulonglink")
MAX_META_SIZE = 1 << 20


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


def parse_meta(kind: str, data: bytes) -> dict[str, str]:
    """The records of one extended header (``kind`` in META_KINDS) for the member that follows it."""
    if kind == "pax":
        return parse_pax(data)
    if kind == "gnulongname":
        return {"path": _text(data)}
    if kind == "gnulonglink":
        return {"linkpath": _text(data)}
    return {}  # paxglobal: nothing in it applies to a box member


# --- reading a tar stream that arrives as decompressed chunks -------------------------------------------
# No disk: ChunkReader serves exact byte counts across chunk boundaries without re-buffering the member
# data (it hands out memoryview slices of the chunks as they came from the decompressor).
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
