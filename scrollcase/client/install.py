"""Installing a box from a store: :func:`install_box`, the library call behind ``scrollcase install``.

Before a byte of the archive is downloaded it reads the box index, this machine and the release manifest,
each checked against the others (a store whose files disagree is refused early), chooses the release
(:func:`~scrollcase.client.select.select_release`) and runs the GPU check; then the archive is received
(:func:`~scrollcase.client.receive.receive`: the frames this machine already holds, from any installed release
of any box, reused and the rest read by range; or the whole archive downloaded, unpacked and its frames kept
side by side).  :func:`~scrollcase.client.receive.plan_receive` says what that costs before it starts.
DEST appears only when every check passed: any ScrollcaseError leaves it as it was.  ``upgrade_box``
(:mod:`scrollcase.client.upgrade`) shares the reads.  Nothing here prints: progress goes to the callbacks
the caller passes (the CLI's console, a host app's logger).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from scrollcase.client.download import Download, cache_paths
from scrollcase.client.framecache import FrameCache, Pruned, keep_installed, pruned_json
from scrollcase.client.preflight import refuse, release_gpu_check
from scrollcase.client.receive import Fetched, Figures, plan_receive, receive
from scrollcase.client.select import Candidate, HostView, Selection, Wanted, require_choice, select_release
from scrollcase.client.share import NOTHING_SHARED, Shared, share_tree
from scrollcase.client.trusted import TrustedRoot, check_signed_archive, trusting
from scrollcase.errors import IntegrityError, Problem, ScrollcaseError, StoreError, TrustError
from scrollcase.format.archive.unpack import UnpackResult, absolute_as_given, prepare_dest
from scrollcase.format.release import ReleaseManifest, ReleaseRelocation, parse_release
from scrollcase.format.relocate import check_dest_length, prefix_text
from scrollcase.host.facts import HostProbes
from scrollcase.io.digest import sha256_bytes
from scrollcase.progress import Emit, MeterFactory, silent_meter, waiting
from scrollcase.store.base import Blob, ReadableStore
from scrollcase.store.factory import open_read_store
from scrollcase.store.index import BoxIndex, check_index_box, index_key, parse_index
from scrollcase.targets.base import Accelerator
from scrollcase.targets.gpucheck import GpuCheckResult
from scrollcase.targets.hostgpu import GpuFacts
from scrollcase.targets.registry import accelerator
from scrollcase.trust.verify import StoreTrust

GpuCheckHook = Callable[[GpuCheckResult], None]
NOTHING_DOWNLOADED = "; nothing was downloaded"


def quiet(_: str) -> None:
    """The default ``progress``: a library call prints nothing."""


@dataclass(frozen=True)
class Installed:
    """What :func:`install_box` installed into ``dest``, and how it got there."""

    manifest: ReleaseManifest  # the release installed: boxId, version, targetId, archive size and sha256
    store: str  # the store's URL
    archive: str  # the archive's URL
    dest: Path
    download: Download | None  # the whole archive: bytes downloaded, resumed from, from the download cache
    kept_download: bool  # the checked archive stays in the download cache (``download.path``)
    unpacked: UnpackResult
    gpu_check: GpuCheckResult
    cache_pruned: Pruned  # frames no installed box uses any more, removed from the frame cache
    seconds: float
    plan: Figures  # what the install was to download and add to the disk, said before it fetched a byte
    fetched: Fetched | None = None  # the frames fetched, when the others came from the frame cache
    shared: Shared = NOTHING_SHARED  # the files linked to the copies installed boxes share (client/share.py)

    @property
    def bytes_downloaded(self) -> int:
        """Archive bytes fetched from the store (the missing frames, or the whole archive)."""
        frames = self.fetched.bytes_fetched if self.fetched else 0
        return frames + (self.download.downloaded if self.download else 0)

    def to_json(self) -> dict[str, object]:
        """``scrollcase install --json``'s result (docs/install.md#output)."""
        manifest, download, unpacked = self.manifest, self.download, self.unpacked
        return {
            "boxId": manifest.boxId,
            "version": manifest.version,
            "targetId": manifest.targetId,
            "store": self.store,
            "archive": self.archive,
            "sha256": manifest.archive.sha256,
            "size": manifest.archive.size,
            "bytesDownloaded": self.bytes_downloaded,
            "resumedFrom": download.resumed_from if download else 0,
            "fromCache": download.cached if download else False,
            "cachedArchive": str(download.path) if download and self.kept_download else None,
            "framesFetched": self.fetched.frames_fetched if self.fetched else None,
            "plan": self.plan.to_json(),
            "shared": self.shared.to_json(),
            "dest": str(unpacked.dest),
            "files": unpacked.files,
            "uncompressedBytes": unpacked.uncompressed_bytes,
            "relocatedFiles": unpacked.relocated_files,
            "seconds": round(self.seconds, 3),
            "gpuCheck": self.gpu_check.to_json(),
            "cachePruned": pruned_json(self.cache_pruned),
        }


