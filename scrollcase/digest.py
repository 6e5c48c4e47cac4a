"""sha256 of files, streams and bytes: the one place scrollcase computes content digests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CHUNK = 8 << 20  # large reads: hashing is CPU-bound, syscalls are not free


def sha256_stream(stream: BinaryIO, progress: Callable[[int], None] | None = None) -> tuple[str, int]:
    """Hex sha256 and byte count of a stream, read in bounded chunks."""
    digest = hashlib.sha256()
    total = 0
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
        total += len(chunk)
        if progress:
            progress(len(chunk))
    return digest.hexdigest(), total


def sha256_file(path: Path) -> tuple[str, int]:
    """Hex sha256 and size of the file at ``path``."""
    with path.open("rb") as stream:
        return sha256_stream(stream)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
