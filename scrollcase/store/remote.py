"""What the store holds now for one release, read before a publish is planned: each of its keys (HEAD),
the release manifest stored under its key when it is not this build's, the box index, the index's entries
whose files are gone, and the earlier framed archives a new archive may copy bytes from (best first)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scrollcase.errors import IntegrityError
from scrollcase.format.release import ReleaseManifest, dump_release, parse_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import ObjectInfo, Store
from scrollcase.store.index import BoxIndex, IndexEntry, entry_for, index_key, parse_index
from scrollcase.store.reuse import EarlierArchive

MAX_REUSE_SOURCES = 4  # earlier release manifests read to find reusable frames (same target first)


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


def sbom_key(manifest: ReleaseManifest) -> str | None:
    """The SBOM's object key: beside the release manifest, under the name the manifest gives it."""
    if manifest.sbom is None:
        return None
    return manifest.keys.release.rsplit("/", 1)[0] + "/" + manifest.sbom.name


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
