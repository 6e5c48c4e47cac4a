"""The store's TUF metadata as read: its layout's keys, the bytes of the current roles read through a caller's
reader (:func:`read_current`), and those bytes parsed with each role checked against its delegator's keys.
Nothing here signs (trust/repository.py) or opens a store (the caller's reader does)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from tuf.api.exceptions import UnsignedMetadataError
from tuf.api.metadata import Metadata, Root, Signed, Snapshot, Targets, Timestamp
from tuf.api.serialization import DeserializationError

from scrollcase.errors import TrustError

TUF_PREFIX = "tuf/"
TIMESTAMP_KEY = "tuf/timestamp.json"
BOX_ROLE_PREFIX = "box."
# How the caller reads one object of its store: its bytes and ETag, None when absent (bounded by the store's
# own document limit).  The store's executor passes it; this module never opens a store itself.
Reader = Callable[[str], "tuple[bytes, str] | None"]
SignedT = TypeVar("SignedT", Root, Timestamp, Snapshot, Targets)


class MetadataError(TrustError):
    """The store's metadata is not what scrollcase wrote: unreadable, the wrong role, or badly signed."""


@dataclass(frozen=True)
class StoreMetadata:
    """The store's current metadata as read from it: the newest root, the timestamp (with the ETag a
    compare-and-swap replaces), the snapshot it names, the targets and the box roles a step needs.

    ``taken``: keys above the current versions found to exist already (a publisher that lost a race left
    them, unreferenced): new versions skip them."""

    root: bytes
    timestamp: bytes
    timestamp_etag: str
    snapshot: bytes
    targets: bytes
    roles: Mapping[str, bytes] = field(default_factory=dict)  # "box.<boxId>" -> its current bytes
    taken: frozenset[str] = frozenset()


def root_key(version: int) -> str:
    return f"{TUF_PREFIX}{version}.root.json"


def role_key(role: str, version: int) -> str:
    return f"{TUF_PREFIX}{version}.{role}.json"


def box_role(box_id: str) -> str:
    return f"{BOX_ROLE_PREFIX}{box_id}"


def box_paths(box_id: str) -> list[str]:
    return [f"boxes/{box_id}/*", f"boxes/{box_id}/*/*/*"]


def hashed_index_key(index_key: str, sha256: str) -> str:
    """``boxes/<boxId>/<sha256>.index.json``: where a TUF client with consistent snapshots reads the index."""
    folder, _, name = index_key.rpartition("/")
    return f"{folder}/{sha256}.{name}"


# --- reading the metadata the store holds -------------------------------------------------------------


def parse_metadata(data: bytes, kind: type[SignedT], key: str) -> Metadata[SignedT]:
    """``data`` (the object at ``key``) as TUF metadata of role type ``kind``; MetadataError otherwise."""
    try:
        metadata: Metadata[Any] = Metadata.from_bytes(data)
    except DeserializationError as exc:
        raise MetadataError(
            f"{key} is not TUF metadata: {exc}",
            fix=f"restore {key} from a backup of the store's tuf/ folder; it is written only by scrollcase trust "
            "and publish",
        ) from None
    if not isinstance(metadata.signed, kind):
        raise MetadataError(
            f"{key} holds {metadata.signed.type} metadata where {kind.type} belongs",
            fix=f"restore {key} from a backup of the store's tuf/ folder",
        )
    return metadata


def snapshot_key(timestamp: bytes) -> str:
    """The snapshot object the timestamp names."""
    meta = parse_metadata(timestamp, Timestamp, TIMESTAMP_KEY).signed.snapshot_meta
    return role_key("snapshot", meta.version)


def role_keys(snapshot: bytes, key: str, roles: Iterable[str] | None = None) -> dict[str, str]:
    """The object key of each role the snapshot lists (``targets``, ``box.<boxId>``), only ``roles`` when given."""
    meta = parse_metadata(snapshot, Snapshot, key).signed.meta
    listed = {name.removesuffix(".json"): info.version for name, info in meta.items()}
    wanted = listed if roles is None else [role for role in ("targets", *roles) if role in listed]
    return {role: role_key(role, listed[role]) for role in wanted}


def read_current(read: Reader, roles: Iterable[str] | None = ()) -> StoreMetadata | None:
    """The store's current metadata through ``read``: None when it has no ``tuf/timestamp.json`` (a store
    without signed metadata); the box roles ``roles`` names that the snapshot lists (None: all of them)."""
    timestamp = read(TIMESTAMP_KEY)
    if timestamp is None:
        return None
    snapshot_name = snapshot_key(timestamp[0])
    snapshot = _required(read, snapshot_name)
    wanted = role_keys(snapshot, snapshot_name, roles)
    found = {role: _required(read, key) for role, key in wanted.items()}
    version, root = 1, _required(read, root_key(1))
    while (newer := read(root_key(version + 1))) is not None:
        version, root = version + 1, newer[0]
    targets = found.pop("targets")
    return StoreMetadata(root, timestamp[0], timestamp[1], snapshot, targets, found)


