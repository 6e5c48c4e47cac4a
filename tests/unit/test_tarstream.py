"""Tar header parsing and chunked reads (pure), checked against stdlib tarfile's own output."""

from __future__ import annotations

import io
import tarfile

import pytest

from scrollcase.box.tarstream import (
    ChunkReader,
    TarFormatError,
    is_zero_block,
    parse_header,
    parse_number,
    parse_pax,
)


def _stdlib_header(name: str, **fields: object) -> bytes:
    info = tarfile.TarInfo(name)
    for key, value in fields.items():
        setattr(info, key, value)
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def test_parse_header_reads_stdlib_ustar() -> None:
    block = _stdlib_header("a/" * 60 + "file.txt", size=1234, mode=0o755)
    header = parse_header(block)
    assert header.name == "a/" * 60 + "file.txt"
    assert (header.kind, header.size, header.mode) == ("file", 1234, 0o755)


@pytest.mark.parametrize(
    ("typeflag", "kind"),
    [
        (tarfile.DIRTYPE, "dir"),
        (tarfile.SYMTYPE, "symlink"),
        (tarfile.LNKTYPE, "hardlink"),
        (tarfile.CHRTYPE, "device"),
        (tarfile.BLKTYPE, "device"),
        (tarfile.FIFOTYPE, "fifo"),
    ],
)
def test_parse_header_kinds(typeflag: bytes, kind: str) -> None:
    assert parse_header(_stdlib_header("x", type=typeflag, linkname="t")).kind == kind


def test_parse_header_checksum_mismatch() -> None:
    block = bytearray(_stdlib_header("x", size=1))
    block[0] ^= 0x01
    with pytest.raises(TarFormatError, match="checksum"):
        parse_header(bytes(block))


def test_parse_number_octal_and_base256() -> None:
    assert parse_number(b"0000644\x00") == 0o644
    assert parse_number(b"   12 \x00") == 0o12
    assert parse_number(b"\x80" + (10 << 30).to_bytes(11, "big")) == 10 << 30
    with pytest.raises(TarFormatError):
        parse_number(b"9999\x00")


def test_parse_pax_records_from_stdlib() -> None:
    info = tarfile.TarInfo("ü" * 200)
    info.linkname = "l" * 150
    info.type = tarfile.SYMTYPE
    buf = info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8")
    pax_header = parse_header(buf[:512])
    records = parse_pax(buf[512 : 512 + pax_header.size])
    assert records["path"] == "ü" * 200
    assert records["linkpath"] == "l" * 150


def test_parse_pax_rejects_garbage() -> None:
    with pytest.raises(TarFormatError):
        parse_pax(b"12 nonsense")


def test_chunk_reader_reads_across_chunk_boundaries() -> None:
    chunks = iter([b"abc", b"", b"defgh", b"ij"])
    reader = ChunkReader(lambda: next(chunks, None))
    assert reader.read(4) == b"abcd"
    assert b"".join(bytes(v) for v in reader.slices(5)) == b"efghi"
    assert reader.drain(limit=10) == 1
    assert reader.consumed == 10


def test_chunk_reader_truncation() -> None:
    chunks = iter([b"abc"])
    reader = ChunkReader(lambda: next(chunks, None))
    with pytest.raises(TarFormatError, match="truncated"):
        reader.read(4)


def test_end_of_stream_and_zero_block() -> None:
    chunks = iter([bytes(512)])
    reader = ChunkReader(lambda: next(chunks, None))
    block = reader.read_block_or_end()
    assert block is not None and is_zero_block(block)
    assert reader.read_block_or_end() is None


def test_stdlib_archive_roundtrip_through_chunk_reader() -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        data = b"x" * 700
        info = tarfile.TarInfo("f")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    payload = raw.getvalue()
    pieces = iter([payload[i : i + 100] for i in range(0, len(payload), 100)])
    reader = ChunkReader(lambda: next(pieces, None))
    header = parse_header(reader.read(512))
    assert header.size == 700
    assert b"".join(bytes(v) for v in reader.slices(700)) == b"x" * 700


def test_chunk_reader_drain_limit() -> None:
    chunks = iter([b"x" * 100, b"y" * 100])
    reader = ChunkReader(lambda: next(chunks, None))
    with pytest.raises(TarFormatError, match="after the end-of-archive"):
        reader.drain(limit=150)
