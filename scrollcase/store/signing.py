"""The thin executor of a store's signed metadata (TUF, docs/trust.md#signed-store-metadata).

trust/repository.py signs; this reads the store's current metadata through the store's bounded reads, hands it
over, and writes what comes back in its order: every new object create-if-absent (a version is never
rewritten), then ``tuf/timestamp.json``, the one mutable object, by compare-and-swap on the ETag it read.  A
ConflictError at any of them means another publisher signed first: read everything again and sign again on top
of what it wrote (a version it left unreferenced is skipped), as :func:`scrollcase.store.index.update_index` does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from scrollcase.errors import ConflictError, StoreError, TrustError, UsageError
from scrollcase.format.release import ReleaseManifest, parse_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import Blob, Store
from scrollcase.store.index import check_index_box, index_key, parse_index
from scrollcase.store.local import LocalStore
from scrollcase.store.remote import sbom_key
from scrollcase.store.s3 import S3Store
from scrollcase.trust.keys import ONLINE_ROLES, RoleKeys, require_keys
from scrollcase.trust.repository import (
    DEFAULT_EXPIRIES,
    TIMESTAMP_KEY,
    TUF_PREFIX,
    Expiries,
    Reader,
    StoreMetadata,
    TargetFacts,
    box_role,
    check_keys,
    init_metadata,
    read_current,
    sign_targets,
)

MAX_ATTEMPTS = 10
JSON = "application/json"
Sign = Callable[[StoreMetadata], Mapping[str, bytes]]
Clock = Callable[[], datetime]
Progress = Callable[[str], None]


class Documents(Protocol):
    """What reading the metadata takes of a store: its bounded small-object reads."""

    @property
    def url(self) -> str: ...

    def url_for(self, key: str) -> str: ...

    def get_bytes(self, key: str) -> Blob | None: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


class AlreadySignedError(TrustError):
    """trust init on a store that already has signed metadata (or the start of it)."""


class LostRaceError(Exception):
    """Another writer created ``key`` first (or replaced the timestamp): read again and sign again."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def store_reader(store: Documents) -> Reader:
    """The store's bounded document reads as trust/repository.py's reader: (bytes, ETag) or None."""

    def read(key: str) -> tuple[bytes, str] | None:
        blob = store.get_bytes(key)
        return None if blob is None else (blob.data, blob.etag)

    return read


def write_objects(store: Store, objects: Mapping[str, bytes], timestamp_etag: str | None) -> tuple[str, ...]:
    """Write ``objects`` in order: each create-if-absent, the timestamp by compare-and-swap on
    ``timestamp_etag`` (None: it must be absent); the keys written.  A content-addressed copy someone else
    created holds the same bytes and counts as written; any other conflict is a lost race (:class:`LostRaceError`)."""
    written = []
    for key, data in objects.items():
        try:
            if key == TIMESTAMP_KEY and timestamp_etag is not None:
                store.put_bytes(key, data, if_match=timestamp_etag, content_type=JSON)
            else:
                store.put_bytes(key, data, if_none_match=True, content_type=JSON)
        except ConflictError:
            if not key.startswith(TUF_PREFIX):
                continue
            raise LostRaceError(key) from None
        written.append(key)
    return tuple(written)


def commit_signed(
    store: Store,
    sign: Sign,
    roles: Iterable[str] | None = (),
    *,
    progress: Progress = lambda _: None,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int = MAX_ATTEMPTS,
) -> tuple[str, ...]:
    """Read the current metadata (with the box roles ``roles`` names; None: all), sign, write; again on a lost
    race.  The keys written."""
    taken: set[str] = set()
    for attempt in range(attempts):
        current = read_current(store_reader(store), roles)
        if current is None:
            raise TrustError(
                f"{store.url_for(TIMESTAMP_KEY)} does not exist: this store has no signed metadata",
                fix=f"set it up first: scrollcase trust init --store {store.url} --keys DIR",
            )
        try:
            return write_objects(store, sign(replace(current, taken=frozenset(taken))), current.timestamp_etag)
        except LostRaceError as lost:
            if lost.key != TIMESTAMP_KEY:
                taken.add(lost.key)
            progress(f"another writer signed first ({lost.key}): reading the signed metadata again")
            sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise StoreError(
        f"{store.url_for(TIMESTAMP_KEY)} kept changing: gave up after {attempts} attempts",
        fix="rerun the command: what is already written stays; the rerun signs on top of it",
    )


# --- publish -------------------------------------------------------------------------------------------


def check_signing(store: Documents, keys: RoleKeys | None) -> bool:
    """Before publish writes anything: whether the store's objects are signed (it has ``tuf/timestamp.json``),
    and then that ``keys`` hold the online keys its root names (MissingKeysError or WrongKeyError if not)."""
    current = read_current(store_reader(store))
    if current is None:
        return False
    doing = f"publishing to {store.url}, whose objects are signed ({store.url_for(TIMESTAMP_KEY)} exists),"
    require_keys(keys or RoleKeys(), ONLINE_ROLES, doing)
    check_keys(current, keys or RoleKeys())
    return True


