"""The frame cache: the frames of installed releases, kept by sha256, so an upgrade fetches only new ones.

``<user cache dir>/frames/<sha[:2]>/<sha256>`` holds the bytes of one zstd frame of an archive (see
:mod:`scrollcase.format.archive.frames`); a frame gets that name only after its bytes hashed to it, so a file in the
cache was right when written (a killed run leaves only a ``.part`` temp, removed by the next).  What is
reused is checked where it is read: the unpack's sha256 over the whole archive, and on a mismatch each
cached frame of the release hashed again, the damaged ones (a bad disk, a hand edit) evicted and fetched
again in the same run (:meth:`FrameCache.evict_damaged`).  A link in the cache is never followed: an entry
that is one is removed and fetched again.  ``install`` fills
it from the archive it downloaded (which is also where it checks the manifest's frame table against the
archive); ``upgrade`` reads the missing frames from the store with ranged reads, checks each against the
new manifest's table as it arrives, and unpacks the archive the cached frames make, read frame after
frame (:class:`FrameStream`: never written whole), its whole sha256 checked before the new tree is used.
The relocated tree in DEST no longer matches the archive, so the cache is what an installer keeps of a
release.

What it keeps is what the installed boxes use: every ``install`` and ``upgrade`` pins the frames of the
release it put in a folder (``pins/<key of the folder>.json``, kept also for ``.<DEST>.previous`` when an
upgrade keeps it), then prunes the frames no pin names — so an end user's disk holds one copy of each
release that is installed, not of every release ever downloaded.  A pin whose folder is gone (a box the
user deleted) no longer counts.  A frame younger than an hour is never pruned: another install running
at the same time may have fetched it and not pinned it yet.
"""

from __future__ import annotations

import contextlib
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar, cast

from scrollcase.client.download import disk_refused, make_cache_dir
from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format.archive.frames import FrameLike, iter_frame_bytes, table_problems
from scrollcase.format.archive.unpack import UnpackResult, unpack_archive
from scrollcase.format.release import ArchiveInfo
from scrollcase.io.cache import FRAME_CACHE, FRAME_GRACE_SECONDS
from scrollcase.io.digest import HashingWriter, sha256_chunks, sha256_stream
from scrollcase.io.files import GuardedWriter, open_unlinked, user_cache_dir
from scrollcase.progress import MeterFactory, silent_meter
from scrollcase.store.base import ReadableStore

FRAMES = FRAME_CACHE.name
PRUNE_GRACE_SECONDS = FRAME_GRACE_SECONDS
F = TypeVar("F", bound=FrameLike)


def distinct(frames: Iterable[F]) -> list[F]:
    """Each sha256 once, in archive order (a release may hold the same frame twice)."""
    seen: set[str] = set()
    out = []
    for frame in frames:
        if frame.sha256 not in seen:
            seen.add(frame.sha256)
            out.append(frame)
    return out


@dataclass(frozen=True)
class Pruned:
    frames: int
    bytes: int


def pruned_json(pruned: Pruned) -> dict[str, int]:
    """``cachePruned`` of install's and upgrade's --json: the frames no installed box uses any more, removed."""
    return {"frames": pruned.frames, "bytes": pruned.bytes}