def install_box(
    store: ReadableStore | str,
    box_id: str,
    dest: Path | str,
    *,
    version: str | None = None,
    target: str | None = None,
    pre: bool = False,
    skip_gpu_check: bool = False,
    keep_download: bool = False,
    endpoint_url: str | None = None,
    probes: HostProbes | None = None,
    progress: Emit = quiet,
    meter: MeterFactory = silent_meter,
    on_gpu_check: GpuCheckHook | None = None,
    share: bool = True,
    trusted_root: TrustedRoot | None = None,
    trust_state: Path | str | None = None,
) -> Installed:
    """Install the release of ``box_id`` in ``store`` that fits this machine into ``dest`` (a new or empty
    folder), as ``scrollcase install`` does.

    ``store`` is a :class:`~scrollcase.store.base.ReadableStore` or what ``--store`` takes (a folder,
    ``s3://bucket/prefix`` with ``endpoint_url`` for MinIO/R2/SeaweedFS, ``http(s)://``).  ``version``,
    ``target``, ``pre`` and ``skip_gpu_check`` choose as install's options do; ``probes`` are this
    machine's facts (injected: a fake platform or GPU probe in tests).  ``progress`` gets one line per
    step, ``meter`` a byte meter per transfer, ``on_gpu_check`` the GPU check's result before anything is
    downloaded (default: its summary through ``progress``).  Raises a
    :class:`~scrollcase.errors.ScrollcaseError` (nothing fits, a refused GPU check, a tampered archive, a
    store error…), leaving ``dest`` as it was.  ``share``: link the files this box has in common with the
    boxes installed before it to one stored copy (client/share.py); False keeps every file its own.

    ``trusted_root``: the store's TUF root (bytes, or its file) shipped with the host app: the index, the
    manifest and the archive's size and sha256 are then checked against the store's signed metadata before
    the archive is downloaded (a :class:`~scrollcase.errors.TrustError`, exit 13, otherwise; ``trust_state``
    is the folder of what this host trusts, default one per store in the user cache).  Without it a warning
    goes to ``progress``."""
    where = Path(dest)
    prepare_dest(where)
    wanted = Wanted(version, target, pre, skip_gpu_check)
    source = as_store(store, endpoint_url)
    with trusting(source, trusted_root, trust_state, progress) as trust:
        offer = read_offer(source, box_id, wanted, probes or HostProbes(), progress, trust)
        chosen = require_choice(select_release(offer.index, offer.host, wanted), offer.index, wanted, source.url)
        check_dest_fits(where, chosen.entry.relocation, NOTHING_DOWNLOADED)
        manifest, check = checked_manifest(offer, chosen, progress)
        saved(trust, progress)
    (on_gpu_check or gpu_summary(progress))(check)
    check_dest_fits(where, manifest.relocation, NOTHING_DOWNLOADED)
    installed = _receive(offer.store, manifest, chosen, where, check, keep_download, share, progress, meter)
    shared = share_tree(where, where) if share else NOTHING_SHARED
    progress(shared.summary() if share else "files not shared (--no-share)")
    return replace(installed, shared=shared)