def sign_release(
    store: Store, manifest: ReleaseManifest, keys: RoleKeys, *, now: Clock = utc_now, progress: Progress = print
) -> tuple[str, ...]:
    """Sign the release's objects and its box's index as they are in the store now; the metadata keys written."""

    def sign(current: StoreMetadata) -> Mapping[str, bytes]:
        return sign_targets(current, manifest.boxId, release_targets(store, manifest), keys, now())

    return commit_signed(store, sign, [box_role(manifest.boxId)], progress=progress)


def release_targets(store: Documents, manifest: ReleaseManifest) -> dict[str, bytes | TargetFacts]:
    """What the box role signs for one release, read back from the store (the bytes there are what a host
    gets): the archive by the manifest's length and sha256 (publish checked it), the small objects' bytes."""
    small = [manifest.keys.sha256, sbom_key(manifest), manifest.keys.release, index_key(manifest.boxId)]
    targets: dict[str, bytes | TargetFacts] = {
        manifest.keys.archive: TargetFacts(manifest.archive.size, manifest.archive.sha256)
    }
    for key in small:
        if key is not None:
            targets[key] = _required(store, key)
    return targets


def _required(store: Documents, key: str) -> bytes:
    blob = store.get_bytes(key)
    if blob is None:
        raise StoreError(
            f"{store.url_for(key)} is missing: it cannot be signed",
            fix="publish the release again (it writes what is missing), then sign",
        )
    return blob.data


# --- trust init: the first metadata, and the releases the store already holds ----------------------------


def init_store(
    store: Store,
    keys: RoleKeys,
    box_ids: Sequence[str],
    *,
    now: Clock = utc_now,
    expiries: Expiries = DEFAULT_EXPIRIES,
    root_threshold: int = 1,
    progress: Progress = lambda _: None,
) -> tuple[str, ...]:
    """Write version 1 of every role, then sign every release the indexes of ``box_ids`` list."""
    for key in (TIMESTAMP_KEY, f"{TUF_PREFIX}1.root.json"):
        if store.exists(key):
            raise AlreadySignedError(
                f"{store.url_for(key)} exists: this store's metadata is already set up",
                fix="see it with scrollcase trust status; replace keys with scrollcase trust rotate (an init that "
                f"stopped halfway: remove the objects under tuf/ ({store.url_for(key)} and the rest) and run "
                "trust init again)",
            )
    objects = init_metadata(keys, now(), expiries, root_threshold)
    try:
        written = list(write_objects(store, objects, None))
    except LostRaceError as lost:
        raise AlreadySignedError(
            f"{store.url_for(lost.key)} appeared while trust init ran: another init is setting this store up",
            fix="run scrollcase trust status to see which init won",
        ) from None
    for box_id in box_ids:
        progress(f"signing the releases of {box_id} the store already holds")

        def sign(current: StoreMetadata, box_id: str = box_id) -> Mapping[str, bytes]:
            return sign_targets(current, box_id, held_targets(store, box_id), keys, now(), expiries)

        written += commit_signed(store, sign, [box_role(box_id)], progress=progress)
    return tuple(written)


def held_targets(store: Store, box_id: str) -> dict[str, bytes | TargetFacts]:
    """Every object of every release the box's index lists, checked against each other (the index entry, the
    manifest's bytes and its archive digest) before they are signed: signing vouches for them."""
    key = index_key(box_id)
    blob = store.get_bytes(key)
    if blob is None:
        raise UsageError(f"{store.url_for(key)} does not exist", fix=f"check --box {box_id}")
    index = parse_index(blob.data, store.url_for(key))
    check_index_box(index, box_id, store.url_for(key))
    targets: dict[str, bytes | TargetFacts] = {key: blob.data}
    for entries in index.versions.values():
        for entry in entries.values():
            data = _required(store, entry.release)
            manifest = parse_release(data, store.url_for(entry.release))
            if (manifest.archive.sha256, manifest.archive.size) != (entry.sha256, entry.size) or (
                entry.releaseSha256 not in (None, sha256_bytes(data))
            ):
                raise StoreError(
                    f"{store.url_for(entry.release)} and the index entry for it disagree about the release",
                    fix=f"restore {store.url_for(index_key(box_id))} or the manifest before signing them",
                )
            info = store.head(entry.archive)
            if info is not None and info.size != entry.size:
                raise StoreError(
                    f"{store.url_for(entry.archive)} is {info.size} bytes; its manifest says {entry.size}",
                    fix="publish the release again from its built files",
                )
            targets[entry.archive] = TargetFacts(entry.size, entry.sha256)
            targets[entry.release] = data
            for small in (entry.sha256Key, sbom_key(manifest)):
                if small is not None:
                    targets[small] = _required(store, small)
    return targets


def box_ids(store: Store) -> list[str]:
    """The boxes whose index the store holds (a folder store's ``boxes/*/index.json``; on S3 a listing)."""
    if isinstance(store, LocalStore):
        return sorted(path.parent.name for path in (Path(store.root) / "boxes").glob("*/index.json"))
    if isinstance(store, S3Store):
        prefix = store.object_key("boxes/")
        pages = store.client.get_paginator("list_objects_v2").paginate(
            Bucket=store.bucket, Prefix=prefix, Delimiter="/"
        )
        folders = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
        names = [folder.removeprefix(prefix).rstrip("/") for folder in folders]
        return sorted(name for name in names if store.exists(index_key(name)))
    raise UsageError(f"cannot list the boxes of {store.url}", fix="name each box with --box BOX_ID")