@dataclass(frozen=True)
class FrameCache:
    root: Path

    @classmethod
    def default(cls, cache_dir: Path | None = None) -> FrameCache:
        return cls((cache_dir or user_cache_dir()) / FRAMES)

    def path_for(self, sha256: str) -> Path:
        return FRAME_CACHE.entry(self.root, sha256)

    def has(self, frame: FrameLike) -> bool:
        """Whether the cache holds a file of ``frame``'s size (its bytes are checked where they are read: by
        the unpack's sha256, then :meth:`evict_damaged`).  An entry that is not a plain file (a symlink, or
        one below a linked folder) is none of the cache's: it is removed, the link only, and is missing."""
        path = self.path_for(frame.sha256)
        try:
            st = path.lstat()
        except OSError:
            return False
        if path.parent.is_symlink() or not stat.S_ISREG(st.st_mode):
            _evict(path)
            return False
        return st.st_size == frame.size

    def evict_damaged(self, frames: Iterable[FrameLike]) -> list[FrameLike]:
        """Hash the cached copy of each of ``frames`` (each distinct sha256 once) and remove those whose bytes
        are not the frame table's (damaged on this disk, a link, absent): the frames to fetch again."""
        damaged: dict[str, FrameLike] = {}
        for frame in frames:
            if frame.sha256 not in damaged and not self.intact(frame):
                _evict(self.path_for(frame.sha256))
                damaged[frame.sha256] = frame
        return list(damaged.values())

    def intact(self, frame: FrameLike) -> bool:
        """Whether the cached copy of ``frame`` is a plain file holding exactly its bytes (hashed now)."""
        if not self.has(frame):
            return False
        try:
            with open_unlinked(self.path_for(frame.sha256)) as stream:
                return sha256_stream(stream) == (frame.sha256, frame.size)
        except OSError:
            return False

    def missing(self, frames: Iterable[FrameLike]) -> list[FrameLike]:
        """The frames not in the cache (each distinct sha256 once, in archive order).  The ones there are
        touched: a caller relies on them now, so a prune running beside it (another install) leaves them."""
        seen: set[str] = set()
        out = []
        for frame in frames:
            if frame.sha256 not in seen:
                if self.has(frame):
                    FRAME_CACHE.touch(self.path_for(frame.sha256))  # a read-only cache: only the grace is lost
                else:
                    out.append(frame)
            seen.add(frame.sha256)
        return out

    def pin(self, dest: Path, frames: Iterable[FrameLike] | Iterable[str]) -> None:
        """Record that ``dest`` holds a release made of ``frames`` (FrameLike rows, or their sha256s)."""
        digests = (f if isinstance(f, str) else f.sha256 for f in frames)
        FRAME_CACHE.pin(self.root, dest, digests)  # OSError: keep_installed

    def pinned(self, dest: Path) -> tuple[str, ...]:
        """The frames pinned for ``dest`` (none when it has no pin, or one that cannot be read)."""
        return FRAME_CACHE.pinned(self.root, dest)

    def prune(self, now: float | None = None) -> Pruned:
        """Remove every frame no pin of an existing folder names, unless it is younger than the grace.
        What cannot be listed or removed stays (a prune only ever costs disk, never an install)."""
        removed = FRAME_CACHE.prune(self.root, 0.0, now)  # the rule is the pins and the grace, not an age
        return Pruned(len(removed), sum(size for _, size in removed))

    @contextlib.contextmanager
    def adding(self, frame: FrameLike, source: str) -> Iterator[HashingWriter]:
        """A temp file to write ``frame``'s bytes into; it becomes the cache entry only if they hash to
        ``frame.sha256`` with ``frame.size`` bytes, else IntegrityError naming ``source``."""
        target = self.path_for(frame.sha256)
        make_cache_dir(target.parent, "frame cache")

        def refuse(exc: OSError) -> BuildError:  # a full disk is exit 5 naming the entry, not a bare OSError
            return disk_refused(exc, target, "the frame cache")

        in_block = False
        try:
            with FRAME_CACHE.put(self.root, frame.sha256) as out:
                hashing = HashingWriter(cast("BinaryIO", GuardedWriter(out, refuse)))
                in_block = True
                yield hashing
                in_block = False
                _check_frame(frame, hashing.sha.hexdigest(), hashing.size, source)
        except OSError as exc:
            if in_block:  # the caller's own (reading its source), not the cache's
                raise
            raise refuse(exc) from None


def keep_installed(
    cache: FrameCache, dest: Path, frames: Sequence[FrameLike], previous: tuple[Path, Sequence[str]] | None = None
) -> Pruned:
    """After an install or upgrade: pin what DEST (and a previous tree kept beside it) is made of, and prune
    the rest.  A cache that cannot be written costs disk or a later download, never the finished install."""
    try:
        if previous is not None and previous[1]:
            cache.pin(*previous)
        cache.pin(dest, frames)
    except OSError:
        return Pruned(0, 0)  # without DEST's pin, pruning would take the frames its next upgrade starts from
    return cache.prune()


