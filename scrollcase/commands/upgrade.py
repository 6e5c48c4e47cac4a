"""``scrollcase upgrade --store STORE DEST [--version V]``: move an installed box to another release,
downloading only the frames that changed (:mod:`scrollcase.client.upgrade`)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from scrollcase.client.download import download_archive
from scrollcase.client.framecache import FrameCache, Pruned, keep_installed, pruned_json
from scrollcase.client.install import check_dest_fits, checked_manifest
from scrollcase.client.preflight import check_identity
from scrollcase.client.select import Candidate, require_choice, select_release, semver_key
from scrollcase.client.upgrade import (
    Fetched,
    Siblings,
    clear_staging,
    fetch_release,
    installed_box,
    recover_swap,
    swap_in,
    unpack_from_frames,
    upgrading,
)
from scrollcase.commands import ReleaseArgs, SubParsers, add_command, handler, offer_for, report_gpu
from scrollcase.console import Console
from scrollcase.errors import IntegrityError
from scrollcase.format.archive.unpack import UnpackResult, unpack_archive
from scrollcase.format.boxjson import BoxJson
from scrollcase.format.release import ReleaseManifest
from scrollcase.host.facts import HostProbes
from scrollcase.progress import ByteMeter
from scrollcase.store.base import ReadableStore

NAME = "upgrade"
HELP = "upgrade an installed box, downloading only what changed"

DESCRIPTION = """\
Move the box installed in DEST to the newest release of the same box and target in STORE (or to
--version V, older ones too: that is how a host rolls back).  Only the archive frames missing from the
frame cache ($SCROLLCASE_CACHE_DIR/frames, filled by install and upgrade) are downloaded, each checked
against the release manifest's frame table; the archive the frames make is unpacked beside DEST, its
sha256 checked as it is read from the frame cache, and swapped in.  DEST stays the old, working install
until the new one is complete.
"""


@dataclass(frozen=True)
class UpgradeArgs(ReleaseArgs):
    dest: Path
    keep_previous: bool


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION, raw=True)
    p.add_argument("dest", metavar="DEST", type=Path, help="the installed box's folder")
    p.add_argument("--store", metavar="STORE", default=None, help="directory, s3:// or http(s):// ($SCROLLCASE_STORE)")
    p.add_argument("--version", metavar="V", default=None, help="this version (older too: a rollback)")
    p.add_argument("--pre", action="store_true", help="consider pre-releases too")
    p.add_argument("--endpoint-url", default=None, help="S3-compatible endpoint (default: AWS)")
    p.add_argument("--skip-gpu-check", action="store_true", help="do not ask nvidia-smi (prints a warning)")
    p.add_argument(
        "--keep-previous", action="store_true", help="keep the old tree as .DEST.previous and its frames (rollback)"
    )
    p.set_defaults(handler=handler(UpgradeArgs, run))


def run(args: UpgradeArgs, console: Console, probes: HostProbes | None = None) -> int:
    dest: Path = args.dest.absolute()
    if recover_swap(dest):
        console.progress(f"put back {dest}: an earlier upgrade was killed while swapping folders")
    box = installed_box(dest)
    offer = offer_for(args, box.boxId, box.targetId, console, probes)
    store = offer.store
    chosen = require_choice(select_release(offer.index, offer.host, offer.wanted), offer.index, offer.wanted, store.url)
    if chosen.version == box.version or (args.version is None and not _newer(chosen, box)):
        data = {"boxId": box.boxId, "dest": str(dest), "from": box.version, "to": box.version, "upgraded": False}
        console.result(data, f"{box.boxId} in {dest} is at {box.version}: nothing newer in {store.url}")
        return 0
    check_dest_fits(dest, chosen.entry.relocation, "; nothing was downloaded or changed")
    manifest, check = checked_manifest(offer, chosen, console.progress)
    report_gpu(console, check)
    check_dest_fits(dest, manifest.relocation, "; nothing was downloaded or changed")
    return _upgrade(args, console, store, manifest, box, dest)


def _newer(chosen: Candidate, box: BoxJson) -> bool:
    return semver_key(chosen.version) > semver_key(box.version)


def _upgrade(
    args: UpgradeArgs,
    console: Console,
    store: ReadableStore,
    manifest: ReleaseManifest,
    box: BoxJson,
    dest: Path,
) -> int:
    console.progress(f"upgrading {box.boxId} in {dest}: {box.version} -> {manifest.version} from {store.url}")
    start = time.monotonic()
    with upgrading(dest) as sib:
        clear_staging(sib)
        fetched = _fetch(store, manifest, console)
        meter = console.meter("unpacking", manifest.archive.size)
        try:
            result = _unpack(fetched, manifest, sib.staging, dest, store.url_for(manifest.keys.archive), meter)
        except IntegrityError:
            console.progress("nothing was changed in DEST")
            raise
        finally:
            if fetched.archive is not None:
                fetched.archive.unlink(missing_ok=True)
        meter.finish()
        old_frames = FrameCache.default().pinned(dest)
        previous = swap_in(Siblings(dest), args.keep_previous)
        pruned = _keep_frames(manifest, dest, previous, old_frames)
    data = _json(manifest, box, dest, fetched, previous, result.files, time.monotonic() - start)
    data["cachePruned"] = pruned_json(pruned)
    console.result(data, _render(data))
    return 0


def _unpack(
    fetched: Fetched, manifest: ReleaseManifest, staging: Path, dest: Path, source: str, meter: ByteMeter
) -> UnpackResult:
    """Into ``staging``, relocated to ``dest``: streamed from the frame cache, or the whole archive downloaded."""
    if fetched.archive is None:
        return unpack_from_frames(FrameCache.default(), manifest, staging, dest, source, on_bytes=meter)
    check_identity(manifest, fetched.archive)
    info = manifest.archive
    return unpack_archive(
        fetched.archive, staging, expected_size=info.size, expected_sha256=info.sha256, on_bytes=meter, relocate_to=dest
    )


def _fetch(store: ReadableStore, manifest: ReleaseManifest, console: Console) -> Fetched:
    frames = manifest.archive.frames
    info = manifest.archive
    if not frames:  # an archive without a frame table: the whole archive, as install fetches it
        download = download_archive(
            store, manifest.keys.archive, size=info.size, sha256=info.sha256, meter=console.meter
        )
        return Fetched(download.path, 1, 0 if download.cached else 1, download.downloaded)
    try:
        return fetch_release(store, manifest, frames, FrameCache.default(), meter=console.meter)
    except IntegrityError:
        console.progress("nothing was changed in DEST")
        raise


def _keep_frames(manifest: ReleaseManifest, dest: Path, previous: Path | None, old_frames: tuple[str, ...]) -> Pruned:
    """Pin the new release's frames for DEST (and the old one's for a kept previous tree), prune the rest:
    the frames only the replaced release used leave the cache, unless that release is kept for a rollback."""
    frames = manifest.archive.frames
    if not frames:
        return Pruned(0, 0)
    kept = (previous, old_frames) if previous is not None else None
    return keep_installed(FrameCache.default(), dest, frames, kept)


def _json(
    manifest: ReleaseManifest,
    box: BoxJson,
    dest: Path,
    fetched: Fetched,
    previous: Path | None,
    files: int,
    seconds: float,
) -> dict[str, object]:
    return {
        "boxId": manifest.boxId,
        "dest": str(dest),
        "from": box.version,
        "to": manifest.version,
        "upgraded": True,
        "targetId": manifest.targetId,
        "sha256": manifest.archive.sha256,
        "size": manifest.archive.size,
        "frames": fetched.frames_total,
        "framesFetched": fetched.frames_fetched,
        "bytesDownloaded": fetched.bytes_fetched,
        "previous": str(previous) if previous else None,
        "files": files,
        "seconds": round(seconds, 3),
    }


def _render(data: dict[str, object]) -> str:
    return (
        f"upgraded {data['boxId']} in {data['dest']} from {data['from']} to {data['to']} in {data['seconds']}s: "
        f"downloaded {data['bytesDownloaded']} of {data['size']} bytes ({data['framesFetched']} of "
        f"{data['frames']} frames); sha256 {data['sha256']} verified"
        + (f"; the old tree is kept in {data['previous']}" if data["previous"] else "")
    )
