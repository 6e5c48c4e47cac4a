"""Moving an installed box to another release, fetching only the frames it lacks, then swapping folders.

Order of events (``scrollcase upgrade``, :mod:`scrollcase.commands.upgrade`):

1. DEST's ``box.json`` says which box, target and version it holds;
2. the release is chosen as ``install`` chooses, restricted to DEST's target;
3. the new manifest's frame table against the frame cache (:mod:`scrollcase.client.framecache`): the
   missing frames are read from the store with ranged reads, each checked against the table as it
   arrives;
4. the archive the cached frames make is unpacked into ``.<DEST>.upgrade`` beside DEST, relocated to
   DEST's path, read frame after frame from the cache (:func:`unpack_from_frames`: never written whole)
   and its whole sha256 checked as it is read;
5. the swap: DEST becomes ``.<DEST>.previous``, the new tree becomes DEST (two renames on one file
   system); the previous tree is deleted unless it is kept for a rollback;
6. the new release's frames are pinned for DEST and the frame cache pruned
   (:func:`~scrollcase.client.framecache.keep_installed`).

Until step 5 DEST is untouched, so an upgrade that fails or is killed leaves the old install working;
a rerun finds the frames already fetched in the cache.  A kill between the two renames of step 5 leaves
no DEST but a complete ``.<DEST>.previous``: :func:`recover_swap` (run first by every upgrade) puts it back.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from scrollcase.client.download import locked
from scrollcase.client.framecache import FrameCache, FrameStream, fetch_frames
from scrollcase.client.preflight import check_identity
from scrollcase.errors import BuildError, ScrollcaseError, UsageError, describe_path
from scrollcase.format.archive.units import BOX_JSON_UNIT
from scrollcase.format.archive.unpack import UnpackResult, unpack_archive
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.layout import BOX_JSON
from scrollcase.format.release import ArchiveFrame, ReleaseManifest
from scrollcase.io import files
from scrollcase.progress import MeterFactory, silent_meter
from scrollcase.store.base import ReadableStore


@dataclass(frozen=True)
class Siblings:
    """The folders an upgrade of ``dest`` uses beside it (same file system: the renames are atomic)."""

    dest: Path

    @property
    def staging(self) -> Path:
        return self.dest.with_name(f".{self.dest.name}.upgrade")

    @property
    def previous(self) -> Path:
        return self.dest.with_name(f".{self.dest.name}.previous")

    @property
    def lock(self) -> Path:
        return self.dest.with_name(f".{self.dest.name}.upgrade.lock")


def installed_box(dest: Path) -> BoxJson:
    """What DEST holds, from its box.json; UsageError when DEST is no installed box."""
    path = dest / BOX_JSON
    if not path.is_file():
        raise UsageError(
            f"cannot upgrade {describe_path(dest)}: it holds no {BOX_JSON} (not an installed box)",
            fix="pass the folder `scrollcase install` or `scrollcase unpack` created",
        )
    return parse_box_json(path.read_bytes(), file=describe_path(path) or str(path))


def recover_swap(dest: Path) -> bool:
    """Put back the previous tree when a swap was killed between its two renames; whether it did."""
    return files.recover_swap(dest, Siblings(dest).previous, BOX_JSON)


@contextmanager
def upgrading(dest: Path) -> Iterator[Siblings]:
    """One upgrade of ``dest`` at a time (a lock beside it, taken over from a killed run)."""
    sib = Siblings(dest)
    with locked(sib.lock):
        yield sib


@dataclass(frozen=True)
class Fetched:
    archive: Path | None  # the whole archive, for a release without a frame table; else the frames are cached
    frames_total: int
    frames_fetched: int
    bytes_fetched: int


def fetch_release(
    store: ReadableStore,
    manifest: ReleaseManifest,
    frames: list[ArchiveFrame],
    cache: FrameCache,
    meter: MeterFactory = silent_meter,
) -> Fetched:
    """Every frame of the new release in the cache: the missing ones fetched, each checked as it arrives."""
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
    """Unpack the archive the cached frames make into ``staging``, never writing it whole (an upgrade of the
    torch box needed 2.6 GB more disk and time for that): box.json's frame is checked against the manifest
    first, and the unpack's sha256 over the frames, as it reads them, is the reassembled archive's."""
    frames = list(manifest.archive.frames or [])
    box_json = next((f for f in frames if f.name == BOX_JSON_UNIT), None)
    if box_json is not None:
        check_identity(manifest, cache.path_for(box_json.sha256))
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


def swap_in(sib: Siblings, keep_previous: bool) -> Path | None:
    """Make the unpacked staging tree DEST, the old DEST ``.previous`` (deleted unless kept)."""
    if sib.previous.exists():
        _discard(sib.previous)
    try:
        files.swap_dir(sib.staging, sib.dest, sib.previous)
    except OSError as exc:
        raise BuildError(
            f"cannot swap {describe_path(sib.staging)} into {describe_path(sib.dest)}: {exc.strerror}",
            fix="check the folder's permissions; the old install is in place",
        ) from None
    if keep_previous:
        return sib.previous
    _discard(sib.previous, ignore_errors=True)
    return None


def _discard(tree: Path, *, ignore_errors: bool = False) -> None:
    """Remove a folder tree, or only the link where one stands (a DEST that was a symlink): rmtree refuses
    a link, or follows a dangling one into ENOENT, and the folder a link names is not the upgrade's to delete."""
    if tree.is_symlink():
        tree.unlink()
    else:
        shutil.rmtree(tree, ignore_errors=ignore_errors)


def clear_staging(sib: Siblings) -> None:
    """Remove what an interrupted upgrade left in the staging folder (this run holds the lock)."""
    if sib.staging.exists() or sib.staging.is_symlink():
        try:
            _discard(sib.staging)
        except OSError as exc:
            raise ScrollcaseError(
                f"cannot remove {describe_path(sib.staging)} left by an interrupted upgrade: {exc.strerror}",
                fix="delete it by hand and rerun",
            ) from None