def _check_frame(frame: FrameLike, sha256: str, size: int, source: str) -> None:
    if size != frame.size or sha256 != frame.sha256:
        raise IntegrityError(
            f"refusing frame {frame.name!r} of {source}: {size} bytes with sha256 {sha256}, the release "
            f"manifest's frame table says {frame.size} bytes with sha256 {frame.sha256}; nothing was installed",
            fix="the store's archive and release manifest disagree, or the archive was tampered with: "
            "republish the release (or use another store)",
        )


def _evict(path: Path) -> None:
    """Remove a bad cache entry: a file or a link (never what it names), a linked fanout folder's link, or
    a folder where a file belongs; what cannot be removed stays (the next write over it fails loudly)."""
    with contextlib.suppress(OSError):
        if path.parent.is_symlink():
            path.parent.unlink()
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def check_table(frames: Sequence[FrameLike], size: int, source: str) -> None:
    """IntegrityError when the frame table cannot be a table of an archive of ``size`` bytes."""
    problems = table_problems(frames, size)
    if problems:
        raise IntegrityError(
            f"the frame table of {source} is not a table of its archive: {problems[0]}",
            fix="republish the release (or use another store)",
        )


def unpack_keeping_frames(
    cache: FrameCache,
    archive: Path,
    dest: Path,
    info: ArchiveInfo,
    source: str,
    on_bytes: Callable[[int], None] | None = None,
) -> UnpackResult:
    """``unpack_archive`` while another thread checks the frame table against the archive and keeps
    its frames for ``upgrade`` (:func:`fill_from_archive`): the two read the same pages, one
    decompressing and writing the tree, the other hashing and writing frames (the torch runtime box:
    16.5 to 17.0 s against 19.5 to 22.3 s one after the other).  The tree becomes ``dest`` only when both
    succeeded: a table that disagrees with the archive still installs nothing."""
    if not info.frames:
        return unpack_archive(archive, dest, expected_size=info.size, expected_sha256=info.sha256, on_bytes=on_bytes)
    check_table(info.frames, info.size, source)  # the cheap part first: a bad table fails fast
    with ThreadPoolExecutor(1, thread_name_prefix="scrollcase-frames") as pool:
        filled = pool.submit(fill_from_archive, cache, archive, info.frames, info.size, source)

        def frames_kept() -> None:
            filled.result()  # the fill's IntegrityError or OSError, before the tree becomes DEST

        return unpack_archive(
            archive,
            dest,
            expected_size=info.size,
            expected_sha256=info.sha256,
            on_bytes=on_bytes,
            before_publish=frames_kept,
        )


def fill_from_archive(cache: FrameCache, archive: Path, frames: Sequence[FrameLike], size: int, source: str) -> int:
    """Put every frame of a checked ``archive`` into the cache: the install-time check of the frame
    table (IntegrityError when it disagrees with the archive); the number of frames added."""
    check_table(frames, size, source)
    added = 0
    with archive.open("rb") as raw:
        for frame in frames:
            raw.seek(frame.offset)
            if cache.has(frame):
                _check_frame(frame, *sha256_chunks(iter_frame_bytes(raw, frame)), source)
                continue
            with cache.adding(frame, source) as out:
                for data in iter_frame_bytes(raw, frame):
                    out.write(data)
            added += 1
    return added


def fetch_frames(
    store: ReadableStore, key: str, frames: Sequence[FrameLike], cache: FrameCache, meter: MeterFactory = silent_meter
) -> int:
    """Read each frame's byte range of ``key`` from the store into the cache, checked; the bytes fetched.

    Frames that lie next to each other in the archive are read with one ranged read (an install of a box
    with a few new packages asks for a few ranges, not one per frame).  A frame that arrives with other
    bytes than the table says is an IntegrityError and is not kept; frames fetched before a failure or a
    kill stay (they are right), so a rerun fetches only the rest."""
    fetched = 0
    url = store.url_for(key)
    bar = meter("downloading frames", sum(f.size for f in frames))
    for run in adjacent_runs(frames):
        with store.read_from(key, run[0].offset, sum(f.size for f in run)) as stream:
            chunks = _Splitter(stream.chunks)
            for frame in run:
                with cache.adding(frame, url) as out:
                    for chunk in chunks.take(frame.size):
                        out.write(chunk)
                        fetched += len(chunk)
                        bar(len(chunk))
    bar.finish()
    return fetched


