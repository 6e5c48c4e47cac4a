"""The per-box index ``boxes/<boxId>/index.json``: every published version and target of one box.

Host apps read it to pick the release for their platform and NVIDIA driver without listing the
bucket.  Writers update it with optimistic concurrency: read it with its ETag, merge one entry
(pure: :func:`merge_entry`), write it back with ``If-Match`` (``If-None-Match: *`` when creating it)
and, when another writer got there first, read again and retry with backoff.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scrollcase.errors import ConflictError, IntegrityError, Problem, StoreError
from scrollcase.format.release import ReleaseManifest, ReleaseRelocation, dump_release, parse_release
from scrollcase.format.versions import SCHEMA_VERSION, NewerFormatError, refuse_newer
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import canonical_json, parse_json_model
from scrollcase.recipe.model import Identifier, Recipe, SemVer, Sha256, Target, document_json_schema
from scrollcase.store.base import ReadableStore, Store
from scrollcase.targets.evidence import GpuEvidence

MAX_ATTEMPTS = 10


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class IndexEntry(_Model):
    """One published (version, target): where its files are and what a host needs to choose it."""

    targetId: str
    target: Target
    archive: str  # object key of the .tar.zst
    release: str  # object key of the .release.json
    sha256Key: str  # object key of the .sha256 sidecar
    sha256: Sha256  # the archive's
    releaseSha256: Sha256 | None = None  # the release manifest's bytes (absent in entries of older publishes)
    size: Annotated[int, Field(ge=0, strict=True)]
    minNvidiaDriverVersion: str | None = None
    minHostAppVersion: SemVer
    minRamGb: float
    gpu: GpuEvidence | None = None  # the release's GPU evidence: CUDA runtime, cuDNN, compiled archs
    relocation: ReleaseRelocation | None = None  # the longest DEST; absent when the manifest has none (older)


class BoxIndex(_Model):
    schemaVersion: Literal[1] = 1
    boxId: Identifier
    versions: dict[str, dict[str, IndexEntry]] = Field(default_factory=dict)  # version -> targetId -> entry

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: Any) -> Any:
        refuse_newer(data, "schemaVersion", SCHEMA_VERSION)  # before any other finding (format/versions.py)
        return data


def index_key(box_id: str) -> str:
    return f"boxes/{box_id}/index.json"


def entry_for(manifest: ReleaseManifest) -> IndexEntry:
    return IndexEntry(
        targetId=manifest.targetId,
        target=manifest.target,
        archive=manifest.keys.archive,
        release=manifest.keys.release,
        sha256Key=manifest.keys.sha256,
        sha256=manifest.archive.sha256,
        releaseSha256=sha256_bytes(dump_release(manifest)),  # publish uploads exactly these bytes
        size=manifest.archive.size,
        minNvidiaDriverVersion=manifest.compatibility.minNvidiaDriverVersion,
        minHostAppVersion=manifest.compatibility.minHostAppVersion,
        minRamGb=manifest.compatibility.minRamGb,
        gpu=manifest.gpu,
        relocation=manifest.relocation,
    )


def check_index_box(index: BoxIndex, box_id: str, file: str) -> None:
    """StoreError when the index at ``boxes/<box_id>/index.json`` says it is another box's."""
    if index.boxId != box_id:
        raise StoreError(
            f"{file} is the index of box {index.boxId!r}, but it lies where the index of {box_id!r} belongs",
            problems=[
                Problem(message="boxId does not match the folder it lies in", file=file, key="boxId", value=index.boxId)
            ],
            fix=f"restore {file} (boxId {box_id!r}) from the release manifests beside it, or remove it so "
            "that publish writes a new one",
        )


def merge_entry(index: BoxIndex | None, box_id: str, version: str, entry: IndexEntry) -> BoxIndex | None:
    """The index with ``entry`` added; None when it is already there (nothing to write).

    A different entry for the same (version, target) means the index disagrees with an immutable
    release: that is a ConflictError, never silently rewritten.
    """
    current = index or BoxIndex(boxId=box_id)
    existing = current.versions.get(version, {}).get(entry.targetId)
    if existing == entry:
        return None
    if existing is not None:
        raise ConflictError(
            f"index {index_key(box_id)} already lists {box_id} {version} {entry.targetId} with another entry: "
            f"{entry_differences(existing, entry)}",
            fix="releases are immutable: bump the version in recipe.json and rebuild",
        )
    versions = {v: dict(targets) for v, targets in current.versions.items()}
    versions.setdefault(version, {})[entry.targetId] = entry
    return current.model_copy(update={"versions": versions})


