"""The publish plan: what a publish of one release uploads, skips or refuses, decided before the first
write (pure: no I/O; :mod:`scrollcase.store.publish` executes it).

Order is the guarantee: the archive, then its ``.sha256`` sidecar, then the SBOM (when the release
has one), then the release manifest, then the box index.  A reader that sees a manifest can therefore
always fetch its archive and SBOM, and an interrupted publish leaves at most an archive without a
manifest, which a rerun completes.
Every object is created with create-if-absent semantics: an existing key with the same bytes is
skipped (republishing is a no-op), with different bytes it is a ConflictError.  One exception: a
release manifest that differs from the stored one only in ``provenance`` (the same archive rebuilt by a
later tag's run) is "already published": the stored manifest stays (:func:`kept_release`), and this
publish writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from scrollcase.errors import ConflictError
from scrollcase.format.boxjson import BoxJson
from scrollcase.format.provenance import BuildProvenance, describe_provenance
from scrollcase.format.release import ReleaseManifest, dump_release
from scrollcase.format.soundness import MISSING, Measured, release_problems, require_sound_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import ObjectInfo, Piece, sidecar_text
from scrollcase.store.index import IndexEntry, check_index_box, entry_for, index_key, merge_entry
from scrollcase.store.remote import RemoteState, sbom_key
from scrollcase.store.reuse import copied_bytes, plan_reuse

ObjectKind = Literal["archive", "sha256", "sbom", "release"]
Layout = Callable[[int, Sequence[Piece]], tuple[Piece, ...]]


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