def adjacent_runs(frames: Iterable[F]) -> list[list[F]]:
    """``frames`` in archive order, cut into runs of frames that follow each other without a gap."""
    runs: list[list[F]] = []
    for frame in sorted(frames, key=lambda f: f.offset):
        if runs and runs[-1][-1].offset + runs[-1][-1].size == frame.offset:
            runs[-1].append(frame)
        else:
            runs.append([frame])
    return runs


class _Splitter:
    """The chunks of one ranged read handed out frame by frame: ``take(n)`` yields the next ``n`` bytes (fewer
    when the read ends early: the frame's own size check refuses it)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = b""

    def take(self, n: int) -> Iterator[bytes]:
        while n > 0:
            if not self._left:
                self._left = next(self._chunks, b"")
                if not self._left:
                    return
            piece, self._left = self._left[:n], self._left[n:]
            n -= len(piece)
            yield piece


class FrameStream:
    """The archive the frames make, read frame after frame from the cache (never written whole): what an
    upgrade unpacks, its sha256 checked by the unpack as it reads."""

    def __init__(self, cache: FrameCache, frames: Sequence[FrameLike]) -> None:
        self._paths = [cache.path_for(frame.sha256) for frame in frames]
        self._current: BinaryIO | None = None

    def read(self, n: int = -1) -> bytes:
        while True:
            if self._current is None:
                if not self._paths:
                    return b""
                self._current = _open_entry(self._paths.pop(0))
            data = self._current.read(n)
            if data or n == 0:
                return data
            self.close()

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None


def _open_entry(path: Path) -> BinaryIO:
    """A cached frame opened for the unpack; one gone meanwhile (evicted by another run) or a link is an
    IntegrityError, which the unpack's healing answers by fetching it again."""
    try:
        return open_unlinked(path)
    except OSError as exc:
        raise IntegrityError(
            f"the frame cache entry {path} cannot be read: {exc.strerror or exc}",
            fix="it was removed or damaged on this machine: an install or upgrade fetches it again",
        ) from None


@dataclass(frozen=True)
class SharedFrame:
    """One frame the releases of several installed folders are made of: stored once, used by each."""

    sha256: str
    bytes: int  # its size in the frame cache (0: not there any more)
    dests: tuple[str, ...]  # the installed folders whose pins name it


@dataclass(frozen=True)
class PinnedBox:
    """What one installed folder's release is made of, and how much of it other folders use too."""

    dest: str
    frames: int
    bytes: int
    shared_frames: int
    shared_bytes: int


@dataclass(frozen=True)
class Sharing:
    """The frames shared by installed boxes, from the pins of the folders that still exist."""

    boxes: tuple[PinnedBox, ...]
    shared: tuple[SharedFrame, ...]

    @property
    def saved_bytes(self) -> int:
        """Bytes not downloaded and not stored again because a frame was already on this machine."""
        return sum(frame.bytes * (len(frame.dests) - 1) for frame in self.shared)


def sharing(cache: FrameCache) -> Sharing:
    """Which installed folders pin each frame, their sizes in the cache: the view ``cache info`` shows."""
    users: dict[str, list[str]] = {}
    try:
        pins = FRAME_CACHE.pins(cache.root)
    except OSError:
        pins = []
    for pin in pins:
        for sha in pin.frames:
            users.setdefault(sha, []).append(pin.dest)
    sizes = {sha: _size(cache.path_for(sha)) for sha in users}
    shared = tuple(
        SharedFrame(sha, sizes[sha], tuple(sorted(dests))) for sha, dests in sorted(users.items()) if len(dests) > 1
    )
    boxes = tuple(
        PinnedBox(
            pin.dest,
            len(pin.frames),
            sum(sizes[sha] for sha in pin.frames),
            sum(1 for sha in pin.frames if len(users[sha]) > 1),
            sum(sizes[sha] for sha in pin.frames if len(users[sha]) > 1),
        )
        for pin in sorted(pins, key=lambda p: p.dest)
    )
    return Sharing(boxes, shared)


def _size(path: Path) -> int:
    try:
        st = path.lstat()
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0
