"""The zstd frame walker against frames made by python-zstandard and by the zstd CLI."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import zstandard

from scrollcase.format.archive.zstdframes import FrameError, FrameWalker


def _walk(data: bytes, piece: int) -> FrameWalker:
    walker = FrameWalker()
    for i in range(0, len(data), piece):
        walker.feed(data[i : i + piece])
    walker.finish()
    return walker


def _frames() -> list[bytes]:
    payload = os.urandom(30_000) + bytes(2_000_000) + b"text " * 100_000
    return [
        zstandard.ZstdCompressor(level=3, write_checksum=True).compress(payload),
        zstandard.ZstdCompressor(level=1, write_checksum=False, write_content_size=False).compress(payload),
        zstandard.ZstdCompressor(level=3, threads=2, write_checksum=True).compress(payload),
        zstandard.ZstdCompressor(level=19).compress(b""),
        zstandard.ZstdCompressor(level=3).compress(b"tiny"),
    ]


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_complete_frames_in_any_chunking(piece: int) -> None:
    for frame in _frames():
        assert _walk(frame, piece).frames == 1


def test_multiple_frames_and_skippable_frames() -> None:
    a, b = _frames()[0], _frames()[4]
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"hello"
    assert _walk(a + skippable + b, 1000).frames == 2


@pytest.mark.parametrize("cut", [1, 4, 5, 100, -1, -4, -5])
def test_truncated(cut: int) -> None:
    frame = _frames()[0]
    with pytest.raises(FrameError, match=r"truncated|no frame"):
        _walk(frame[:cut], 64)


def test_garbage_after_frame() -> None:
    with pytest.raises(FrameError, match="after the end"):
        _walk(_frames()[0] + b"junkjunk", 64)


def test_not_zstd() -> None:
    with pytest.raises(FrameError, match="not a zstd stream"):
        _walk(b"PK\x03\x04 a zip file", 64)


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd CLI")
def test_zstd_cli_multithreaded_output() -> None:
    payload = os.urandom(1 << 20) * 4 + bytes(8 << 20)
    out = subprocess.run(["zstd", "-T0", "-3", "-c"], input=payload, capture_output=True, check=True).stdout
    assert _walk(out, 1 << 16).frames >= 1