def _required(read: Reader, key: str) -> bytes:
    found = read(key)
    if found is None:
        raise MetadataError(
            f"{key} is missing, but the metadata that names it is there",
            fix=f"restore {key} from a backup of the store's tuf/ folder (objects under tuf/ are never deleted)",
        )
    return found[0]


@dataclass
class Current:
    """StoreMetadata parsed, each role checked against its delegator's keys."""

    root: Metadata[Root]
    timestamp: Metadata[Timestamp]
    snapshot: Metadata[Snapshot]
    targets: Metadata[Targets]
    roles: dict[str, Metadata[Targets]]
    taken: frozenset[str]

    @property
    def root_name(self) -> str:
        return root_key(self.root.signed.version)

    def next_version(self, role: str, version: int) -> int:
        version += 1
        while role_key(role, version) in self.taken:
            version += 1
        return version


def verified(current: StoreMetadata) -> Current:
    root = parse_metadata(current.root, Root, "the newest tuf/<N>.root.json")
    name = root_key(root.signed.version)
    check_signed(root, "root", root, name)
    timestamp = parse_metadata(current.timestamp, Timestamp, TIMESTAMP_KEY)
    snapshot_name = role_key("snapshot", timestamp.signed.snapshot_meta.version)
    snapshot = parse_metadata(current.snapshot, Snapshot, snapshot_name)
    targets_name = role_key("targets", snapshot.signed.meta["targets.json"].version)
    targets = parse_metadata(current.targets, Targets, targets_name)
    for role, metadata, key in (("snapshot", snapshot, snapshot_name), ("targets", targets, targets_name)):
        check_signed(root, role, metadata, key)
    roles = {}
    for role, data in current.roles.items():
        key = role_key(role, snapshot.signed.meta[f"{role}.json"].version)
        roles[role] = parse_metadata(data, Targets, key)
        check_signed(targets, role, roles[role], key)
    return Current(root, timestamp, snapshot, targets, roles, current.taken)


def check_signed(delegator: Metadata[Any], role: str, metadata: Metadata[Any], key: str) -> None:
    try:
        delegator.verify_delegate(role, metadata)
    except UnsignedMetadataError as exc:
        raise MetadataError(
            f"{key} is not signed by the keys its delegator names for {role}: {exc}",
            fix=f"restore {key} from a backup of the store's tuf/ folder, or re-sign it with scrollcase trust "
            "rotate if the keys were replaced",
        ) from None


def expiring(current: StoreMetadata, before: datetime) -> dict[str, datetime]:
    """The targets role and the box roles in ``current.roles`` that expire before ``before``, with their expiry."""
    state = verified(current)
    roles = {"targets": state.targets, **state.roles}
    return {role: metadata.signed.expires for role, metadata in roles.items() if metadata.signed.expires < before}


def describe(current: StoreMetadata, now: datetime) -> dict[str, Any]:
    """What ``scrollcase trust status`` shows: each role's version, expiry (and whether it passed), keys and
    threshold, and the box roles the snapshot lists."""
    state = verified(current)
    root = state.root.signed

    def entry(signed: Signed, key: str, role: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"key": key, "version": signed.version, "expires": signed.expires.isoformat()}
        out["expired"] = signed.is_expired(now)
        if role is not None:
            out.update({"keyids": list(root.roles[role].keyids), "threshold": root.roles[role].threshold})
        return out

    meta = state.snapshot.signed.meta
    return {
        "root": entry(root, state.root_name, "root") | {"consistentSnapshot": root.consistent_snapshot},
        "timestamp": entry(state.timestamp.signed, TIMESTAMP_KEY, "timestamp"),
        "snapshot": entry(state.snapshot.signed, role_key("snapshot", state.snapshot.signed.version), "snapshot"),
        "targets": entry(state.targets.signed, role_key("targets", state.targets.signed.version), "targets"),
        "boxes": {
            name.removesuffix(".json").removeprefix(BOX_ROLE_PREFIX): {
                "key": role_key(name.removesuffix(".json"), info.version),
                "version": info.version,
            }
            | (
                {
                    "expires": r.signed.expires.isoformat(),
                    "expired": r.signed.is_expired(now),
                    "targets": len(r.signed.targets),
                }
                if (r := state.roles.get(name.removesuffix(".json")))
                else {}
            )
            for name, info in sorted(meta.items())
            if name.startswith(BOX_ROLE_PREFIX)
        },
    }
