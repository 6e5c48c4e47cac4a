"""Moving an installed box to another release, fetching only the frames it lacks, then swapping folders:
:func:`upgrade_box`, the library call behind ``scrollcase upgrade``.

Order of events:

1. DEST's ``box.json`` says which box, target and version it holds;
2. the release is chosen as ``install`` chooses, restricted to DEST's target;
3. the new manifest's frame table against the frame cache (:mod:`scrollcase.client.framecache`): the
   missing frames are read from the store with ranged reads, each checked against the table as it
   arrives;
4. the archive the cached frames make is unpacked into ``.<DEST>.upgrade`` beside DEST, relocated to
   DEST's path, read frame after frame from the cache (:func:`~scrollcase.client.receive.unpack_from_frames`:
   never written whole)
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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scrollcase.client.download import download_archive, locked
from scrollcase.client.framecache import FrameCache, Pruned, keep_installed, pruned_json
from scrollcase.client.install import (
    GpuCheckHook,
    Offer,
    as_store,
    check_dest_fits,
    checked_manifest,
    gpu_summary,
    quiet,
    read_offer,
    saved,
)
from scrollcase.client.preflight import check_identity
from scrollcase.client.receive import Fetched, fetch_release, unpack_healing
from scrollcase.client.select import Wanted, require_choice, select_release, semver_key
from scrollcase.client.share import NOTHING_SHARED, Shared, share_tree
from scrollcase.client.trusted import TrustedRoot, trusting
from scrollcase.errors import BuildError, IntegrityError, ScrollcaseError, UsageError, describe_path
from scrollcase.format.archive.unpack import UnpackResult, unpack_archive
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.layout import BOX_JSON
from scrollcase.format.release import ReleaseManifest
from scrollcase.host.facts import HostProbes
from scrollcase.io import files
from scrollcase.progress import Emit, MeterFactory, silent_meter
from scrollcase.store.base import ReadableStore
from scrollcase.targets.gpucheck import GpuCheckResult

NOTHING_CHANGED = "; nothing was downloaded or changed"
NOTHING_PRUNED = Pruned(0, 0)


@dataclass(frozen=True)
class Upgraded:
    """What :func:`upgrade_box` did to ``dest``: ``manifest`` is None when nothing newer was there."""

    box_id: str
    dest: Path
    store: str  # the store's URL
    from_version: str
    to_version: str
    manifest: ReleaseManifest | None = None  # the release now installed
    fetched: Fetched | None = None  # frames (or the whole archive) downloaded and their bytes
    previous: Path | None = None  # the old tree, kept for a rollback (``keep_previous``)
    files: int = 0
    gpu_check: GpuCheckResult | None = None
    cache_pruned: Pruned = NOTHING_PRUNED
    seconds: float = 0.0
    shared: Shared = NOTHING_SHARED  # the new tree's files linked to the copies installed boxes share

    @property
    def upgraded(self) -> bool:
        return self.manifest is not None

    @property
    def bytes_downloaded(self) -> int:
        """The archive bytes fetched from the store: the missing frames only (0 when nothing was newer)."""
        return self.fetched.bytes_fetched if self.fetched is not None else 0

    def to_json(self) -> dict[str, object]:
        """``scrollcase upgrade --json``'s result (docs/install.md#upgrade)."""
        data: dict[str, object] = {
            "boxId": self.box_id,
            "dest": str(self.dest),
            "from": self.from_version,
            "to": self.to_version,
            "upgraded": self.upgraded,
        }
        if self.manifest is None or self.fetched is None:
            return data
        return data | {
            "targetId": self.manifest.targetId,
            "sha256": self.manifest.archive.sha256,
            "size": self.manifest.archive.size,
            "frames": self.fetched.frames_total,
            "framesFetched": self.fetched.frames_fetched,
            "bytesDownloaded": self.bytes_downloaded,
            "previous": str(self.previous) if self.previous else None,
            "files": self.files,
            "seconds": round(self.seconds, 3),
            "cachePruned": pruned_json(self.cache_pruned),
            "shared": self.shared.to_json(),
        }


