"""The frames of a framed archive: written with their digests, and checked against a frame table.

A framed archive is a sequence of independent zstd frames, one per unit (:mod:`scrollcase.box.units`);
its frame table (name, offset, compressed size, uncompressed size, sha256 of the frame's bytes) goes
into the release manifest.  Hosts trust the table only as far as it agrees with the archive: every
reader that holds the whole archive checks it here (verify, publish, install), and an upgrade checks
each frame it fetches against it before the reassembled archive's own sha256 is checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from scrollcase.box.release import ArchiveFrame
from scrollcase.box.zstdframes import ZSTD_MAGIC
from scrollcase.errors import IntegrityError

_READ = 1 << 20
_MAGIC = ZSTD_MAGIC.to_bytes(4, "little")


class FrameLike(Protocol):
    """What a frame table row says (the packer's FrameRecord and the manifest's ArchiveFrame both do)."""

    @property
    def name(self) -> str: ...
    @property
    def offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def sha256(self) -> str: ...


@dataclass(frozen=True)
class FrameRecord:
    name: str
    offset: int
    size: int  # compressed bytes
    uncompressed_size: int
    sha256: str


def frame_table(records: Sequence[FrameRecord]) -> list[ArchiveFrame] | None:
    """The packer's frames as the release manifest's frame table (None for an archive without frames)."""
    rows = [
        ArchiveFrame(name=f.name, offset=f.offset, size=f.size, uncompressedSize=f.uncompressed_size, sha256=f.sha256)
        for f in records
    ]
    return rows or None


class FrameSink:
    """The archive file the packer writes: hashes the whole and each frame as the bytes go to disk."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0
        self.frames: list[FrameRecord] = []
        self.tee: BinaryIO | None = None  # where the current frame is copied too (the pack cache)
        self.known: str | None = None  # the current frame's sha256 when known (a cached frame): not hashed again
        self._frame = hashlib.sha256()
        self._start = 0

    def write(self, data: bytes | memoryview) -> int:
        self.sha.update(data)
        if self.known is None:
            self._frame.update(data)
        self.size += len(data)
        if self.tee is not None:
            self.tee.write(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()

    def end_frame(self, name: str, uncompressed_size: int) -> FrameRecord:
        """Close the frame written since the last call: its row of the frame table."""
        digest = self.known or self._frame.hexdigest()
        record = FrameRecord(name, self._start, self.size - self._start, uncompressed_size, digest)
        self.frames.append(record)
        self.known = None
        self._frame = hashlib.sha256()
        self._start = self.size
        return record


def table_problems(frames: Sequence[FrameLike], archive_size: int) -> list[str]:
    """What is wrong with a frame table on its own: gaps, overlaps, a total other than the archive's."""
    problems = []
    position = 0
    names: set[str] = set()
    for frame in frames:
        if frame.offset != position:
            problems.append(f"frame {frame.name!r} starts at {frame.offset}, the one before it ends at {position}")
        if frame.size <= 0:
            problems.append(f"frame {frame.name!r} has size {frame.size}")
        if frame.name in names:
            problems.append(f"frame name {frame.name!r} appears twice")
        names.add(frame.name)
        position = frame.offset + frame.size
    if frames and position != archive_size:
        problems.append(f"the frames end at {position}, the archive is {archive_size} bytes")
    return problems


def frame_digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def iter_frame_bytes(raw: BinaryIO, frame: FrameLike) -> Iterator[bytes]:
    """The bytes of one frame, from a file positioned at its offset, in chunks."""
    left = frame.size
    while left:
        data = raw.read(min(_READ, left))
        if not data:
            return
        left -= len(data)
        yield data


def frame_mismatch(raw: BinaryIO, frame: FrameLike) -> str | None:
    """Why the next ``frame.size`` bytes of ``raw`` are not that frame (None when they are)."""
    sha = hashlib.sha256()
    got = 0
    head = b""
    for data in iter_frame_bytes(raw, frame):
        if not head:
            head = data[:4]
        sha.update(data)
        got += len(data)
    if got != frame.size:
        return f"frame {frame.name!r} is cut short ({got} of {frame.size} bytes)"
    if head != _MAGIC:
        return f"frame {frame.name!r} at offset {frame.offset} does not start a zstd frame"
    if sha.hexdigest() != frame.sha256:
        return (
            f"frame {frame.name!r} at offset {frame.offset} has sha256 {sha.hexdigest()}, the table says {frame.sha256}"
        )
    return None


def check_frame_table(archive: Path, frames: Sequence[FrameLike], archive_size: int, manifest_file: str) -> None:
    """IntegrityError unless ``frames`` describes ``archive`` exactly, frame by frame (one read)."""
    problems = table_problems(frames, archive_size)
    if not problems:
        with archive.open("rb") as raw:
            for frame in frames:
                mismatch = frame_mismatch(raw, frame)
                if mismatch is not None:
                    problems.append(mismatch)
                    break
    if problems:
        raise IntegrityError(
            f"the frame table of {manifest_file} disagrees with {archive}: {problems[0]}",
            fix="the release manifest is not the one built with this archive: rebuild the box, or use another store",
        )