def entry_differences(listed: IndexEntry, new: IndexEntry) -> str:
    """What differs between the listed entry and this publish's: the archive's sha256 and size when they
    do, else the fields that do (``releaseSha256`` alone: another release manifest of the same archive)."""
    if (listed.sha256, listed.size) != (new.sha256, new.size):
        return (
            f"its archive has sha256 {listed.sha256} ({listed.size} bytes) in the index, this publish's "
            f"{new.sha256} ({new.size} bytes)"
        )
    old_fields, new_fields = listed.model_dump(mode="json"), new.model_dump(mode="json")
    names = sorted(name for name in old_fields if old_fields[name] != new_fields[name])
    return f"the same archive (sha256 {new.sha256}), but {', '.join(names)} differ"


def dump_index(index: BoxIndex) -> bytes:
    return canonical_json(index.model_dump(mode="json", exclude_none=True))


def parse_index(data: bytes, file: str) -> BoxIndex:
    try:
        return parse_json_model(
            data,
            BoxIndex,
            file=file,
            error=StoreError,
            invalid="{file} is not a valid scrollcase box index",
            json_fix="restore the index from the release manifests beside it",
            fix="restore the index from the release manifests beside it",
        )
    except NewerFormatError as exc:
        raise exc.in_file(file) from None


def read_index(store: ReadableStore, box_id: str) -> BoxIndex | None:
    """The box's index as the store holds it (None: there is none yet); StoreError when it is not one, or
    is another box's."""
    key = index_key(box_id)
    blob = store.get_bytes(key)
    if blob is None:
        return None
    index = parse_index(blob.data, store.url_for(key))
    check_index_box(index, box_id, store.url_for(key))
    return index


def update_index(
    store: Store,
    box_id: str,
    version: str,
    entry: IndexEntry,
    *,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int = MAX_ATTEMPTS,
) -> bool:
    """Add ``entry`` to the box's index with compare-and-swap; True when the index was written."""
    key = index_key(box_id)
    for attempt in range(attempts):
        blob = store.get_bytes(key)
        current = parse_index(blob.data, store.url_for(key)) if blob else None
        if current is not None:
            check_index_box(current, box_id, store.url_for(key))
        merged = merge_entry(current, box_id, version, entry)
        if merged is None:
            return False
        try:
            if blob is None:
                store.put_bytes(key, dump_index(merged), if_none_match=True, content_type="application/json")
            else:
                store.put_bytes(key, dump_index(merged), if_match=blob.etag, content_type="application/json")
            return True
        except ConflictError:
            # Another publisher updated the index between our read and write: read again.
            sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise StoreError(
        f"{store.url_for(key)} kept changing: gave up after {attempts} attempts",
        fix="rerun publish: the release itself is published; the rerun only updates the index",
    )


def index_json_schema() -> dict[str, Any]:
    return document_json_schema(BoxIndex, "index", "scrollcase box index")


# --- which releases a store already holds (``scrollcase matrix --unpublished``) ---------------------------
# Each box's index read once, and for each release it lists, what it was built from (its release manifest's
# ``pixi.lock`` and asset digests), so a recipe changed without a version bump is never mistaken for published.

LOCK = "pixi.lock"


@dataclass(frozen=True)
class HeldRelease:
    """A release the store's index lists: where its manifest is, and what it was built from (None: the
    manifest is missing or not a release manifest)."""

    release: str
    inputs: Mapping[str, str] | None


def built_from(manifest: ReleaseManifest) -> dict[str, str]:
    """A release's inputs as the matrix compares them: ``pixi.lock`` and ``asset <name>`` -> sha256."""
    return {LOCK: manifest.builtBy.lockSha256, **{f"asset {a.name}": a.sha256 for a in manifest.assets}}


def recipe_inputs(recipe: Recipe, lock_sha256: str | None) -> dict[str, str]:
    """The same for a recipe's folder now (no ``pixi.lock`` entry when none is committed)."""
    lock = {LOCK: lock_sha256} if lock_sha256 is not None else {}
    return {**lock, **{f"asset {a.name}": a.sha256 for a in recipe.assets}}


@dataclass
class HeldReleases:
    """Reads a store's box indexes (each once) and the release manifests they list."""

    store: ReadableStore
    indexes: dict[str, BoxIndex | None] = field(default_factory=dict)

    def find(self, box_id: str, version: str, target_id: str) -> HeldRelease | None:
        """The release the store holds for (box, version, target); None when its index does not list it."""
        if box_id not in self.indexes:
            self.indexes[box_id] = read_index(self.store, box_id)
        index = self.indexes[box_id]
        entry = index.versions.get(version, {}).get(target_id) if index is not None else None
        if entry is None:
            return None
        url = self.store.url_for(entry.release)
        blob = self.store.get_bytes(entry.release)
        if blob is None:
            return HeldRelease(url, None)
        try:
            return HeldRelease(url, built_from(parse_release(blob.data, url)))
        except IntegrityError:
            return HeldRelease(url, None)
