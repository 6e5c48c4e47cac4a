"""Chunked reads of a tar stream (pure), checked against stdlib tarfile's own output."""

from __future__ import annotations

import io
import tarfile

import pytest

from scrollcase.format.archive.tar import ChunkReader, TarFormatError, is_zero_block, parse_header


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


def test_a_header_block_until_the_end_of_archive_marker() -> None:
    header = b"h" * 512
    chunks = iter([header, bytes(512)])
    reader = ChunkReader(lambda: next(chunks, None))
    assert reader.read_header_block() == header
    assert reader.read_header_block() is None, "the zero block ends the archive"
    with pytest.raises(TarFormatError, match="no end-of-archive marker"):
        reader.read_header_block()


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
