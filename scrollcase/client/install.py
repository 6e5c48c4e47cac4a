"""The reads an installer makes before it downloads an archive: the box index, this machine, the
release manifest — each checked against the others, so a store whose files disagree is refused early.

``scrollcase install`` and ``upgrade`` (:mod:`scrollcase.commands.install`, :mod:`scrollcase.commands.upgrade`)
string these together with :func:`~scrollcase.client.select.select_release`,
:func:`~scrollcase.client.download.download_archive` and
:func:`~scrollcase.format.archive.unpack.unpack_archive`; a host app can do the same from Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scrollcase.client.preflight import refuse, release_gpu_check
from scrollcase.client.select import Candidate, HostView, Wanted
from scrollcase.errors import IntegrityError, Problem, StoreError
from scrollcase.format.archive.unpack import absolute_as_given
from scrollcase.format.release import ReleaseManifest, ReleaseRelocation, parse_release
from scrollcase.format.relocate import check_dest_length, prefix_text
from scrollcase.host.facts import HostProbes
from scrollcase.io.digest import sha256_bytes
from scrollcase.progress import Emit, waiting
from scrollcase.store.base import ReadableStore
from scrollcase.store.index import BoxIndex, check_index_box, index_key, parse_index
from scrollcase.targets.gpucheck import GpuCheckResult
from scrollcase.targets.hostgpu import GpuFacts, gather_gpus


@dataclass(frozen=True)
class Offer:
    """One box's releases in a store, this machine as they are chosen for, and what the command line wants."""

    store: ReadableStore
    box_id: str
    index: BoxIndex
    host: HostView
    wanted: Wanted


def read_offer(store: ReadableStore, box_id: str, wanted: Wanted, probes: HostProbes, progress: Emit) -> Offer:
    """The store's index of ``box_id`` and the facts of this machine that choosing among it needs."""
    with waiting(progress, store.url):
        index = read_box_index(store, box_id)
    host = host_view(probes, needs_gpus(index, wanted.skip_gpu_check))
    return Offer(store, box_id, index, host, wanted)


def checked_manifest(offer: Offer, chosen: Candidate, progress: Emit) -> tuple[ReleaseManifest, GpuCheckResult]:
    """The chosen release's manifest once this machine passed its GPU check (HostError, said before a byte
    of the archive is downloaded, otherwise): on the manifest, with the GPUs the selection already saw."""
    store = offer.store
    with waiting(progress, store.url):
        manifest = fetch_manifest(store, offer.box_id, chosen)
    url = store.url_for(chosen.entry.release)
    check = release_gpu_check(manifest, offer.host.gpus, offer.wanted.skip_gpu_check, url)
    if check.errors:
        raise refuse(manifest, check, "downloaded", "another target (--target)")
    return manifest, check


def read_box_index(store: ReadableStore, box_id: str) -> BoxIndex:
    """``boxes/<box_id>/index.json``; StoreError when the store has none (or another box's)."""
    key = index_key(box_id)
    blob = store.get_bytes(key)
    if blob is None:
        raise StoreError(
            f"{store.url} has no box {box_id!r}: {store.url_for(key)} does not exist",
            fix="check --store (the folder or prefix that holds boxes/) and --box; `scrollcase publish` "
            "writes the index",
        )
    index = parse_index(blob.data, store.url_for(key))
    check_index_box(index, box_id, store.url_for(key))
    return index


def needs_gpus(index: BoxIndex, skip_gpu_check: bool) -> bool:
    """Whether nvidia-smi must be asked: some release is a CUDA box and the check is not skipped."""
    entries = (entry for targets in index.versions.values() for entry in targets.values())
    return not skip_gpu_check and any(entry.target.accelerator == "cuda" for entry in entries)


def host_view(probes: HostProbes, ask_gpus: bool) -> HostView:
    """This machine's platform, arch and (only when ``ask_gpus``) NVIDIA GPUs and driver."""
    plat, arch = probes.platform()
    return HostView(plat, arch, gather_gpus(probes) if ask_gpus else GpuFacts())


def fetch_manifest(store: ReadableStore, box_id: str, candidate: Candidate) -> ReleaseManifest:
    """The chosen release's manifest; IntegrityError when it is not the release the index describes."""
    entry = candidate.entry
    url = store.url_for(entry.release)
    blob = store.get_bytes(entry.release)
    if blob is None:
        raise StoreError(
            f"{url} does not exist, although the index lists {candidate.version} {entry.targetId}",
            fix="republish the release (the index entry is dangling), or pick another with --version/--target",
        )
    manifest = parse_release(blob.data, file=url)
    wanted: dict[str, object] = {
        "boxId": box_id,
        "version": candidate.version,
        "targetId": entry.targetId,
        "archive.sha256": entry.sha256,
        "archive.size": entry.size,
        "keys.archive": entry.archive,
    }
    found: dict[str, object] = {
        "boxId": manifest.boxId,
        "version": manifest.version,
        "targetId": manifest.targetId,
        "archive.sha256": manifest.archive.sha256,
        "archive.size": manifest.archive.size,
        "keys.archive": manifest.keys.archive,
    }
    if entry.relocation is not None:  # the DEST limit the install already checked must be the manifest's
        wanted["relocation"], found["relocation"] = entry.relocation, manifest.relocation
    problems = [
        Problem(message="the release manifest and the box index disagree", file=url, key=key, value=f"{found[key]!r}")
        for key in wanted
        if found[key] != wanted[key]
    ]
    if problems:
        raise IntegrityError(
            f"refusing {url}: it is not the release the index lists ({candidate.version} {entry.targetId}, "
            f"sha256 {entry.sha256}); nothing was downloaded",
            problems=problems,
            fix="the store's index and release manifest disagree: republish the release, or use another store",
        )
    check_release_digest(blob.data, url, candidate)  # after the fields: a differing field says more
    return manifest


def check_release_digest(data: bytes, url: str, candidate: Candidate) -> None:
    """IntegrityError when the manifest's bytes are not those whose sha256 the index records (the index's
    link of the digest chain: index -> release manifest -> archive and SBOM -> box.json -> each file)."""
    want = candidate.entry.releaseSha256
    found = sha256_bytes(data)
    if want is not None and found != want:
        raise IntegrityError(
            f"refusing {url}: its sha256 is {found}, but the index lists the release manifest of "
            f"{candidate.version} {candidate.entry.targetId} with sha256 {want}; nothing was downloaded",
            problems=[Problem(message="the release manifest's sha256 differs from the index's", file=url)],
            fix="the store's index and release manifest disagree: republish the release, or use another store",
        )


def check_dest_fits(dest: Path, relocation: ReleaseRelocation | None, nothing_done: str) -> None:
    """BuildError (exit 5, as relocation itself refuses) when DEST is longer than the release allows: checked
    from the index entry or the manifest, before anything is downloaded or extracted.  No limit, or an older
    release without the field: nothing to check here (relocation checks box.json's after extracting)."""
    if relocation is None or relocation.maxDestBytes is None:
        return
    try:
        final = absolute_as_given(dest)  # the path relocation will write
    except (OSError, RuntimeError):
        return  # a DEST that cannot be resolved: the unpack's own check says why
    check_dest_length(prefix_text(final), relocation.maxDestBytes, nothing_done=nothing_done)
