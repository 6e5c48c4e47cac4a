"""Publishing a release: check it, plan it (:mod:`scrollcase.store.publishplan`, pure), then this thin
executor writes the plan's objects in order to any :class:`Store`, then the box index.

Every refusal is found before the first write; a ConflictError while writing the release manifest (a
concurrent publisher won the race) is planned again against what it wrote.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.format.archive.frames import check_frame_table
from scrollcase.format.archive.peek import read_box_json
from scrollcase.format.release import ReleaseManifest
from scrollcase.format.soundness import ARCHIVE_DIGEST, Measured, release_problems, require_sound_release
from scrollcase.io.digest import new_hash, sha256_bytes, sha256_file, sha256_file_and_parts
from scrollcase.progress import MeterFactory, waiting
from scrollcase.store.base import CHUNK, FileUpload, ObjectInfo, Piece, Store, Transfer
from scrollcase.store.index import update_index
from scrollcase.store.publishplan import (
    LocalArchive,
    ObjectKind,
    PublishPlan,
    Upload,
    check_release,
    conflict,
    plan_publish,
    release_label,
)
from scrollcase.store.remote import read_remote_state
from scrollcase.store.signing import Clock, check_signing, sign_release, utc_now
from scrollcase.trust.keys import RoleKeys

Progress = Callable[[str], None]
NOTHING_MOVED = Transfer(sent=0)


def measure_archive(path: Path, store: Store) -> LocalArchive:
    """Hash the archive once: the whole file (for the manifest check) and the pieces the store sends."""
    if not path.is_file():
        raise IntegrityError(
            f"archive {path} does not exist", fix="build the box first, or pass --archive with the archive's path"
        )
    part_size = store.checksum_part_size(path.stat().st_size)
    if part_size is None:
        sha, size = sha256_file(path)
        return LocalArchive(path=path, size=size, sha256=sha)
    digests = sha256_file_and_parts(path, part_size)
    return LocalArchive(path=path, size=digests.size, sha256=digests.sha256, part_sha256=digests.parts)


def read_box(archive: LocalArchive) -> LocalArchive:
    """``archive`` with its box.json, read after the size and sha256 matched the manifest (only the
    start of the stream is decompressed: box.json is packed among the first members)."""
    return LocalArchive(archive.path, archive.size, archive.sha256, archive.part_sha256, read_box_json(archive.path))


def read_sbom(manifest: ReleaseManifest, folder: Path) -> bytes | None:
    """The SBOM the release names, from ``folder`` (the release manifest's); None when absent."""
    if manifest.sbom is None:
        return None
    try:
        return (folder / manifest.sbom.name).read_bytes()
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class PublishResult:
    plan: PublishPlan
    store: str
    dry_run: bool
    uploaded: tuple[str, ...]  # keys actually written by this run
    index_written: bool
    sent: Transfer = NOTHING_MOVED  # what this run's writes moved (a dry run: none)
    store_signed: bool = False  # the store has signed metadata (tuf/timestamp.json): publish signs what it adds
    signed: tuple[str, ...] = ()  # the metadata objects (and the index's content-addressed copy) this run wrote

    def to_json(self) -> dict[str, Any]:
        out = self.plan.to_json()
        out.update(
            {
                "store": self.store,
                "dryRun": self.dry_run,
                "uploaded": list(self.uploaded),
                "indexWritten": self.index_written,
                "storeSigned": self.store_signed,
                "signedMetadata": list(self.signed),
            }
        )
        if not self.dry_run:
            out.update({"bytesSent": self.sent.sent, "bytesReused": self.sent.reused})
        return out

    def bytes_line(self) -> str:
        """How many bytes went up and how many the store copied from earlier releases instead."""
        sent, reused = (
            (self.plan.bytes_to_send, self.plan.bytes_reused) if self.dry_run else (self.sent.sent, self.sent.reused)
        )
        verb = ("would send", "would reuse") if self.dry_run else ("sent", "reused")
        archive = self.plan.uploads[0]
        share = f" ({100 * reused / archive.size:.1f}% of the archive)" if reused and archive.size else ""
        return f"{verb[0]} {sent} bytes, {verb[1]} {reused} bytes from earlier releases{share}"


def publish(
    store: Store,
    manifest: ReleaseManifest,
    archive_path: Path,
    *,
    dry_run: bool = False,
    manifest_file: str = "release.json",
    progress: Progress = lambda _: None,
    meter: MeterFactory | None = None,
    sbom_folder: Path | None = None,
    keys: RoleKeys | None = None,
    now: Clock = utc_now,
) -> PublishResult:
    """Check, plan and (unless ``dry_run``) execute a publish of one release to ``store``; the SBOM is
    read from ``sbom_folder`` (default: the archive's folder, where `scrollcase build` writes both).  A store
    with signed metadata (``tuf/timestamp.json``) needs the online ``keys`` (checked before the first write);
    the release's objects and its index are signed last (store/signing.py)."""
    progress(f"checking {archive_path} against {manifest_file}")
    archive = measure_archive(archive_path, store)
    # The archive's bytes first: box.json is read only from the archive the manifest names.
    measured = Measured(archive.size, archive.sha256)
    early = release_problems(manifest, manifest_file=manifest_file, archive_name=archive_path.name, archive=measured)
    if any(problem.key == ARCHIVE_DIGEST for problem in early):
        require_sound_release(
            early, doing=f"publish {release_label(manifest)}", archive=str(archive_path), manifest_file=manifest_file
        )
    if manifest.archive.frames:
        check_frame_table(archive_path, manifest.archive.frames, manifest.archive.size, manifest_file)
    archive = read_box(archive)
    sbom = read_sbom(manifest, sbom_folder or archive_path.parent)
    check_release(manifest, archive, manifest_file, sbom)
    with waiting(progress, store.url):
        store.check()
        remote = read_remote_state(store, manifest)
        signing = check_signing(store, keys)
    plan = plan_publish(manifest, archive, remote, manifest_file, sbom, store.reuse_layout)
    for warning in plan.warnings:
        progress(f"warning: {warning}")
    if dry_run:
        return PublishResult(plan, store.url, True, (), False, store_signed=signing)
    plan, uploaded, moved = _upload(store, manifest, plan, archive, sbom, manifest_file, progress, meter)
    progress(f"updating {store.url_for(plan.index_key)}")
    with waiting(progress, store.url):
        written = update_index(store, manifest.boxId, manifest.version, plan.index_entry)
    signed: tuple[str, ...] = ()
    if signing and keys is not None:
        progress(f"signing the release and the index ({store.url_for('tuf/timestamp.json')})")
        with waiting(progress, store.url):
            signed = sign_release(store, manifest, keys, now=now, progress=progress)
    return PublishResult(plan, store.url, False, tuple(uploaded), written, moved, signing, signed)


def _upload(
    store: Store,
    manifest: ReleaseManifest,
    plan: PublishPlan,
    archive: LocalArchive,
    sbom: bytes | None,
    manifest_file: str,
    progress: Progress,
    meter: MeterFactory | None,
) -> tuple[PublishPlan, list[str], Transfer]:
    """Execute the plan's uploads in order; the plan (planned again after a lost race on the manifest), the
    keys written and what they moved."""
    uploaded: list[str] = []
    moved = NOTHING_MOVED
    for step in plan.uploads:  # in order: archive, sidecar, SBOM, manifest
        if step.action != "upload":
            continue
        try:
            transfer = _execute_upload(store, manifest, step, archive, progress, meter)
        except ConflictError:
            if step.kind != "release":
                raise
            # Another publisher wrote its manifest first: plan again against it, which raises the conflict
            # unless it differs from ours only in provenance (then it is kept, as if it had been there before).
            with waiting(progress, store.url):
                remote = read_remote_state(store, manifest)
            plan = replace(plan_publish(manifest, archive, remote, manifest_file, sbom), uploads=plan.uploads)
            continue
        if transfer is not None:
            uploaded.append(step.key)
            moved = Transfer(moved.sent + transfer.sent, moved.reused + transfer.reused)
    return plan, uploaded, moved


def _execute_upload(
    store: Store,
    manifest: ReleaseManifest,
    step: Upload,
    archive: LocalArchive,
    progress: Progress,
    meter: MeterFactory | None = None,
) -> Transfer | None:
    """Create one object; what it moved, or None when a concurrent publisher wrote the same bytes first."""
    progress(f"uploading {store.url_for(step.key)} ({size_note(step)})")
    try:
        if step.data is not None:
            with waiting(progress, store.url_for(step.key)):
                store.put_bytes(step.key, step.data, if_none_match=True, content_type=_content_type(step.kind))
            return Transfer(sent=step.size)
        sent = meter("uploading", step.size) if meter else None
        transfer = store.put_file(
            step.key, archive_upload(step, archive, sent or byte_progress(step.size, progress), progress)
        )
        if sent:
            sent.finish()
        return transfer
    except ConflictError:
        # Lost a race with another publisher: fine if it wrote exactly our bytes.
        existing = store.head(step.key)
        if existing is None:
            raise StoreError(
                f"{store.url_for(step.key)} was refused as existing but is absent", fix="rerun publish"
            ) from None
        if existing.sha256 is None and step.data is not None:
            blob = store.get_bytes(step.key)
            existing = ObjectInfo(step.key, len(blob.data), sha256_bytes(blob.data)) if blob else existing
        if existing.size == step.size and existing.sha256 == step.sha256:
            return None
        raise conflict(manifest, step.key, existing, step.size, step.sha256) from None


def archive_upload(
    step: Upload, archive: LocalArchive, sent: Callable[[int], None], notice: Progress = lambda _: None
) -> FileUpload:
    """The archive as ``put_file`` takes it.  With pieces to copy, the archive is read once more: the
    sha256 of each piece (what the store sends, or checks a copy against) comes from a read whose whole
    sha256 is checked against the manifest again, so the store still verifies exactly the checked bytes."""
    if not any(p.copied for p in step.pieces):
        return FileUpload(archive.path, step.size, step.sha256, archive.part_sha256, progress=sent, notice=notice)
    whole, size, parts = sha256_file_and_pieces(archive.path, step.pieces)
    if (whole, size) != (step.sha256, step.size):
        raise IntegrityError(
            f"{archive.path} changed while it was being published (sha256 {whole}, {size} bytes; "
            f"expected {step.sha256}, {step.size} bytes)",
            fix="do not modify the archive during publish; rerun",
        )
    return FileUpload(archive.path, size, whole, parts, step.pieces, sent, notice)


def sha256_file_and_pieces(path: Path, pieces: Sequence[Piece]) -> tuple[str, int, tuple[str, ...]]:
    """One read of ``path``: its sha256 and size, and the sha256 of each of ``pieces`` (which cover it in order)."""
    whole = new_hash()
    digests: list[str] = []
    total = 0
    with path.open("rb") as stream:
        for piece in pieces:
            part = new_hash()
            left = piece.size
            while left and (chunk := stream.read(min(CHUNK, left))):
                whole.update(chunk)
                part.update(chunk)
                left -= len(chunk)
                total += len(chunk)
            digests.append(part.hexdigest())
        while chunk := stream.read(CHUNK):  # bytes past the last piece: a file that grew
            whole.update(chunk)
            total += len(chunk)
    return whole.hexdigest(), total, tuple(digests)


def size_note(step: Upload) -> str:
    if not step.bytes_reused:
        return f"{step.size} bytes"
    sources = ", ".join(step.reused_from())
    return f"{step.size} bytes: {step.bytes_to_send} to send, {step.bytes_reused} to copy from {sources}"


def byte_progress(total: int, progress: Progress, steps: int = 10) -> Callable[[int], None]:
    """A byte counter (safe across upload threads) that reports every ``1/steps`` of ``total``."""
    lock = threading.Lock()
    state = {"sent": 0, "reported": 0}

    def advance(count: int) -> None:
        with lock:
            state["sent"] += count
            tenth = state["sent"] * steps // max(total, 1)
            if tenth <= state["reported"]:
                return
            state["reported"] = tenth
        progress(f"  {state['sent'] * 100 // max(total, 1)}% ({state['sent']} of {total} bytes)")

    return advance


def _content_type(kind: ObjectKind) -> str:
    return {
        "archive": "application/zstd",
        "sha256": "text/plain; charset=utf-8",
        "sbom": "application/vnd.cyclonedx+json",
        "release": "application/json",
    }[kind]