def _receive(
    store: ReadableStore,
    manifest: ReleaseManifest,
    chosen: Candidate,
    dest: Path,
    check: GpuCheckResult,
    keep_download: bool,
    share: bool,
    progress: Emit,
    meter: MeterFactory,
) -> Installed:
    """The chosen release received into ``dest`` (the frames this machine holds reused) and its frames
    pinned for it (for ``upgrade_box``, and for the next box that shares them)."""
    info = manifest.archive
    progress(f"installing {manifest.boxId} {manifest.version} ({manifest.targetId}) from {store.url}")
    start = time.monotonic()
    cache = FrameCache.default()
    source = store.url_for(chosen.entry.release)
    plan = plan_receive(info, cache, whole=keep_download, shared=share)
    progress(describe_plan(plan))
    try:
        received = receive(store, manifest, dest, cache, plan, source, meter=meter, progress=progress)
    except IntegrityError:
        cache_paths(info.sha256).complete.unlink(missing_ok=True)  # a bad archive must not be reused from the cache
        raise
    if received.download is not None and not keep_download:
        received.download.path.unlink(missing_ok=True)
    pruned = keep_installed(cache, dest, info.frames) if info.frames else Pruned(0, 0)
    archive = store.url_for(manifest.keys.archive)
    return Installed(
        manifest=manifest,
        store=store.url,
        archive=archive,
        dest=dest,
        download=received.download,
        kept_download=keep_download,
        unpacked=received.unpacked,
        gpu_check=check,
        cache_pruned=pruned,
        seconds=time.monotonic() - start,
        plan=plan,
        fetched=received.fetched,
    )


def describe_plan(plan: Figures) -> str:
    """The figures as one progress line, said before a byte of the archive is fetched."""
    disk = f"{plan.disk_bytes} bytes" if plan.disk_bytes is not None else "an unknown number of bytes"
    if plan.how == "frames":
        how = (
            f"{plan.frames_missing} of {plan.frames} frames ({plan.download_bytes} bytes); "
            f"{plan.reused_bytes} bytes of frames this machine holds reused"
        )
    elif plan.how == "cached-archive":
        how = "nothing: the archive is in the download cache"
    else:
        how = f"the whole archive ({plan.download_bytes} bytes)"
    return f"will download {how}; the tree adds {disk} to the disk"


@dataclass(frozen=True)
class Listing:
    """What ``scrollcase install --list`` shows: every release of a box and whether it fits this machine."""

    store: str  # the store's URL
    box_id: str
    host: HostView
    selection: Selection
    plan: Figures | None = None  # what installing ``selection.chosen`` would download and add to the disk


def list_releases(
    store: ReadableStore | str,
    box_id: str,
    *,
    version: str | None = None,
    target: str | None = None,
    pre: bool = False,
    skip_gpu_check: bool = False,
    endpoint_url: str | None = None,
    probes: HostProbes | None = None,
    progress: Emit = quiet,
    share: bool = True,
    trusted_root: TrustedRoot | None = None,
    trust_state: Path | str | None = None,
) -> Listing:
    """Every release of ``box_id`` in ``store``, best first, each with whether it fits this machine and why
    not; the one :func:`install_box` would choose with the same arguments is ``selection.chosen``, and
    ``plan`` what installing it would download and add to the disk (from its manifest and this machine's frame
    cache; None when nothing fits, or its manifest cannot be read: the reason goes to ``progress``).  ``share``
    as install_box's: the disk figure counts only the files no installed box already holds; ``trusted_root`` and
    ``trust_state`` as install_box's (the index and the chosen manifest checked against the signed metadata)."""
    wanted = Wanted(version, target, pre, skip_gpu_check)
    source = as_store(store, endpoint_url)
    with trusting(source, trusted_root, trust_state, progress) as trust:
        offer = read_offer(source, box_id, wanted, probes or HostProbes(), progress, trust)
        selection = select_release(offer.index, offer.host, wanted)
        plan = chosen_plan(offer, selection.chosen, progress, share)
        saved(trust, progress)
    return Listing(source.url, box_id, offer.host, selection, plan)


def saved(trust: StoreTrust | None, progress: Emit) -> None:
    """Every signed check passed: the trusted state advances to the metadata just checked."""
    if trust is not None and not trust.commit():
        progress(f"warning: the trusted state {trust.state} was not updated (another scrollcase swapped it now)")


def chosen_plan(offer: Offer, chosen: Candidate | None, progress: Emit, share: bool = True) -> Figures | None:
    """What installing ``chosen`` would cost (its manifest read, checked against the index; no archive byte)."""
    if chosen is None:
        return None
    try:
        with waiting(progress, offer.store.url):
            manifest = fetch_manifest(offer.store, offer.box_id, chosen, offer.trust)
    except TrustError:
        raise  # a refusal of the signed metadata is no missing figure: nothing is trusted
    except ScrollcaseError as exc:
        progress(f"warning: no download figures for {chosen.version} {chosen.target_id}: {exc.message}")
        return None
    return plan_receive(manifest.archive, FrameCache.default(), shared=share)