def upgrade_box(
    store: ReadableStore | str,
    dest: Path | str,
    *,
    version: str | None = None,
    pre: bool = False,
    skip_gpu_check: bool = False,
    keep_previous: bool = False,
    endpoint_url: str | None = None,
    probes: HostProbes | None = None,
    progress: Emit = quiet,
    meter: MeterFactory = silent_meter,
    on_gpu_check: GpuCheckHook | None = None,
    share: bool = True,
    trusted_root: TrustedRoot | None = None,
    trust_state: Path | str | None = None,
) -> Upgraded:
    """Move the box installed in ``dest`` to the newest release of the same box and target in ``store``
    (or to ``version``, an older one too: a rollback), as ``scrollcase upgrade`` does: only the frames
    the frame cache lacks are downloaded, the new tree is unpacked beside ``dest`` and swapped in.

    ``store``, ``probes``, ``progress``, ``meter`` and ``on_gpu_check`` are as for
    :func:`~scrollcase.client.install.install_box`; ``keep_previous`` keeps the old tree as
    ``.<DEST>.previous`` (and its frames); ``share`` links the new tree's files to the copies other boxes
    share (client/share.py) before it is swapped in.  ``trusted_root`` and ``trust_state`` as install_box's: the
    index, the new manifest and its archive's facts checked against the store's signed metadata before a
    frame is fetched.  Raises a :class:`~scrollcase.errors.ScrollcaseError`; until the final swap ``dest``
    stays the old, working install."""
    where = Path(dest).absolute()
    if recover_swap(where):
        progress(f"put back {where}: an earlier upgrade was killed while swapping folders")
    box = installed_box(where)
    wanted = Wanted(version, box.targetId, pre, skip_gpu_check)
    source = as_store(store, endpoint_url)
    url = source.url
    with trusting(source, trusted_root, trust_state, progress) as trust:
        offer = read_offer(source, box.boxId, wanted, probes or HostProbes(), progress, trust)
        found = _newer(offer, box, where, progress)
        saved(trust, progress)
    if found is None:
        return Upgraded(box.boxId, where, url, box.version, box.version)
    manifest, check = found
    (on_gpu_check or gpu_summary(progress))(check)
    check_dest_fits(where, manifest.relocation, NOTHING_CHANGED)
    progress(f"upgrading {box.boxId} in {where}: {box.version} -> {manifest.version} from {url}")
    start = time.monotonic()
    done = _upgrade(source, manifest, where, keep_previous, progress, meter, share)
    return _upgraded(box, where, url, manifest, check, done, time.monotonic() - start)


def _upgraded(
    box: BoxJson, dest: Path, url: str, manifest: ReleaseManifest, check: GpuCheckResult, done: _Done, seconds: float
) -> Upgraded:
    return Upgraded(
        box_id=box.boxId,
        dest=dest,
        store=url,
        from_version=box.version,
        to_version=manifest.version,
        manifest=manifest,
        fetched=done.fetched,
        previous=done.previous,
        files=done.files,
        gpu_check=check,
        cache_pruned=done.pruned,
        seconds=seconds,
        shared=done.shared,
    )


def _newer(offer: Offer, box: BoxJson, dest: Path, progress: Emit) -> tuple[ReleaseManifest, GpuCheckResult] | None:
    """The release to move ``dest`` to, its manifest checked and its GPU check passed; None when it holds it."""
    wanted = offer.wanted
    chosen = require_choice(select_release(offer.index, offer.host, wanted), offer.index, wanted, offer.store.url)
    newest = wanted.version is None and semver_key(chosen.version) <= semver_key(box.version)
    if chosen.version == box.version or newest:
        return None
    check_dest_fits(dest, chosen.entry.relocation, NOTHING_CHANGED)
    return checked_manifest(offer, chosen, progress)


