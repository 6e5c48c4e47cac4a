"""TarBuffer: tar bytes through one reused buffer to zstd, or straight into a unit's own exact-size buffer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scrollcase.errors import BuildError
from scrollcase.format.archive import tarbuffer
from scrollcase.format.archive.tarbuffer import TarBuffer


class _Chunks:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: memoryview) -> int:
        self.chunks.append(bytes(data))
        return len(data)


def test_a_unit_fills_its_own_buffer_exactly_and_the_reused_buffer_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tarbuffer, "CHUNK", 64)
    sink, counted = _Chunks(), []
    stream = TarBuffer(sink, counted.append)  # type: ignore[arg-type]
    reused = stream.buf
    stream.put(b"a" * 10)  # streamed bytes before the unit stay in the reused buffer
    path = tmp_path / "member"
    path.write_bytes(os.urandom(700))  # far more than the reused buffer: read straight into the target
    target = bytearray(512 + 700 + 324)
    fd = os.open(path, os.O_RDONLY)
    try:
        with stream.filling(memoryview(target)):
            stream.put(b"h" * 512)
            stream.put_file(fd, 700, lambda: "member")
    finally:
        os.close(fd)
    assert bytes(target) == b"h" * 512 + path.read_bytes() + b"\0" * 324
    assert sink.chunks == [] and counted == [len(target)]
    assert stream.buf is reused and stream.pos == 10  # the streamed bytes are still there, not lost
    stream.drain()
    assert sink.chunks == [b"a" * 10]


def test_more_bytes_than_a_units_planned_size_is_an_error_not_a_silent_write() -> None:
    stream = TarBuffer(_Chunks())  # type: ignore[arg-type]
    with pytest.raises(BuildError) as raised, stream.filling(memoryview(bytearray(4))):
        stream.put(b"12345")
    assert "grew past its planned size" in str(raised.value)
    assert len(stream.buf) == tarbuffer.CHUNK