def as_store(store: ReadableStore | str, endpoint_url: str | None) -> ReadableStore:
    """``store`` itself, or the store a ``--store`` location names."""
    return open_read_store(store, endpoint_url) if isinstance(store, str) else store


def gpu_summary(progress: Emit) -> GpuCheckHook:
    """The default ``on_gpu_check``: the check's status and summary as one progress line."""

    def report(check: GpuCheckResult) -> None:
        progress(f"gpu check: {check.status}: {check.summary}")

    return report


@dataclass(frozen=True)
class Offer:
    """One box's releases in a store, this machine as they are chosen for, and what the command line wants."""

    store: ReadableStore
    box_id: str
    index: BoxIndex
    host: HostView
    wanted: Wanted
    trust: StoreTrust | None = None  # the store's signed metadata, when the host passed a trusted root


def read_offer(
    store: ReadableStore,
    box_id: str,
    wanted: Wanted,
    probes: HostProbes,
    progress: Emit,
    trust: StoreTrust | None = None,
) -> Offer:
    """The store's index of ``box_id`` (checked against the signed metadata with ``trust``: refreshed first)
    and the facts of this machine that choosing among it needs."""
    with waiting(progress, store.url):
        if trust is not None:
            trust.refresh()
        index = read_box_index(store, box_id, trust)
    if trust is not None:
        progress(f"signed metadata of {store.url} verified (the trusted root's roles)")
    host = host_view(probes, gpu_accelerator(index, wanted.skip_gpu_check))
    return Offer(store, box_id, index, host, wanted, trust)


def checked_manifest(offer: Offer, chosen: Candidate, progress: Emit) -> tuple[ReleaseManifest, GpuCheckResult]:
    """The chosen release's manifest once this machine passed its GPU check (HostError, said before a byte
    of the archive is downloaded, otherwise): on the manifest, with the GPUs the selection already saw."""
    store = offer.store
    with waiting(progress, store.url):
        manifest = fetch_manifest(store, offer.box_id, chosen, offer.trust)
    url = store.url_for(chosen.entry.release)
    check = release_gpu_check(manifest, offer.host.gpus, offer.wanted.skip_gpu_check, url)
    if check.errors:
        raise refuse(manifest, check, "downloaded", "another target (--target)")
    return manifest, check


def read_box_index(store: ReadableStore, box_id: str, trust: StoreTrust | None = None) -> BoxIndex:
    """``boxes/<box_id>/index.json``; StoreError when the store has none (or another box's).  With ``trust``
    it is read only from its content-addressed copy, checked against its signed target."""
    key = index_key(box_id)
    if trust is not None:
        index = parse_index(trust.read_index(key), store.url_for(key))
        check_index_box(index, box_id, store.url_for(key))
        return index
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


def gpu_accelerator(index: BoxIndex, skip_gpu_check: bool) -> Accelerator | None:
    """The accelerator whose GPU probe must run: the highest-ranked one among the index's releases that uses
    the host's GPUs (a CUDA box), or None when none does or the check is skipped."""
    names = {entry.target.accelerator for targets in index.versions.values() for entry in targets.values()}
    gpu_kinds = sorted((kind for kind in map(accelerator, names) if kind.uses_gpu), key=lambda kind: -kind.rank)
    return None if skip_gpu_check or not gpu_kinds else gpu_kinds[0]


def host_view(probes: HostProbes, gpu_kind: Accelerator | None) -> HostView:
    """This machine's platform, arch and (only when a release needs them) the GPUs ``gpu_kind`` probes."""
    plat, arch = probes.platform()
    return HostView(plat, arch, gpu_kind.probe_gpus(probes) if gpu_kind else GpuFacts())


def fetch_manifest(
    store: ReadableStore, box_id: str, candidate: Candidate, trust: StoreTrust | None = None
) -> ReleaseManifest:
    """The chosen release's manifest; IntegrityError when it is not the release the index describes.  With
    ``trust``: read at most its signed length, checked against its signed target, and its archive's size and
    sha256 against the signed archive target (TrustError), all before a byte of the archive is downloaded."""
    entry = candidate.entry
    url = store.url_for(entry.release)
    blob = Blob(trust.read(entry.release), "") if trust is not None else store.get_bytes(entry.release)
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
    if trust is not None:
        check_signed_archive(trust, manifest, url)
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
