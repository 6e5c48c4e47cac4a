"""Publishing a release: a pure plan, then a thin executor that works with any :class:`Store`.

Order is the guarantee: the archive, then its ``.sha256`` sidecar, then the SBOM (when the release
has one), then the release manifest, then the box index.  A reader that sees a manifest can therefore
always fetch its archive and SBOM, and an interrupted publish leaves at most an archive without a
manifest, which a rerun completes.
Every object is created with create-if-absent semantics: an existing key with the same bytes is
skipped (republishing is a no-op), with different bytes it is a ConflictError.  One exception: a
release manifest that differs from the stored one only in ``provenance`` (the same archive rebuilt by a
later tag's run) is "already published": the stored manifest stays, and this publish writes nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.format.archive.frames import check_frame_table
from scrollcase.format.archive.peek import read_box_json
from scrollcase.format.boxjson import BoxJson
from scrollcase.format.provenance import BuildProvenance, describe_provenance
from scrollcase.format.release import ReleaseManifest, dump_release, parse_release
from scrollcase.format.soundness import MISSING, Measured, release_problems, require_sound_release
from scrollcase.io.digest import new_hash, sha256_bytes, sha256_file, sha256_file_and_parts
from scrollcase.progress import MeterFactory, waiting
from scrollcase.store.base import CHUNK, FileUpload, ObjectInfo, Piece, Store, Transfer, sidecar_text
from scrollcase.store.index import (
    BoxIndex,
    IndexEntry,
    check_index_box,
    entry_for,
    index_key,
    merge_entry,
    parse_index,
    update_index,
)
from scrollcase.store.reuse import EarlierArchive, copied_bytes, plan_reuse

ObjectKind = Literal["archive", "sha256", "sbom", "release"]
Progress = Callable[[str], None]
Layout = Callable[[int, Sequence[Piece]], tuple[Piece, ...]]
NOTHING_MOVED = Transfer(sent=0)
MAX_REUSE_SOURCES = 4  # earlier release manifests read to find reusable frames (same target first)


@dataclass(frozen=True)
class LocalArchive:
    """The archive file on disk as measured just now (not as the manifest claims)."""

    path: Path
    size: int
    sha256: str
    part_sha256: tuple[str, ...] = ()  # per piece, as the store will send it (see Store.checksum_part_size)
    box: BoxJson | None = None  # the archive's own box.json (None: it has none, which is refused)


@dataclass(frozen=True)
class Upload:
    kind: ObjectKind
    key: str
    size: int
    sha256: str
    action: Literal["upload", "skip"]
    reason: str
    data: bytes | None = None  # the bytes of small objects; None for the archive (streamed from disk)
    pieces: tuple[Piece, ...] = ()  # the archive's: copied from earlier archives or sent (Store.reuse_layout)

    @property
    def bytes_reused(self) -> int:
        return copied_bytes(self.pieces) if self.action == "upload" else 0

    @property
    def bytes_to_send(self) -> int:
        return self.size - self.bytes_reused if self.action == "upload" else 0

    def reused_from(self) -> dict[str, int]:
        """Bytes copied from each earlier archive, by its key."""
        found: dict[str, int] = {}
        for piece in self.pieces:
            if piece.source_key is not None:
                found[piece.source_key] = found.get(piece.source_key, 0) + piece.size
        return found

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "key": self.key,
            "size": self.size,
            "sha256": self.sha256,
            "action": self.action,
            "reason": self.reason,
            "bytesToSend": self.bytes_to_send,
        }
        if self.bytes_reused:
            out["bytesReused"] = self.bytes_reused
            out["reusedFrom"] = [{"key": k, "bytes": n} for k, n in self.reused_from().items()]
        return out


@dataclass(frozen=True)
class RemoteState:
    """What the store holds now for the release's keys (None: absent) and its box index.

    ``index``: the index as read (None: there is none yet); ``index_file``: where it is, for messages;
    ``dangling``: index entries whose archive or release manifest is missing from the store;
    ``earlier``: the framed archives of other releases of the box that the new archive may copy bytes from
    (best first); ``notes``: earlier releases passed over, and why; ``stored_release``: the release
    manifest the store holds under this release's key when its bytes are not this publish's (None: absent,
    the same bytes, or not a release manifest).
    """

    objects: Mapping[str, ObjectInfo | None]
    index_lists_release: bool
    index: BoxIndex | None = None
    index_file: str = "index.json"
    dangling: tuple[str, ...] = ()
    earlier: tuple[EarlierArchive, ...] = ()
    notes: tuple[str, ...] = ()
    stored_release: ReleaseManifest | None = None


@dataclass(frozen=True)
class PublishPlan:
    box_id: str
    version: str
    target_id: str
    uploads: tuple[Upload, ...]
    index_key: str
    index_entry: IndexEntry
    index_action: Literal["update", "skip"]
    warnings: tuple[str, ...] = ()  # found while planning, nothing to refuse for (dangling index entries)
    # The stored release manifest that stays in place of this build's, which differs from it only in
    # provenance (a later tag rebuilt the same archive); None when this build's manifest is the one published.
    kept: ReleaseManifest | None = None
    provenance: BuildProvenance | None = None  # this build's, as its manifest records it

    @property
    def release(self) -> str:
        return f"{self.box_id} {self.version} {self.target_id}"

    def already_published_notice(self) -> str | None:
        """What a publish of a release the store already holds (but for provenance) says; None otherwise."""
        if self.kept is None:
            return None
        return (
            f"{self.release} is already published: the store keeps the release built by "
            f"{describe_provenance(self.kept.provenance)}; this build ({describe_provenance(self.provenance)}) "
            "has the same archive and differs only in provenance"
        )

    @property
    def bytes_to_upload(self) -> int:
        return sum(u.size for u in self.uploads if u.action == "upload")

    @property
    def bytes_to_send(self) -> int:
        return sum(u.bytes_to_send for u in self.uploads)

    @property
    def bytes_reused(self) -> int:
        return sum(u.bytes_reused for u in self.uploads)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "release": {"boxId": self.box_id, "version": self.version, "targetId": self.target_id},
            "uploads": [u.to_json() for u in self.uploads],
            "bytesToUpload": self.bytes_to_upload,
            "bytesToSend": self.bytes_to_send,
            "bytesReused": self.bytes_reused,
            "index": {"key": self.index_key, "action": self.index_action},
            "warnings": list(self.warnings),
            "alreadyPublished": self.kept is not None,
        }
        if self.kept is not None:
            kept = self.kept.provenance
            out["keptProvenance"] = kept.model_dump(mode="json") if kept else None
        return out


def release_label(manifest: ReleaseManifest) -> str:
    return f"{manifest.boxId} {manifest.version} {manifest.targetId}"


def check_release(manifest: ReleaseManifest, archive: LocalArchive, manifest_file: str, sbom: bytes | None) -> None:
    """The release's soundness (:func:`~scrollcase.format.soundness.release_problems`) with every fact a
    publish holds: the archive as measured, its box.json, the SBOM beside the manifest."""
    measured_sbom = None if sbom is None else Measured(len(sbom), sha256_bytes(sbom))
    problems = release_problems(
        manifest,
        manifest_file=manifest_file,
        archive_name=archive.path.name,
        archive=Measured(archive.size, archive.sha256),
        box=MISSING if archive.box is None else archive.box,
        sbom=MISSING if measured_sbom is None else measured_sbom,
    )
    require_sound_release(
        problems, doing=f"publish {release_label(manifest)}", archive=str(archive.path), manifest_file=manifest_file
    )


def plan_publish(
    manifest: ReleaseManifest,
    archive: LocalArchive,
    remote: RemoteState,
    manifest_file: str = "release.json",
    sbom: bytes | None = None,
    layout: Layout = lambda _size, pieces: tuple(pieces),
) -> PublishPlan:
    """Decide what to upload and what to skip; raise before anything is written when that is unsafe.

    The archive's pieces: the runs of its frames that earlier archives in the store hold
    (:func:`~scrollcase.store.reuse.plan_reuse`), shaped by the store (``layout``: ``Store.reuse_layout``).

    Every refusal is found here, before the first write: the archive against the manifest, the
    archive's own box.json against the manifest, the self-test and the GPU evidence, each key of the
    store, and the index (another box's, or listing this release with other bytes).
    """
    check_release(manifest, archive, manifest_file, sbom)
    if remote.index is not None:
        check_index_box(remote.index, manifest.boxId, remote.index_file)
    kept = kept_release(manifest, remote)
    uploads = _uploads(manifest, archive, remote, sbom, kept)
    if uploads[0].action == "upload" and remote.earlier:
        pieces = layout(archive.size, plan_reuse(manifest.archive.frames or [], remote.earlier))
        uploads = (replace(uploads[0], pieces=pieces), *uploads[1:])
    entry = _index_entry(manifest, remote, kept)
    # A disagreeing entry for this (version, target) is a ConflictError now, not after the uploads.
    listed = merge_entry(remote.index, manifest.boxId, manifest.version, entry) is None if remote.index else False
    warnings = (
        *(f"{remote.index_file} lists {d}, but its files are missing from the store" for d in remote.dangling),
        *remote.notes,
    )
    return PublishPlan(
        box_id=manifest.boxId,
        version=manifest.version,
        target_id=manifest.targetId,
        uploads=uploads,
        index_key=index_key(manifest.boxId),
        index_entry=entry,
        index_action="skip" if (listed or (remote.index_lists_release and kept is None)) else "update",
        warnings=warnings,
        kept=kept,
        provenance=manifest.provenance,
    )


def _uploads(
    manifest: ReleaseManifest,
    archive: LocalArchive,
    remote: RemoteState,
    sbom: bytes | None,
    kept: ReleaseManifest | None,
) -> tuple[Upload, ...]:
    """Each object of the release, in publish order, to upload or skip (a ConflictError when the store
    holds other bytes).  With ``kept``, the stored release manifest stays as it is."""
    release_bytes = dump_release(manifest)
    sidecar = sidecar_text(archive.sha256, manifest.archive.name)
    wanted: list[tuple[ObjectKind, str, int, str, bytes | None]] = [
        ("archive", manifest.keys.archive, archive.size, archive.sha256, None),
        ("sha256", manifest.keys.sha256, len(sidecar), sha256_bytes(sidecar), sidecar),
        *[("sbom", key, len(sbom), sha256_bytes(sbom), sbom) for key in [sbom_key(manifest)] if key and sbom],
        ("release", manifest.keys.release, len(release_bytes), sha256_bytes(release_bytes), release_bytes),
    ]
    uploads = []
    for kind, key, size, sha, data in wanted:
        existing = remote.objects.get(key)
        if kind == "release" and kept is not None and existing is not None:
            reason = (
                f"already published by {describe_provenance(kept.provenance)}; this build differs in provenance only"
            )
            uploads.append(Upload(kind, key, existing.size, existing.sha256 or sha, "skip", reason))
            continue
        if kind != "archive" and kept is None and remote.stored_release is not None:
            # The stored manifest says best what differs (its sidecar or SBOM would only name other bytes).
            raise release_conflict(manifest, manifest.keys.release, remote.stored_release)
        uploads.append(_decide(manifest, kind, key, size, sha, data, existing))
    return tuple(uploads)


def _index_entry(manifest: ReleaseManifest, remote: RemoteState, kept: ReleaseManifest | None) -> IndexEntry:
    """The index entry of the release as published: this build's, or the kept manifest's (whose bytes the
    store holds, so its digest is the stored object's)."""
    if kept is None:
        return entry_for(manifest)
    stored = remote.objects.get(kept.keys.release)
    entry = entry_for(kept)
    if stored is not None and stored.sha256 is not None:
        entry = entry.model_copy(update={"releaseSha256": stored.sha256})
    return entry


def kept_release(manifest: ReleaseManifest, remote: RemoteState) -> ReleaseManifest | None:
    """The stored release manifest when it differs from ``manifest`` only in ``provenance`` (None otherwise).

    A later tag that rebuilds an unchanged recipe makes a byte-identical archive whose manifest names
    another tag, commit and run: that release is already published, and the first provenance stays."""
    stored = remote.stored_release
    if stored is None or stored.keys.release != manifest.keys.release:
        return None
    return stored if manifest_differences(stored, manifest) == [] else None


def manifest_differences(stored: ReleaseManifest, new: ReleaseManifest) -> list[str]:
    """The top-level fields in which two release manifests differ, ``provenance`` aside (sorted).

    The scrollcase version that built a release (``builtBy.scrollcase``) counts as provenance too: an
    adopter's ``@v1`` moves between two of their tags, and the same archive built by a newer scrollcase is
    still the release the store holds (the archive's bytes and every other builtBy field are compared)."""
    old_fields, new_fields = _without_builder(stored), _without_builder(new)
    return sorted(
        name
        for name in old_fields.keys() | new_fields.keys()
        if name != "provenance" and old_fields.get(name) != new_fields.get(name)
    )


def _without_builder(manifest: ReleaseManifest) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads(dump_release(manifest))
    fields.get("builtBy", {}).pop("scrollcase", None)
    return fields


def sbom_key(manifest: ReleaseManifest) -> str | None:
    """The SBOM's object key: beside the release manifest, under the name the manifest gives it."""
    if manifest.sbom is None:
        return None
    return manifest.keys.release.rsplit("/", 1)[0] + "/" + manifest.sbom.name


def read_sbom(manifest: ReleaseManifest, folder: Path) -> bytes | None:
    """The SBOM the release names, from ``folder`` (the release manifest's); None when absent."""
    if manifest.sbom is None:
        return None
    try:
        return (folder / manifest.sbom.name).read_bytes()
    except FileNotFoundError:
        return None


def _decide(
    manifest: ReleaseManifest,
    kind: ObjectKind,
    key: str,
    size: int,
    sha: str,
    data: bytes | None,
    existing: ObjectInfo | None,
) -> Upload:
    if existing is None:
        return Upload(kind, key, size, sha, "upload", "not in the store yet", data)
    if existing.size == size and existing.sha256 == sha:
        return Upload(kind, key, size, sha, "skip", "identical bytes already published", data)
    raise conflict(manifest, key, existing, size, sha, kind)


_BUMP = (
    "published releases are immutable: bump `version` in recipes/{recipe}/recipe.json (now {version}), rebuild "
    "and publish the new version (or publish to a different store/prefix)"
)


def bump_fix(manifest: ReleaseManifest) -> str:
    return _BUMP.format(recipe=manifest.recipeId, version=manifest.recipeVersion)


def conflict(
    manifest: ReleaseManifest, key: str, existing: ObjectInfo, size: int, sha: str, kind: ObjectKind = "archive"
) -> ConflictError:
    """A key that holds other bytes than this publish's: which key, both sizes and digests, and the fix."""
    theirs = f"sha256 {existing.sha256}" if existing.sha256 else "an unknown sha256"
    what = "its archive " if kind == "archive" else ""
    ours = "this build's archive is" if kind == "archive" else "this publish has"
    return ConflictError(
        f"release {release_label(manifest)} is already published with different bytes: {what}{key} holds "
        f"{existing.size} bytes with {theirs} (stored), {ours} {size} bytes with sha256 {sha} (new)",
        fix=bump_fix(manifest),
    )


def release_conflict(manifest: ReleaseManifest, key: str, stored: ReleaseManifest) -> ConflictError:
    """The stored release manifest is another than this build's, and not only in provenance: what differs."""
    label = release_label(manifest)
    if (stored.archive.size, stored.archive.sha256) != (manifest.archive.size, manifest.archive.sha256):
        message = (
            f"release {label} is already published with another archive: {key} names {stored.archive.size} bytes "
            f"with sha256 {stored.archive.sha256} (stored), this build's archive is {manifest.archive.size} bytes "
            f"with sha256 {manifest.archive.sha256} (new)"
        )
    else:
        fields = ", ".join(manifest_differences(stored, manifest))
        message = (
            f"release {label} is already published with the same archive (sha256 {manifest.archive.sha256}) but "
            f"another release manifest: {key} differs from this build's in {fields} (provenance aside)"
        )
    return ConflictError(message, fix=bump_fix(manifest))


# ----------------------------------------------------------------------------------------- executors


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


def read_remote_state(store: Store, manifest: ReleaseManifest) -> RemoteState:
    """HEAD every key of the release; small objects without a stored sha256 are fetched and hashed."""
    objects: dict[str, ObjectInfo | None] = {}
    for key in (manifest.keys.archive, manifest.keys.sha256, sbom_key(manifest), manifest.keys.release):
        if key is None:
            continue
        info = store.head(key)
        if info is not None and info.sha256 is None and key != manifest.keys.archive:
            blob = store.get_bytes(key)
            info = ObjectInfo(key, len(blob.data), sha256_bytes(blob.data), blob.etag) if blob else None
        objects[key] = info
    stored_release = read_stored_release(store, manifest, objects.get(manifest.keys.release))
    key = index_key(manifest.boxId)
    blob = store.get_bytes(key)
    current = parse_index(blob.data, store.url_for(key)) if blob else None
    listed = current is not None and current.versions.get(manifest.version, {}).get(manifest.targetId) == entry_for(
        manifest
    )
    if current is None or current.boxId != manifest.boxId:
        return RemoteState(
            objects=objects,
            index_lists_release=listed,
            index=current,
            index_file=store.url_for(key),
            stored_release=stored_release,
        )
    missing = missing_keys(store, current)
    earlier: tuple[EarlierArchive, ...] = ()
    notes: tuple[str, ...] = ()
    if manifest.archive.frames and objects.get(manifest.keys.archive) is None:
        earlier, notes = earlier_archives(store, current, manifest, missing)
    return RemoteState(
        objects=objects,
        index_lists_release=listed,
        index=current,
        index_file=store.url_for(key),
        dangling=dangling_entries(current, missing),
        earlier=earlier,
        notes=notes,
        stored_release=stored_release,
    )


def read_stored_release(store: Store, manifest: ReleaseManifest, info: ObjectInfo | None) -> ReleaseManifest | None:
    """The release manifest the store holds under this release's key, when its bytes are not this build's
    (to tell a rebuild that differs only in provenance from a conflict); None when absent, the same bytes,
    or not a release manifest (the conflict then names its digest)."""
    if info is None or info.sha256 == sha256_bytes(dump_release(manifest)):
        return None
    blob = store.get_bytes(manifest.keys.release)
    if blob is None:
        return None
    try:
        return parse_release(blob.data, store.url_for(manifest.keys.release))
    except IntegrityError:
        return None


def missing_keys(store: Store, index: BoxIndex) -> set[str]:
    """The release manifests and archives the index lists that the store lacks (deleted by hand, a lost
    bucket).  One existence check per key (``Store.exists``: a HEAD on S3, a stat in a directory)."""
    keys = {key for targets in index.versions.values() for e in targets.values() for key in (e.release, e.archive)}
    return {key for key in sorted(keys) if not store.exists(key)}


def dangling_entries(index: BoxIndex, missing: set[str]) -> tuple[str, ...]:
    """The index's entries whose release manifest or archive is in ``missing``."""
    found = []
    for version, targets in sorted(index.versions.items()):
        for target, entry in sorted(targets.items()):
            gone = [key for key in (entry.release, entry.archive) if key in missing]
            if gone:
                found.append(f"{index.boxId} {version} {target} ({', '.join(gone)})")
    return tuple(found)


def earlier_archives(
    store: Store, index: BoxIndex, manifest: ReleaseManifest, missing: set[str]
) -> tuple[tuple[EarlierArchive, ...], tuple[str, ...]]:
    """The framed archives of the box's other releases, best sources first (the same target, then the
    newest versions), read from their release manifests as the digest chain vouches for them; and a note
    for each release passed over (its manifest disagrees with the index)."""
    candidates = reuse_candidates(index, manifest, missing)
    found: list[EarlierArchive] = []
    notes: list[str] = []
    for version, entry in candidates[:MAX_REUSE_SOURCES]:
        label = f"{index.boxId} {version} {entry.targetId}"
        blob = store.get_bytes(entry.release)
        problem = _vouched_problem(blob.data if blob else None, entry, store.url_for(entry.release))
        if problem is not None:
            notes.append(f"not reusing the frames of {label}: {problem}")
            continue
        assert blob is not None
        frames = parse_release(blob.data, store.url_for(entry.release)).archive.frames
        if frames:
            found.append(EarlierArchive(entry.archive, label, tuple(frames)))
    return tuple(found), tuple(notes)


def reuse_candidates(index: BoxIndex, manifest: ReleaseManifest, missing: set[str]) -> list[tuple[str, IndexEntry]]:
    """The index's other releases of the box whose files are all there, as (version, entry): the same
    target first, then the newest versions (pure)."""
    candidates = [
        (version, entry)
        for version, targets in index.versions.items()
        for entry in targets.values()
        if (version, entry.targetId) != (manifest.version, manifest.targetId)
        and not {entry.release, entry.archive} & missing
    ]
    return sorted(candidates, key=lambda c: (c[1].targetId != manifest.targetId, _newest_first(c[0]), c[1].targetId))


def _vouched_problem(data: bytes | None, entry: IndexEntry, file: str) -> str | None:
    """Why the manifest ``data`` is not the one the index entry vouches for (None: it is)."""
    if data is None:
        return f"{file} is missing"
    if entry.releaseSha256 is not None and sha256_bytes(data) != entry.releaseSha256:
        return f"{file} has sha256 {sha256_bytes(data)}, the index says {entry.releaseSha256}"
    try:
        earlier = parse_release(data, file)
    except IntegrityError as exc:
        return exc.message
    if (earlier.keys.archive, earlier.archive.sha256, earlier.archive.size) != (
        entry.archive,
        entry.sha256,
        entry.size,
    ):
        return f"{file} describes another archive than the index entry"
    return None


def _newest_first(version: str) -> tuple[int, ...]:
    """A sort key putting higher versions first, by their numeric parts (enough to choose sources by)."""
    core = version.split("+", 1)[0].split("-", 1)[0]
    return tuple(-int(part) if part.isdigit() else 0 for part in core.split("."))


@dataclass(frozen=True)
class PublishResult:
    plan: PublishPlan
    store: str
    dry_run: bool
    uploaded: tuple[str, ...]  # keys actually written by this run
    index_written: bool
    sent: Transfer = NOTHING_MOVED  # what this run's writes moved (a dry run: none)

    def to_json(self) -> dict[str, Any]:
        out = self.plan.to_json()
        out.update(
            {
                "store": self.store,
                "dryRun": self.dry_run,
                "uploaded": list(self.uploaded),
                "indexWritten": self.index_written,
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
) -> PublishResult:
    """Check, plan and (unless ``dry_run``) execute a publish of one release to ``store``; the SBOM is
    read from ``sbom_folder`` (default: the archive's folder, where `scrollcase build` writes both)."""
    progress(f"checking {archive_path} against {manifest_file}")
    archive = measure_archive(archive_path, store)
    # The archive's bytes first: its box.json is read only from the archive the manifest names.
    measured = Measured(archive.size, archive.sha256)
    require_sound_release(
        release_problems(manifest, manifest_file=manifest_file, archive_name=archive_path.name, archive=measured),
        doing=f"publish {release_label(manifest)}",
        archive=str(archive_path),
        manifest_file=manifest_file,
    )
    if manifest.archive.frames:
        check_frame_table(archive_path, manifest.archive.frames, manifest.archive.size, manifest_file)
    archive = read_box(archive)
    sbom = read_sbom(manifest, sbom_folder or archive_path.parent)
    check_release(manifest, archive, manifest_file, sbom)
    with waiting(progress, store.url):
        store.check()
        remote = read_remote_state(store, manifest)
    plan = plan_publish(manifest, archive, remote, manifest_file, sbom, store.reuse_layout)
    for warning in plan.warnings:
        progress(f"warning: {warning}")
    if dry_run:
        return PublishResult(plan, store.url, True, (), False)
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
    progress(f"updating {store.url_for(plan.index_key)}")
    with waiting(progress, store.url):
        written = update_index(store, manifest.boxId, manifest.version, plan.index_entry)
    return PublishResult(plan, store.url, False, tuple(uploaded), written, moved)


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
