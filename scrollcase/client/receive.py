"""Receiving a release: its archive downloaded, unpacked into DEST and its frames kept, overlapped.

``curl -s URL | zstd -dc | tar -x`` runs its three stages at once; an installer that downloads, then
checks, then unpacks takes their sum (the torch runtime box: 0.74x that pipeline's throughput from a
loopback store).  Here the unpack reads the archive while the download writes it (a
:class:`~scrollcase.client.download.Follower` of the partial file), and once the download is complete and
its sha256 matched, box.json's identity is checked and the frame table checked and its frames kept for
``upgrade`` while the unpack goes on.  The tree becomes DEST only when all of them passed, so every
refusal leaves DEST as it was, as before.

The unpack's own sha256 over what it read decides as always; should it have read something else than the
finished download (a download that started over in a new file), the complete file is unpacked again.
Where a file open for reading cannot be renamed (Windows), or the archive is already in the download
cache, the steps run one after the other.

When this machine already holds some of the release's frames (the frame cache of every installed release of
any box: the same package packs to the same frame in every box), only the missing ones are read from the
store, with ranged reads, and the archive the frames make is unpacked from the cache as ``upgrade`` does
(:func:`receive_frames`; :func:`plan_receive` says which way, and what it costs, before a byte is fetched).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, cast

from scrollcase.client.download import Cancelled, Download, Follower, cache_paths, download_archive
from scrollcase.client.framecache import (
    FrameCache,
    FrameStream,
    check_table,
    distinct,
    fetch_frames,
    fill_from_archive,
    unpack_keeping_frames,
)
from scrollcase.client.preflight import check_identity
from scrollcase.errors import IntegrityError, ScrollcaseError
from scrollcase.format.archive.units import BOX_JSON_UNIT
from scrollcase.format.archive.unpack import UnpackResult, absolute_as_given, unpack_archive
from scrollcase.format.release import ArchiveFrame, ArchiveInfo, ReleaseManifest
from scrollcase.progress import Emit, MeterFactory, silent_meter
from scrollcase.store.base import RangeNotSupportedError, ReadableStore


@dataclass(frozen=True)
class Received:
    download: Download | None  # the whole archive in the download cache; None when the frames made it
    unpacked: UnpackResult
    fetched: Fetched | None = None  # the frames fetched, when the rest came from the frame cache

    @property
    def bytes_downloaded(self) -> int:
        """Archive bytes this run fetched from the store."""
        if self.fetched is not None:
            return self.fetched.bytes_fetched + (self.download.downloaded if self.download else 0)
        return self.download.downloaded if self.download else 0


How = Literal["frames", "archive", "cached-archive"]
# The frame path when at least 1/MIN_REUSED_SHARE of the archive is already here: below that (an unrelated box,
# whose only frames in common are the tar's 19-byte end) the whole download, unpacked while it arrives, is faster.
MIN_REUSED_SHARE = 100


@dataclass(frozen=True)
class Figures:
    """What receiving one release will cost this machine, known before a byte of its archive is fetched."""

    how: How  # frames: the missing ones by range; archive: the whole download; cached-archive: nothing to fetch
    download_bytes: int  # archive bytes the store will send
    disk_bytes: int | None  # bytes the tree adds to the disk (its frames' uncompressed sizes); None: no frame table
    frame_cache_bytes: int  # bytes the frame cache grows by (the frames it lacks)
    reused_bytes: int  # archive bytes this machine already holds (cached frames, or the archive)
    frames: int  # distinct frames of the release (0: no frame table)
    frames_missing: int

    def to_json(self) -> dict[str, object]:
        """``plan`` of ``install --json`` and of the chosen release in ``install --list --json``."""
        return {
            "how": self.how,
            "downloadBytes": self.download_bytes,
            "diskBytes": self.disk_bytes,
            "frameCacheBytes": self.frame_cache_bytes,
            "reusedBytes": self.reused_bytes,
            "frames": self.frames,
            "framesMissing": self.frames_missing,
        }


def plan_receive(info: ArchiveInfo, cache: FrameCache, *, whole: bool = False, shared: bool = False) -> Figures:
    """Which way :func:`receive` will go and what it costs: the frames this machine lacks, read by range,
    when it holds 1 % of the archive or more (and ``whole``, an archive kept in the download cache, is not
    asked for); else the whole archive, unless the download cache holds it already.  Nothing is fetched
    or changed.  ``shared``: the install links the files it has in common with installed boxes
    (client/share.py), so the disk it adds is estimated as the tree of the frames this machine lacks (the files of
    the frames it holds came with the boxes installed before); else the whole tree."""
    frames = distinct(info.frames or [])
    missing = [f for f in frames if not cache.has(f)]
    tree = _disk_estimate(info, missing, shared)
    missing_bytes = sum(f.size for f in missing)
    held = len(frames) - len(missing)
    if cache_paths(info.sha256).complete.is_file():
        return Figures("cached-archive", 0, tree, missing_bytes, info.size, len(frames), len(missing))
    reused = sum(f.size for f in frames) - missing_bytes
    if held and not whole and reused * MIN_REUSED_SHARE >= info.size:
        return Figures("frames", missing_bytes, tree, missing_bytes, reused, len(frames), len(missing))
    return Figures("archive", info.size, tree, missing_bytes, 0, len(frames), len(missing))


def _disk_estimate(info: ArchiveInfo, missing: list[ArchiveFrame], shared: bool) -> int | None:
    if not info.frames:
        return None
    lacking = {f.sha256 for f in missing}
    return sum(f.uncompressedSize for f in info.frames if not shared or f.sha256 in lacking)


def receive(
    store: ReadableStore,
    manifest: ReleaseManifest,
    dest: Path,
    cache: FrameCache,
    figures: Figures,
    source: str,
    *,
    meter: MeterFactory = silent_meter,
    progress: Emit = lambda _: None,
) -> Received:
    """The release in ``dest`` the way ``figures`` (:func:`plan_receive`) chose: from the frame cache and
    the missing frames, falling back to the whole download where the store serves no ranges."""
    if figures.how == "frames":
        try:
            return receive_frames(store, manifest, dest, cache, meter=meter, progress=progress)
        except RangeNotSupportedError as exc:
            progress(f"warning: {exc.message}; downloading the whole archive instead")
    return receive_release(store, manifest, dest, cache, source, meter=meter, progress=progress)


def receive_frames(
    store: ReadableStore,
    manifest: ReleaseManifest,
    dest: Path,
    cache: FrameCache,
    *,
    meter: MeterFactory = silent_meter,
    progress: Emit = lambda _: None,
) -> Received:
    """Install from frames: the ones the cache lacks read from the store by range (each checked against the
    frame table as it arrives), the archive they make unpacked into ``dest`` with its whole sha256 checked,
    a damaged cached frame evicted and fetched again (:func:`unpack_healing`)."""
    info = manifest.archive
    frames = info.frames or []
    check_table(frames, info.size, store.url_for(manifest.keys.archive))  # a bad table fails before a fetch
    fetched = fetch_release(store, manifest, frames, cache, meter)
    final = absolute_as_given(dest)  # the path the whole download's unpack relocates to, too
    unpacked, fetched = unpack_healing(store, fetched, manifest, cache, dest, final, progress, meter)
    return Received(None, unpacked, fetched)


def receive_release(
    store: ReadableStore,
    manifest: ReleaseManifest,
    dest: Path,
    cache: FrameCache,
    source: str,
    *,
    meter: MeterFactory = silent_meter,
    progress: Callable[[str], None] = lambda _: None,
) -> Received:
    """Download the release's archive into the download cache and unpack it into ``dest``, its frames
    kept in ``cache`` (``source``: the manifest's URL, for errors)."""
    info = manifest.archive
    paths = cache_paths(info.sha256)
    if not _can_follow() or paths.complete.is_file():
        return _one_after_another(store, manifest, dest, cache, source, meter, progress)
    if info.frames:
        check_table(info.frames, info.size, source)  # the cheap part first: a bad table fails fast
    done, cancel = threading.Event(), threading.Event()
    follower = Follower(paths.partial, info.size, done)
    with ThreadPoolExecutor(1, thread_name_prefix="scrollcase-download") as pool:
        fetching = pool.submit(_fetch_and_keep, store, manifest, cache, source, meter, progress, done, cancel)
        try:
            unpacked = _unpack_following(manifest, dest, follower, fetching)
        except ScrollcaseError as failed:
            cancel.set()  # nothing more to wait for, unless the download is complete already
            download = _finished(fetching, failed)
            if follower.read_the_file(download.path):
                raise
            progress("the download started over meanwhile: unpacking the complete archive")
            unpacked = unpack_archive(download.path, dest, expected_size=info.size, expected_sha256=info.sha256)
        except BaseException:
            cancel.set()  # Ctrl-C: the download stops at its next chunk, its partial file kept
            raise
        finally:
            follower.close()
        return Received(fetching.result(), unpacked)


def _finished(fetching: Future[Download], failed: ScrollcaseError) -> Download:
    """The download, when it completed; else its own error (it says what went wrong), or the unpack's
    ``failed`` when the download was only stopped because of it."""
    try:
        return fetching.result()
    except Cancelled:
        raise failed from None


def _unpack_following(
    manifest: ReleaseManifest, dest: Path, follower: Follower, fetching: Future[Download]
) -> UnpackResult:
    info = manifest.archive

    def fetched_and_kept() -> None:
        fetching.result()  # the download's, box.json's or the frame table's refusal, before DEST appears

    return unpack_archive(
        follower.path,
        dest,
        expected_size=info.size,
        expected_sha256=info.sha256,
        stream=cast("BinaryIO", follower),
        before_publish=fetched_and_kept,
    )


def _fetch_and_keep(
    store: ReadableStore,
    manifest: ReleaseManifest,
    cache: FrameCache,
    source: str,
    meter: MeterFactory,
    progress: Callable[[str], None],
    done: threading.Event,
    cancel: threading.Event,
) -> Download:
    """The download (its end told through ``done``), then box.json's identity and the frames kept."""
    info = manifest.archive
    try:
        download = download_archive(
            store,
            manifest.keys.archive,
            size=info.size,
            sha256=info.sha256,
            meter=meter,
            progress=progress,
            cancel=cancel,
        )
    finally:
        done.set()
    progress("downloaded and checked; finishing the unpack")
    check_identity(manifest, download.path)
    if info.frames:
        fill_from_archive(cache, download.path, info.frames, info.size, source)
    return download


def _one_after_another(
    store: ReadableStore,
    manifest: ReleaseManifest,
    dest: Path,
    cache: FrameCache,
    source: str,
    meter: MeterFactory,
    progress: Callable[[str], None],
) -> Received:
    info = manifest.archive
    download = download_archive(
        store, manifest.keys.archive, size=info.size, sha256=info.sha256, meter=meter, progress=progress
    )
    check_identity(manifest, download.path)
    bar = meter("unpacking", info.size)
    unpacked = unpack_keeping_frames(cache, download.path, dest, info, source, on_bytes=bar)
    bar.finish()
    return Received(download, unpacked)


def _can_follow() -> bool:
    # Windows cannot rename the partial file while the unpack holds it open (no FILE_SHARE_DELETE).
    return os.name != "nt"


def unpack_healing(
    store: ReadableStore,
    fetched: Fetched,
    manifest: ReleaseManifest,
    cache: FrameCache,
    staging: Path,
    dest: Path,
    progress: Emit,
    meter: MeterFactory,
) -> tuple[UnpackResult, Fetched]:
    """The unpack from the frame cache; when its sha256 (or anything it reads) is wrong, each cached frame
    of the release is hashed again: the damaged ones (this disk's fault, not the store's) are evicted,
    fetched again and the unpack rerun; when none is, the release itself is at fault."""
    source = store.url_for(manifest.keys.archive)
    try:
        return _unpack_frames(cache, manifest, staging, dest, source, meter), fetched
    except IntegrityError as exc:
        damaged = cache.evict_damaged(manifest.archive.frames or [])
        if not damaged:
            raise IntegrityError(
                f"{exc.message}; every cached frame matches the release manifest's frame table",
                problems=exc.problems,
                fix="the frames are the ones the release manifest names, so the release itself is at fault (its "
                "frame table and archive sha256 disagree, or its content is refused): republish it (or use "
                "another store)",
            ) from None
    for frame in damaged:
        progress(
            f"the frame cache entry {cache.path_for(frame.sha256)} ({frame.name}) was damaged on this machine "
            "(not the bytes its name promises, or a link): removed and fetched again from the store"
        )
    again = fetch_frames(store, manifest.keys.archive, damaged, cache, meter)
    healed = dataclasses.replace(
        fetched, frames_fetched=fetched.frames_fetched + len(damaged), bytes_fetched=fetched.bytes_fetched + again
    )
    return _unpack_frames(cache, manifest, staging, dest, source, meter), healed


def _unpack_frames(
    cache: FrameCache, manifest: ReleaseManifest, staging: Path, dest: Path, source: str, meter: MeterFactory
) -> UnpackResult:
    bar = meter("unpacking", manifest.archive.size)
    result = unpack_from_frames(cache, manifest, staging, dest, source, on_bytes=bar)
    bar.finish()
    return result


@dataclass(frozen=True)
class Fetched:
    archive: Path | None  # the whole archive, for a release without a frame table; else the frames are cached
    frames_total: int
    frames_fetched: int
    bytes_fetched: int


def fetch_release(
    store: ReadableStore,
    manifest: ReleaseManifest,
    frames: Sequence[ArchiveFrame],
    cache: FrameCache,
    meter: MeterFactory = silent_meter,
) -> Fetched:
    """Every frame of the release in the cache: the missing ones fetched, each checked as it arrives."""
    missing = cache.missing(frames)
    fetched = fetch_frames(store, manifest.keys.archive, missing, cache, meter)
    return Fetched(None, len(frames), len(missing), fetched)


def unpack_from_frames(
    cache: FrameCache,
    manifest: ReleaseManifest,
    staging: Path,
    relocate_to: Path,
    source: str,
    on_bytes: Callable[[int], None] | None = None,
) -> UnpackResult:
    """Unpack the archive the cached frames make into ``staging`` (relocated for ``relocate_to``: DEST itself
    for an install), never writing it whole (an upgrade of the
    torch box needed 2.6 GB more disk and time for that): box.json's frame is checked against the manifest
    first, and the unpack's sha256 over the frames, as it reads them, is the reassembled archive's."""
    frames = list(manifest.archive.frames or [])
    box_json = next((f for f in frames if f.name == BOX_JSON_UNIT), None)
    if box_json is None:  # every box scrollcase packs has one: an archive without box.json is never a box
        raise IntegrityError(
            f"refusing {source}: its frame table names no {BOX_JSON_UNIT} frame, so the archive "
            "has no box.json at its root; nothing was changed",
            fix="the release was not built by `scrollcase build` (or was repacked): republish it",
        )
    entry = cache.path_for(box_json.sha256)
    if not cache.intact(box_json):  # small: checked before its box.json is believed
        raise IntegrityError(
            f"the frame cache entry {entry} ({BOX_JSON_UNIT}) is not the bytes its name promises",
            fix="it was damaged on this machine: an install or upgrade fetches it again (or `scrollcase cache clean`)",
        )
    check_identity(manifest, entry)
    stream = FrameStream(cache, frames)
    info = manifest.archive
    try:
        return unpack_archive(
            Path(f"{source} (reassembled from the frame cache)"),
            staging,
            expected_size=info.size,
            expected_sha256=info.sha256,
            on_bytes=on_bytes,
            relocate_to=relocate_to,
            stream=cast("BinaryIO", stream),
        )
    finally:
        stream.close()
