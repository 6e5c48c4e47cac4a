"""sha256 of files, streams and bytes: the one place scrollcase computes content digests.

Besides the one-call digests, a caller that hashes bytes on their way somewhere (an archive being
written or read, a frame arriving, a wheel member checked against RECORD) gets its hasher here
(:func:`new_hash`, :class:`HashingWriter`, :class:`HashingReader`), so the bytes are read once.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Iterable

Hasher: TypeAlias = "hashlib._Hash"  # what new_hash gives: update(), digest(), hexdigest()

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


def sha256_file(path: Path | str) -> tuple[str, int]:
    """Hex sha256 and size of the file at ``path``."""
    with open(path, "rb") as stream:  # noqa: PTH123 - str paths from tree walks too
        return sha256_stream(stream)


def hash_file(path: Path | str, name: str = "sha256") -> Hasher:
    """The hasher ``name`` fed the whole file at ``path`` (for its ``digest()`` in another encoding)."""
    with open(path, "rb") as stream:  # noqa: PTH123
        return hashlib.file_digest(stream, name)


def sha256_chunks(chunks: Iterable[bytes]) -> tuple[str, int]:
    """Hex sha256 and byte count of the bytes ``chunks`` yields."""
    digest, size = hashlib.sha256(), 0
    for data in chunks:
        digest.update(data)
        size += len(data)
    return digest.hexdigest(), size


def new_hash(name: str = "sha256") -> Hasher:
    """A fresh hasher for the algorithm ``name`` (``hashlib`` names: a RECORD may name another than sha256)."""
    return hashlib.sha256() if name == "sha256" else hashlib.new(name)


class HashingWriter:
    """A file-like sink that hashes and counts every byte on its way to ``out``."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


class HashingReader:
    """A file-like source that hashes and counts every byte read from ``raw`` (``on_bytes``: progress)."""

    def __init__(self, raw: BinaryIO, on_bytes: Callable[[int], None] | None = None) -> None:
        self.raw = raw
        self.on_bytes = on_bytes
        self.sha = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        self.size += len(data)
        if self.on_bytes is not None:
            self.on_bytes(len(data))
        return data


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
    digest: Hasher = field(default_factory=hashlib.sha256)
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


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_raw(data: bytes) -> bytes:
    """The sha256 of ``data`` as 32 bytes (for encodings other than hex)."""
    return hashlib.sha256(data).digest()


def sha256_text(text: str) -> str:
    """Hex sha256 of ``text``'s UTF-8 bytes (cache keys made of names and digests)."""
    return hashlib.sha256(text.encode()).hexdigest()
