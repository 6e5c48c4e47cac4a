"""Content digests: whole files, and whole files plus their pieces in one read."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from scrollcase.io import digest
from scrollcase.io.digest import sha256_file, sha256_file_and_parts


def pieces(data: bytes, size: int) -> tuple[str, ...]:
    return tuple(hashlib.sha256(data[i : i + size]).hexdigest() for i in range(0, len(data), size))


@pytest.mark.parametrize(
    ("length", "part"), [(0, 7), (1, 7), (7, 7), (8, 7), (50_000, 4096), (50_000, 1 << 20), (3 * 4096, 4096)]
)
def test_parts_and_whole_match_independent_hashing(tmp_path: Path, length: int, part: int) -> None:
    data = os.urandom(length)
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    got = sha256_file_and_parts(path, part)
    assert (got.sha256, got.size) == (hashlib.sha256(data).hexdigest(), length) == sha256_file(path)
    assert got.parts == pieces(data, part)


def test_pieces_larger_than_the_read_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digest, "CHUNK", 1000)  # several reads per piece, and reads across pieces
    data = os.urandom(10_500)
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    assert sha256_file_and_parts(path, 2500).parts == pieces(data, 2500)


def test_part_size_must_be_positive(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(ValueError, match="part_size"):
        sha256_file_and_parts(tmp_path / "a", 0)


def test_a_slow_piece_hasher_never_sees_a_refilled_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader reuses a few buffers; if it refilled one before the piece thread had hashed it, the
    # pieces would be hashed from the wrong bytes.
    monkeypatch.setattr(digest, "CHUNK", 1000)
    update = digest._PieceHasher.update

    def slow_update(self: digest._PieceHasher, chunk: memoryview) -> None:
        time.sleep(0.002)
        update(self, chunk)

    monkeypatch.setattr(digest._PieceHasher, "update", slow_update)
    data = os.urandom(25_000)
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    got = sha256_file_and_parts(path, 3000)
    assert got.parts == pieces(data, 3000)
    assert got.sha256 == hashlib.sha256(data).hexdigest()
