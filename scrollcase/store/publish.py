"""Publishing a release: a pure plan, then a thin executor that works with any :class:`Store`.

Order is the guarantee: the archive, then its ``.sha256`` sidecar, then the SBOM (when the release
has one), then the release manifest, then the box index.  A reader that sees a manifest can therefore
always fetch its archive and SBOM, and an interrupted publish leaves at most an archive without a
manifest, which a rerun completes.
Every object is created with create-if-absent semantics: an existing key with the same bytes is
skipped (republishing is a no-op), with different bytes it is a ConflictError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scrollcase.box.boxjson import BoxJson
from scrollcase.box.evidence import evidence_problems
from scrollcase.box.frames import check_frame_table
from scrollcase.box.peek import read_box_json
from scrollcase.box.release import ReleaseManifest, dump_release, object_keys, release_relocation
from scrollcase.errors import ConflictError, IntegrityError, Problem, StoreError
from scrollcase.io.digest import sha256_bytes, sha256_file, sha256_file_and_parts
from scrollcase.progress import MeterFactory, waiting
from scrollcase.store.base import ObjectInfo, Store, sidecar_text
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

ObjectKind = Literal["archive", "sha256", "sbom", "release"]
Progress = Callable[[str], None]


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

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "size": self.size,
            "sha256": self.sha256,
            "action": self.action,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class RemoteState:
    """What the store holds now for the release's keys (None: absent) and its box index.

    ``index``: the index as read (None: there is none yet); ``index_file``: where it is, for messages;
    ``dangling``: index entries whose archive or release manifest is missing from the store.
    """

    objects: Mapping[str, ObjectInfo | None]
    index_lists_release: bool
    index: BoxIndex | None = None
    index_file: str = "index.json"
    dangling: tuple[str, ...] = ()


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

    @property
    def release(self) -> str:
        return f"{self.box_id} {self.version} {self.target_id}"

    @property
    def bytes_to_upload(self) -> int:
        return sum(u.size for u in self.uploads if u.action == "upload")

    def to_json(self) -> dict[str, Any]:
        return {
            "release": {"boxId": self.box_id, "version": self.version, "targetId": self.target_id},
            "uploads": [u.to_json() for u in self.uploads],
            "bytesToUpload": self.bytes_to_upload,
            "index": {"key": self.index_key, "action": self.index_action},
            "warnings": list(self.warnings),
        }


def release_label(manifest: ReleaseManifest) -> str:
    return f"{manifest.boxId} {manifest.version} {manifest.targetId}"


def check_archive(manifest: ReleaseManifest, archive: LocalArchive, manifest_file: str) -> None:
    """The archive on disk must be exactly the one the manifest describes (before anything goes up)."""
    expected = manifest.archive
    if archive.size != expected.size or archive.sha256 != expected.sha256:
        raise IntegrityError(
            f"{archive.path} does not match {manifest_file}: it is {archive.size} bytes with sha256 "
            f"{archive.sha256}, the manifest says {expected.size} bytes with sha256 {expected.sha256}",
            fix="publish the archive that was built with this release manifest (rebuild the box if it was "
            "modified or truncated)",
        )
    keys = object_keys(manifest.boxId, manifest.version, manifest.targetId, expected.name)
    if manifest.keys != keys:
        raise IntegrityError(
            f"{manifest_file}: keys are {manifest.keys.model_dump()}, but this release's keys are {keys.model_dump()}",
            fix="rebuild the box; the release manifest was edited by hand",
        )


def box_problems(
    manifest: ReleaseManifest, box: BoxJson | None, archive_name: str, manifest_file: str = "release.json"
) -> list[Problem]:
    """Why the archive's box.json and the manifest do not describe one sound release (empty: they do).

    The manifest is what the index and every host app trust, so it must say what the box itself
    says (identity, target), that the self-test passed, and carry GPU evidence that fits the target.
    """
    inner = f"{archive_name}!box.json"
    if box is None:
        return [
            Problem(
                message="the archive has no box.json",
                file=inner,
                fix="publish the archive `scrollcase build` wrote with this manifest",
            )
        ]
    problems = []
    pairs: dict[str, tuple[object, object]] = {
        "boxId": (box.boxId, manifest.boxId),
        "version": (box.version, manifest.version),
        "target": (box.target, manifest.target),
        "targetId": (box.targetId, manifest.targetId),
        "gpu": (box.gpu, manifest.gpu),
        "relocation": (release_relocation(box.relocation) if manifest.relocation else None, manifest.relocation),
    }
    for key, (inside, outside) in pairs.items():
        if inside != outside:
            shown_in = inside.model_dump(mode="json", exclude_none=True) if hasattr(inside, "model_dump") else inside
            shown_out = (
                outside.model_dump(mode="json", exclude_none=True) if hasattr(outside, "model_dump") else outside
            )
            problems.append(
                Problem(
                    message=f"the archive's box.json says {shown_in!r}, {manifest_file} says {shown_out!r}",
                    file=inner,
                    key=key,
                    fix="publish the manifest that was built with this archive (rebuild)",
                )
            )
    if manifest.selfTest is None or not manifest.selfTest.passed:
        state = "has no self-test report" if manifest.selfTest is None else "records a failed self-test"
        problems.append(
            Problem(
                message=f"the manifest {state}",
                file=manifest_file,
                key="selfTest.passed",
                fix="rebuild with `scrollcase build`: only a box whose self-test passed is published",
            )
        )
    spec = manifest.target.spec
    if manifest.gpu is None:
        if spec.is_cuda:
            problems.append(
                Problem(
                    message=f"{manifest.targetId} is a CUDA target, but the manifest carries no GPU evidence",
                    file=manifest_file,
                    key="gpu",
                    fix="rebuild with this scrollcase version: the build records the evidence",
                )
            )
    else:
        for problem in evidence_problems(spec, manifest.gpu, where="box"):
            problems.append(
                Problem(message=problem.message, file=manifest_file, key="gpu", value=problem.value, fix=problem.fix)
            )
    return problems


def check_box(manifest: ReleaseManifest, archive: LocalArchive, manifest_file: str) -> None:
    problems = box_problems(manifest, archive.box, archive.path.name, manifest_file)
    if problems:
        raise IntegrityError(
            f"refusing to publish {release_label(manifest)}: {archive.path} and {manifest_file} do not describe "
            f"one sound release ({problems[0].key or 'box.json'}: {problems[0].message})",
            problems=problems,
            fix="publish the archive and release manifest `scrollcase build` wrote together; rebuild if in doubt",
        )


def plan_publish(
    manifest: ReleaseManifest,
    archive: LocalArchive,
    remote: RemoteState,
    manifest_file: str = "release.json",
    sbom: bytes | None = None,
) -> PublishPlan:
    """Decide what to upload and what to skip; raise before anything is written when that is unsafe.

    Every refusal is found here, before the first write: the archive against the manifest, the
    archive's own box.json against the manifest, the self-test and the GPU evidence, each key of the
    store, and the index (another box's, or listing this release with other bytes).
    """
    check_archive(manifest, archive, manifest_file)
    check_box(manifest, archive, manifest_file)
    check_sbom(manifest, sbom, manifest_file)
    if remote.index is not None:
        check_index_box(remote.index, manifest.boxId, remote.index_file)
    release_bytes = dump_release(manifest)
    sidecar = sidecar_text(archive.sha256, manifest.archive.name)
    wanted: list[tuple[ObjectKind, str, int, str, bytes | None]] = [
        ("archive", manifest.keys.archive, archive.size, archive.sha256, None),
        ("sha256", manifest.keys.sha256, len(sidecar), sha256_bytes(sidecar), sidecar),
        *[("sbom", key, len(sbom), sha256_bytes(sbom), sbom) for key in [sbom_key(manifest)] if key and sbom],
        ("release", manifest.keys.release, len(release_bytes), sha256_bytes(release_bytes), release_bytes),
    ]
    uploads = tuple(
        _decide(manifest, kind, key, size, sha, data, remote.objects.get(key)) for kind, key, size, sha, data in wanted
    )
    entry = entry_for(manifest)
    # A disagreeing entry for this (version, target) is a ConflictError now, not after the uploads.
    listed = merge_entry(remote.index, manifest.boxId, manifest.version, entry) is None if remote.index else False
    warnings = tuple(
        f"{remote.index_file} lists {d}, but its files are missing from the store" for d in remote.dangling
    )
    return PublishPlan(
        box_id=manifest.boxId,
        version=manifest.version,
        target_id=manifest.targetId,
        uploads=uploads,
        index_key=index_key(manifest.boxId),
        index_entry=entry,
        index_action="skip" if (listed or remote.index_lists_release) else "update",
        warnings=warnings,
    )


def sbom_key(manifest: ReleaseManifest) -> str | None:
    """The SBOM's object key: beside the release manifest, under the name the manifest gives it."""
    if manifest.sbom is None:
        return None
    return manifest.keys.release.rsplit("/", 1)[0] + "/" + manifest.sbom.name


def check_sbom(manifest: ReleaseManifest, sbom: bytes | None, manifest_file: str) -> None:
    """IntegrityError when the release names an SBOM and ``sbom`` is not exactly it (size and sha256)."""
    if manifest.sbom is None:
        return
    if sbom is None:
        raise IntegrityError(
            f"{manifest_file} names the SBOM {manifest.sbom.name}, which is not beside it",
            fix="keep the .sbom.json `scrollcase build` wrote beside the release manifest",
        )
    found = (len(sbom), sha256_bytes(sbom))
    if found != (manifest.sbom.size, manifest.sbom.sha256):
        raise IntegrityError(
            f"{manifest.sbom.name} is {found[0]} bytes with sha256 {found[1]}, but {manifest_file} records "
            f"{manifest.sbom.size} bytes with sha256 {manifest.sbom.sha256}",
            fix="publish the SBOM `scrollcase build` wrote with this release manifest (rebuild if in doubt)",
        )


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
    raise conflict(manifest, key, existing, size, sha)


def conflict(manifest: ReleaseManifest, key: str, existing: ObjectInfo, size: int, sha: str) -> ConflictError:
    theirs = f"sha256 {existing.sha256}" if existing.sha256 else "an unknown sha256"
    return ConflictError(
        f"release {release_label(manifest)} is already published with different bytes: {key} holds "
        f"{existing.size} bytes with {theirs}, this publish has {size} bytes with sha256 {sha}",
        fix="published releases are immutable: bump `version` in recipe.json, rebuild and publish the new "
        "version (or publish to a different store/prefix)",
    )


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
    key = index_key(manifest.boxId)
    blob = store.get_bytes(key)
    current = parse_index(blob.data, store.url_for(key)) if blob else None
    listed = current is not None and current.versions.get(manifest.version, {}).get(manifest.targetId) == entry_for(
        manifest
    )
    dangling = dangling_entries(store, current) if current is not None and current.boxId == manifest.boxId else ()
    return RemoteState(
        objects=objects, index_lists_release=listed, index=current, index_file=store.url_for(key), dangling=dangling
    )


def dangling_entries(store: Store, index: BoxIndex) -> tuple[str, ...]:
    """The index's entries whose release manifest or archive is missing (deleted by hand, a lost bucket).

    One existence check per key (``Store.exists``: a HEAD on S3, a stat in a directory)."""
    found = []
    for version, targets in sorted(index.versions.items()):
        for target, entry in sorted(targets.items()):
            missing = [key for key in (entry.release, entry.archive) if not store.exists(key)]
            if missing:
                found.append(f"{index.boxId} {version} {target} ({', '.join(missing)})")
    return tuple(found)


@dataclass(frozen=True)
class PublishResult:
    plan: PublishPlan
    store: str
    dry_run: bool
    uploaded: tuple[str, ...]  # keys actually written by this run
    index_written: bool

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
        return out


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
    check_archive(manifest, archive, manifest_file)
    if manifest.archive.frames:
        check_frame_table(archive_path, manifest.archive.frames, manifest.archive.size, manifest_file)
    archive = read_box(archive)
    check_box(manifest, archive, manifest_file)
    sbom = read_sbom(manifest, sbom_folder or archive_path.parent)
    check_sbom(manifest, sbom, manifest_file)
    with waiting(progress, store.url):
        store.check()
        remote = read_remote_state(store, manifest)
    plan = plan_publish(manifest, archive, remote, manifest_file, sbom)
    for warning in plan.warnings:
        progress(f"warning: {warning}")
    if dry_run:
        return PublishResult(plan, store.url, True, (), False)
    uploaded: list[str] = []
    for step in plan.uploads:  # in order: archive, sidecar, SBOM, manifest
        if step.action == "upload" and _execute_upload(store, manifest, step, archive, progress, meter):
            uploaded.append(step.key)
    progress(f"updating {store.url_for(plan.index_key)}")
    with waiting(progress, store.url):
        written = update_index(store, manifest.boxId, manifest.version, plan.index_entry)
    return PublishResult(plan, store.url, False, tuple(uploaded), written)


def _execute_upload(
    store: Store,
    manifest: ReleaseManifest,
    step: Upload,
    archive: LocalArchive,
    progress: Progress,
    meter: MeterFactory | None = None,
) -> bool:
    """Create one object; True if this run wrote it, False if a concurrent publisher wrote the same bytes."""
    progress(f"uploading {store.url_for(step.key)} ({step.size} bytes)")
    try:
        if step.data is None:
            sent = meter("uploading", step.size) if meter else None
            store.put_file(
                step.key,
                archive.path,
                size=step.size,
                sha256=step.sha256,
                part_sha256=archive.part_sha256,
                progress=sent or byte_progress(step.size, progress),
            )
            if sent:
                sent.finish()
        else:
            with waiting(progress, store.url_for(step.key)):
                store.put_bytes(step.key, step.data, if_none_match=True, content_type=_content_type(step.kind))
        return True
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
            return False
        raise conflict(manifest, step.key, existing, step.size, step.sha256) from None


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