@dataclass(frozen=True)
class _Done:
    fetched: Fetched
    previous: Path | None
    files: int
    pruned: Pruned
    shared: Shared


def _upgrade(
    store: ReadableStore,
    manifest: ReleaseManifest,
    dest: Path,
    keep_previous: bool,
    progress: Emit,
    meter: MeterFactory,
    share: bool = True,
) -> _Done:
    """Fetch, unpack beside ``dest``, swap in, keep the frames: one upgrade of ``dest`` at a time."""
    cache = FrameCache.default()
    with upgrading(dest) as sib:
        clear_staging(sib)
        fetched = _fetch(store, manifest, cache, progress, meter)
        try:
            result, fetched = _unpack(store, fetched, manifest, cache, sib.staging, dest, progress, meter)
        except IntegrityError:
            progress("nothing was changed in DEST")
            raise
        finally:
            if fetched.archive is not None:
                fetched.archive.unlink(missing_ok=True)
        shared = share_tree(sib.staging, dest) if share else NOTHING_SHARED
        progress(shared.summary() if share else "files not shared (--no-share)")
        old_frames = cache.pinned(dest)
        previous = swap_in(Siblings(dest), keep_previous)
        pruned = _keep_frames(cache, manifest, dest, previous, old_frames)
    return _Done(fetched, previous, result.files, pruned, shared)


def _unpack(
    store: ReadableStore,
    fetched: Fetched,
    manifest: ReleaseManifest,
    cache: FrameCache,
    staging: Path,
    dest: Path,
    progress: Emit,
    meter: MeterFactory,
) -> tuple[UnpackResult, Fetched]:
    """Into ``staging``, relocated to ``dest``: streamed from the frame cache (healed once when a cached
    frame turns out damaged: :func:`~scrollcase.client.receive.unpack_healing`), or the whole archive downloaded."""
    if fetched.archive is None:
        return unpack_healing(store, fetched, manifest, cache, staging, dest, progress, meter)
    check_identity(manifest, fetched.archive)
    info = manifest.archive
    bar = meter("unpacking", info.size)
    result = unpack_archive(
        fetched.archive, staging, expected_size=info.size, expected_sha256=info.sha256, on_bytes=bar, relocate_to=dest
    )
    bar.finish()
    return result, fetched


def _fetch(
    store: ReadableStore, manifest: ReleaseManifest, cache: FrameCache, progress: Emit, meter: MeterFactory
) -> Fetched:
    info = manifest.archive
    if not info.frames:  # an archive without a frame table: the whole archive, as install fetches it
        download = download_archive(store, manifest.keys.archive, size=info.size, sha256=info.sha256, meter=meter)
        return Fetched(download.path, 1, 0 if download.cached else 1, download.downloaded)
    try:
        return fetch_release(store, manifest, info.frames, cache, meter=meter)
    except IntegrityError:
        progress("nothing was changed in DEST")
        raise


def _keep_frames(
    cache: FrameCache, manifest: ReleaseManifest, dest: Path, previous: Path | None, old_frames: tuple[str, ...]
) -> Pruned:
    """Pin the new release's frames for DEST (and the old one's for a kept previous tree), prune the rest:
    the frames only the replaced release used leave the cache, unless that release is kept for a rollback."""
    frames = manifest.archive.frames
    if not frames:
        return NOTHING_PRUNED
    kept = (previous, old_frames) if previous is not None else None
    return keep_installed(cache, dest, frames, kept)


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
    with locked(sib.lock, f"is upgrading {describe_path(dest) or dest}"):
        yield sib


def swap_in(sib: Siblings, keep_previous: bool) -> Path | None:
    """Make the unpacked staging tree DEST, the old DEST ``.previous`` (deleted unless kept).  A previous
    that is a dangling link (a DEST that was a link, kept, its folder deleted since) is removed too: the
    rename of DEST onto it would fail with ENOTDIR, every time."""
    if sib.previous.exists() or sib.previous.is_symlink():
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
