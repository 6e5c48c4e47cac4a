"""sha256 of files, streams and bytes: the one place scrollcase computes content digests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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


@dataclass(frozen=True)
class FileDigests:
    """A file's sha256 and size, plus the sha256 of each consecutive ``part_size`` piece of it."""

    sha256: str
    size: int
    parts: tuple[str, ...]


def sha256_file_and_parts(path: Path, part_size: int) -> FileDigests:
    """One read of the file, two digests at once: the whole file's and each ``part_size`` piece's.

    The piece digests run on a second thread (hashlib releases the GIL on large buffers), so on two
    cores this takes about as long as hashing the file once.
    """
    if part_size <= 0:
        raise ValueError(f"part_size must be positive, not {part_size}")
    whole, part = hashlib.sha256(), hashlib.sha256()
    parts: list[str] = []
    in_part = total = 0
    with path.open("rb") as stream, ThreadPoolExecutor(1, thread_name_prefix="scrollcase-hash") as pool:
        while chunk := stream.read(min(CHUNK, part_size - in_part)):
            pending = pool.submit(part.update, chunk)
            whole.update(chunk)
            pending.result()
            in_part += len(chunk)
            total += len(chunk)
            if in_part == part_size:
                parts.append(part.hexdigest())
                part, in_part = hashlib.sha256(), 0
    if in_part:
        parts.append(part.hexdigest())
    return FileDigests(whole.hexdigest(), total, tuple(parts))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
