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
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from scrollcase.client.download import Cancelled, Download, Follower, cache_paths, download_archive
from scrollcase.client.framecache import FrameCache, check_table, fill_from_archive, unpack_keeping_frames
from scrollcase.client.preflight import check_identity
from scrollcase.errors import ScrollcaseError
from scrollcase.format.archive.unpack import UnpackResult, unpack_archive
from scrollcase.format.release import ReleaseManifest
from scrollcase.progress import MeterFactory, silent_meter
from scrollcase.store.base import ReadableStore


@dataclass(frozen=True)
class Received:
    download: Download
    unpacked: UnpackResult


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
