"""The frames of a framed archive: written with their digests, and checked against a frame table.

A framed archive is a sequence of independent zstd frames, one per unit (:mod:`scrollcase.format.archive.units`);
its frame table (name, offset, compressed size, uncompressed size, sha256 of the frame's bytes) goes
into the release manifest.  Hosts trust the table only as far as it agrees with the archive: every
reader that holds the whole archive checks it here (verify, publish, install), and an upgrade checks
each frame it fetches against it before the reassembled archive's own sha256 is checked.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeAlias, cast

from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format.archive.zstdframes import ZSTD_MAGIC
from scrollcase.format.release import ArchiveFrame
from scrollcase.io.digest import new_hash, sha256_bytes
from scrollcase.io.files import copy_range

if TYPE_CHECKING:
    from scrollcase.io.digest import Hasher

_READ = 1 << 20
_MAGIC = ZSTD_MAGIC.to_bytes(4, "little")
_Item: TypeAlias = tuple[Any, ...]  # ("data", bytes) | ("begin", known, tee) | ("end", ...) | ("frame", ...) | ...
_HOLDING_BYTES = frozenset({"data", "frame"})  # the items the sink's queue bounds (see FrameSink.__init__)
# A cached frame is hashed through one reused buffer of this size: ~28% faster than hashing it mapped into memory
# (each mapped 4 KiB page faults in; 2.3 s against 1.66 s for the torch runtime box's 2.6 GB, at sha256's own speed)
_HASH_READ = 1 << 20


@dataclass(frozen=True)
class _Span:
    """A whole file the writer copies into the archive (a cached frame), then closes."""

    source: BinaryIO  # opened unbuffered
    length: int
    shown: str


@dataclass(frozen=True)
class _FrameEnd:
    """The end of a frame, queued after its bytes: the writer, which hashes them, makes its table row."""

    name: str
    offset: int
    size: int
    uncompressed_size: int
    known: str | None  # its sha256 when known already (a cached frame)
    on_record: Callable[[FrameRecord], None] | None


_Write: TypeAlias = tuple[bytes | memoryview | _Span, BinaryIO | None, bool] | _FrameEnd  # data, tee, hash it


class _PositionalReader:
    """Reads a file at given offsets without moving the position of ``raw`` (the writer copies from it):
    ``preadv`` on a descriptor of the same open file where the OS has it, else a second handle of ``path``
    (Windows; a pack cache entry is replaced only by a rename, never changed in place)."""

    def __init__(self, raw: BinaryIO, path: Path) -> None:
        self._preadv = getattr(os, "preadv", None)
        self._fd = os.dup(raw.fileno()) if self._preadv is not None else -1
        self._file = None if self._preadv is not None else path.open("rb", buffering=0)

    def read_at(self, view: memoryview, offset: int) -> int:
        if self._preadv is not None:
            return cast("int", self._preadv(self._fd, [view], offset))
        assert self._file is not None
        self._file.seek(offset)
        return self._file.readinto(view) or 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        elif self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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
    """The archive file the packer writes: hashes the whole and each frame as the bytes go to disk.

    The archive's sha256 is computed on a thread of its own; each frame's (unless its digest is known)
    on the writing thread, beside its writes, fed through bounded queues: hashing and file writes
    release the GIL, so the two digests and the writes overlap with each other and with reading files and
    feeding zstd, instead of stalling zstd's workers between calls (both digests on one thread held the
    torch box's pack back by ~0.5 s: the packer waited for the queue's room).  A frame reused from the
    pack cache (:meth:`copy_frame`) is copied by the kernel (``copy_file_range``; a reflink where the file
    system shares blocks; elsewhere a plain read and write) while the sink hashes it through one reused
    buffer, so a rebuild's copy and hash take the time of one of them.  Every call keeps the stream's
    order; an error on either thread (a full disk) is raised by the next call, and by
    :meth:`close`.  With ``digest=False`` the archive's sha256 is left to whoever reads it back (the
    build's self-test unpack).
    """

    def __init__(self, out: BinaryIO, depth: int = 8, *, digest: bool = True) -> None:  # 8 writes: at most ~48 MiB
        self.out = out
        # the archive's; None when ``digest`` is False (the caller hashes it as it reads it back)
        self.sha: Hasher | None = new_hash() if digest else None
        self.size = 0
        self.frames: list[FrameRecord] = []
        # Only items that hold bytes wait for room: a rebuild's packer queues every cached frame at once and
        # meets a changed package while the sink is still hashing the frames before it (it is compressed
        # meanwhile, not when the sink gets there).
        self._queue: queue.Queue[_Item] = queue.Queue()
        self._room = threading.BoundedSemaphore(depth)
        self._writes: queue.Queue[_Write | None] = queue.Queue(depth)
        self._error: BaseException | None = None
        self._frame = new_hash()  # the writer's: the current frame's bytes so far
        self._known: str | None = None  # the current frame's sha256 when known (a cached frame): not hashed again
        self._tee: BinaryIO | None = None  # where the current frame is copied too (the pack cache)
        self._start = 0
        self._buffer = memoryview(bytearray(_HASH_READ))  # what a cached frame is hashed through
        self._copies = 0  # copy_frame calls not handled yet
        self._copies_lock = threading.Lock()
        self._writer = threading.Thread(target=self._write_all, name="scrollcase-pack-write", daemon=True)
        self._thread = threading.Thread(target=self._run, name="scrollcase-pack-sink", daemon=True)
        self._writer.start()
        self._thread.start()

    def write(self, data: bytes | memoryview) -> int:
        self._put(("data", bytes(data) if isinstance(data, memoryview) else data))
        return len(data)

    def flush(self) -> None:
        """zstd's writer calls it; the bytes reach the file in order anyway (see :meth:`wait`)."""

    def begin_frame(self, *, known: str | None = None, tee: BinaryIO | None = None) -> None:
        """The next frame's sha256 when already known (not hashed again), and a file it is copied to."""
        self._put(("begin", known, tee))

    def end_frame(
        self, name: str, uncompressed_size: int, on_record: Callable[[FrameRecord], None] | None = None
    ) -> None:
        """Close the frame written since the last call; ``on_record`` gets its row of the frame table."""
        self._put(("end", name, uncompressed_size, on_record))

    def frame(
        self, data: Future[bytes], name: str, uncompressed_size: int, on_frame: Callable[[FrameRecord, bytes], None]
    ) -> None:
        """A whole frame still being compressed (on a pool thread): written in its place once it is done,
        so the packer goes on reading files meanwhile; ``on_frame`` gets its row and its bytes."""
        self._put(("frame", data, name, uncompressed_size, on_frame))

    def copy_frame(
        self,
        source: Path | Future[Path],
        name: str,
        uncompressed_size: int,
        *,
        known: str | None = None,
        on_record: Callable[[FrameRecord], None] | None = None,
    ) -> None:
        """A whole frame from a file (the pack cache), copied in its place by the sink's threads; a file
        still being written (a future) is waited for when the sink gets there."""
        with self._copies_lock:
            self._copies += 1
        self._put(("copy", source, name, uncompressed_size, known, on_record))

    def copying(self) -> bool:
        """Whether frames given to :meth:`copy_frame` are still waiting to be copied (the sink is behind)."""
        return self._copies > 0

    def wait(self) -> None:
        """Until every byte given so far is hashed and written (before a tee file is closed)."""
        self._queue.join()
        self._writes.join()
        self._raise()

    def close(self, *, quiet: bool = False) -> None:
        """Stop the threads once everything is written; raise their error unless ``quiet``."""
        self._queue.put(("stop",))
        self._thread.join()
        self._writer.join()
        if not quiet:
            self._raise()

    def _put(self, item: _Item) -> None:
        self._raise()
        if item[0] in _HOLDING_BYTES:
            self._room.acquire()
        self._queue.put(item)

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            while True:
                item = self._queue.get()
                try:
                    if item[0] == "stop":
                        return
                    if self._error is None:  # after an error the queue is still drained, so no put() blocks
                        self._handle(item)
                except BaseException as exc:  # handed to the packer's thread by the next call
                    self._error = exc
                finally:
                    if item[0] in _HOLDING_BYTES:
                        self._room.release()
                    elif item[0] == "copy":
                        with self._copies_lock:
                            self._copies -= 1
                    self._queue.task_done()
        finally:
            self._writes.put(None)

    def _write_all(self) -> None:
        """The writer thread: every write in order, and each frame's digest; after an error it only closes
        the copied files."""
        while True:
            item = self._writes.get()
            try:
                if item is None:
                    return
                try:
                    self._write(item)
                except BaseException as exc:
                    self._error = exc
            finally:
                self._writes.task_done()

    def _write(self, item: _Write) -> None:
        if isinstance(item, _FrameEnd):
            if self._error is None:
                self._record(item)
            return
        data, tee, hash_it = item
        if isinstance(data, _Span):
            self._write_span(data)
        elif self._error is None:
            if hash_it:
                self._frame.update(data)
            if tee is not None:
                tee.write(data)
            self.out.write(data)

    def _record(self, end: _FrameEnd) -> None:
        record = FrameRecord(
            end.name, end.offset, end.size, end.uncompressed_size, end.known or self._frame.hexdigest()
        )
        self.frames.append(record)
        self._frame = new_hash()
        if end.on_record is not None:
            end.on_record(record)

    def _write_span(self, span: _Span) -> None:
        with span.source:
            if self._error is not None:
                return
            self.out.flush()  # the kernel copies at the file's own position: the buffered bytes go first
            copied = copy_range(span.source, self.out, 0, span.length)
        if copied != span.length:
            raise BuildError(
                f"the pack cache's frame {span.shown} ended after {copied} of its {span.length} bytes",
                fix="something truncated the pack cache while a box was packed: delete that file and pack again",
            )

    def _hash(self, data: bytes | memoryview) -> None:
        if self.sha is not None:
            self.sha.update(data)
        self.size += len(data)

    def _data(self, data: bytes | memoryview) -> None:
        self._hash(data)
        self._writes.put((data, self._tee, self._known is None))

    def _handle(self, item: _Item) -> None:
        kind = item[0]
        if kind == "data":
            self._data(item[1])
        elif kind == "frame":
            data = item[1].result()
            self._data(data)
            self._end(item[2], item[3], lambda record: item[4](record, data))
        elif kind == "copy":
            self._known, self._tee = item[4], None
            self._copy(item[1].result() if isinstance(item[1], Future) else item[1])
            self._end(item[2], item[3], item[5])
        elif kind == "begin":
            self._known, self._tee = item[1], item[2]
        elif kind == "end":
            self._end(item[1], item[2], item[3])

    def _copy(self, source: Path) -> None:
        """Hand the frame to the writer first, then hash it: the kernel copies it while this thread hashes
        the same pages (a frame of the torch box is up to 800 MB: one after the other, they took twice as
        long).  The hash reads the same open file at its own positions (:class:`_PositionalReader`); a frame
        whose digest is known, in an archive packed without its own, is not read at all."""
        raw = source.open("rb", buffering=0)
        hashing = self.sha is not None or self._known is None
        try:
            length = os.fstat(raw.fileno()).st_size
            reader = _PositionalReader(raw, source) if hashing else None
        except BaseException:
            raw.close()
            raise
        self._writes.put((_Span(cast("BinaryIO", raw), length, str(source)), None, False))
        if reader is None:  # neither the archive's digest nor the frame's to compute: only the writer's copy
            self.size += length
            return
        frame = new_hash() if self._known is None else None  # the writer does not see these bytes
        with contextlib.closing(reader):
            done = 0
            while done < length:
                got = reader.read_at(self._buffer[: min(len(self._buffer), length - done)], done)
                if not got:
                    break  # cut short: the writer's copy says so, naming the file
                self._hash(self._buffer[:got])
                if frame is not None:
                    frame.update(self._buffer[:got])
                done += got
        if frame is not None:
            self._known = frame.hexdigest()

    def _end(self, name: str, uncompressed_size: int, on_record: Callable[[FrameRecord], None] | None) -> None:
        self._writes.put(
            _FrameEnd(name, self._start, self.size - self._start, uncompressed_size, self._known, on_record)
        )
        self._known, self._tee, self._start = None, None, self.size


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
    return sha256_bytes(data)


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
    sha = new_hash()
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
