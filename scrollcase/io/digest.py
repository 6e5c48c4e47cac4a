"""sha256 of files, streams and bytes: the one place scrollcase computes content digests."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

# 1 MiB reads: few syscalls, yet each chunk is still in the core's cache when it is hashed (8 MiB
# reads hash about 7% slower here, because every chunk comes back from main memory).
CHUNK = 1 << 20
BUFFERS = 3  # chunks in flight between the reader and the piece-hashing thread


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

    The reading thread hashes the whole file while a second thread hashes the pieces from the same
    few reused buffers (hashlib releases the GIL on large buffers), so on two cores this takes
    about as long as hashing the file once.
    """
    if part_size <= 0:
        raise ValueError(f"part_size must be positive, not {part_size}")
    whole, pieces = hashlib.sha256(), _PieceHasher(part_size)
    buffers = [memoryview(bytearray(CHUNK)) for _ in range(BUFFERS)]
    pending: deque[Future[None]] = deque()
    turn = total = 0
    with path.open("rb", buffering=0) as stream, ThreadPoolExecutor(1, thread_name_prefix="scrollcase-hash") as pool:
        while True:
            if len(pending) == BUFFERS:
                pending.popleft().result()  # the buffer about to be refilled has been hashed
            buffer = buffers[turn % BUFFERS]
            # A read never crosses a piece boundary, so the piece thread sees the same cut points.
            read = stream.readinto(buffer[: min(CHUNK, part_size - total % part_size)])
            if not read:
                break
            chunk = buffer[:read]
            pending.append(pool.submit(pieces.update, chunk))
            whole.update(chunk)
            total += read
            turn += 1
        for future in pending:
            future.result()
    return FileDigests(whole.hexdigest(), total, pieces.finish())


@dataclass
class _PieceHasher:
    """sha256 of each consecutive ``size`` bytes fed to it, in order (fed by one thread at a time)."""

    size: int
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    filled: int = 0
    done: list[str] = field(default_factory=list)

    def update(self, chunk: memoryview) -> None:
        self.digest.update(chunk)
        self.filled += len(chunk)
        if self.filled == self.size:
            self.done.append(self.digest.hexdigest())
            self.digest, self.filled = hashlib.sha256(), 0

    def finish(self) -> tuple[str, ...]:
        return (*self.done, self.digest.hexdigest()) if self.filled else tuple(self.done)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
