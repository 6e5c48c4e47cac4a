"""The repository half of a store's TUF metadata (docs/trust.md#signed-store-metadata): pure functions that take
the metadata bytes read from the store, the keys and the clock, and return the objects to write, in write order.

Layout (all keys relative to the store root): ``tuf/<N>.root.json`` (every version kept),
``tuf/timestamp.json`` (the only object replaced, by compare-and-swap), ``tuf/<N>.snapshot.json``,
``tuf/<N>.targets.json`` and ``tuf/<N>.box.<boxId>.json`` (consistent snapshots: a version is never
rewritten).  The top-level targets role signs no target itself: it delegates one terminating role
``box.<boxId>`` per box, for the paths ``boxes/<boxId>/*`` and ``boxes/<boxId>/*/*/*`` (TUF's ``*`` stops at
``/``), signed by the targets keys.  Target paths are the store's object keys; the mutable box index is also
written under its content-addressed key ``boxes/<boxId>/<sha256>.index.json``, the only key hosts read it from.

Nothing here reads or writes a store: the store's executor (store/publish.py) reads :class:`StoreMetadata`,
calls these, and writes what they return (create-if-absent, then the timestamp by compare-and-swap).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from securesystemslib.signer import CryptoSigner, Key
from tuf.api.exceptions import UnsignedMetadataError
from tuf.api.metadata import (
    DelegatedRole,
    Delegations,
    Metadata,
    MetaFile,
    Root,
    Signed,
    Snapshot,
    TargetFile,
    Targets,
    Timestamp,
)
from tuf.api.serialization import DeserializationError

from scrollcase.errors import TrustError
from scrollcase.trust.keys import ONLINE_ROLES, RoleKeys, WrongKeyError

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
class Expiries:
    """How long each role's metadata stays valid after it is signed."""

    root: timedelta = timedelta(days=365)
    targets: timedelta = timedelta(days=365)  # the top-level targets and every box.<boxId> role
    snapshot: timedelta = timedelta(days=30)
    timestamp: timedelta = timedelta(days=1)

    def of(self, role: str) -> timedelta:
        value: timedelta = self.targets if role.startswith(BOX_ROLE_PREFIX) else getattr(self, role)
        return value


DEFAULT_EXPIRIES = Expiries()


@dataclass(frozen=True)
class TargetFacts:
    """A target known by its length and sha256 (an archive publish measured; no need to hold its bytes)."""

    length: int
    sha256: str


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
class _Current:
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


def _verified(current: StoreMetadata) -> _Current:
    root = parse_metadata(current.root, Root, "the newest tuf/<N>.root.json")
    name = root_key(root.signed.version)
    _check_signed(root, "root", root, name)
    timestamp = parse_metadata(current.timestamp, Timestamp, TIMESTAMP_KEY)
    snapshot_name = role_key("snapshot", timestamp.signed.snapshot_meta.version)
    snapshot = parse_metadata(current.snapshot, Snapshot, snapshot_name)
    targets_name = role_key("targets", snapshot.signed.meta["targets.json"].version)
    targets = parse_metadata(current.targets, Targets, targets_name)
    for role, metadata, key in (("snapshot", snapshot, snapshot_name), ("targets", targets, targets_name)):
        _check_signed(root, role, metadata, key)
    roles = {}
    for role, data in current.roles.items():
        key = role_key(role, snapshot.signed.meta[f"{role}.json"].version)
        roles[role] = parse_metadata(data, Targets, key)
        _check_signed(targets, role, roles[role], key)
    return _Current(root, timestamp, snapshot, targets, roles, current.taken)


def _check_signed(delegator: Metadata[Any], role: str, metadata: Metadata[Any], key: str) -> None:
    try:
        delegator.verify_delegate(role, metadata)
    except UnsignedMetadataError as exc:
        raise MetadataError(
            f"{key} is not signed by the keys its delegator names for {role}: {exc}",
            fix=f"restore {key} from a backup of the store's tuf/ folder, or re-sign it with scrollcase trust "
            "rotate if the keys were replaced",
        ) from None


# --- signing -------------------------------------------------------------------------------------------


def _sign(signed: Root | Timestamp | Snapshot | Targets, signers: Sequence[CryptoSigner]) -> bytes:
    metadata: Metadata[Any] = Metadata(signed)
    for signer in signers:
        metadata.sign(signer, append=True)
    return metadata.to_bytes()


def _role_signers(
    keys: RoleKeys, key_role: str, keyids: Sequence[str], threshold: int, names: str
) -> list[CryptoSigner]:
    """The given keys of ``key_role`` that ``names`` lists; WrongKeyError when they do not reach its threshold."""
    signers = [signer for signer in keys.of(key_role) if signer.public_key.keyid in keyids]
    if len(signers) < threshold:
        given = ", ".join(signer.public_key.keyid[:16] for signer in keys.of(key_role))
        raise WrongKeyError(
            f"the {key_role} key(s) from {keys.source(key_role)} (keyid {given}) are not {threshold} of the keys "
            f"{names} names for it ({', '.join(k[:16] for k in keyids) or 'none'})",
            fix=f"pass the {key_role} key the store was set up with; if it is lost, replace it with "
            f"scrollcase trust rotate --role {key_role} --new-key FILE (needs the offline root key)",
        )
    return signers


def _top_signers(current: _Current, keys: RoleKeys, role: str) -> list[CryptoSigner]:
    spec = current.root.signed.roles[role]
    return _role_signers(keys, role, spec.keyids, spec.threshold, current.root_name)


def _fresh(signed: SignedT, version: int, now: datetime, expiry: timedelta) -> SignedT:
    signed.version = version
    signed.expires = now + expiry
    return signed


def _commit(
    current: _Current, changed: Mapping[str, Targets], keys: RoleKeys, now: datetime, expiries: Expiries
) -> dict[str, bytes]:
    """Write ``changed`` roles (targets and box roles, already at their new versions), then a new snapshot
    listing them and a new timestamp naming it."""
    out: dict[str, bytes] = {}
    snapshot = current.snapshot.signed
    for role, signed in changed.items():
        if role == "targets":
            signers = _top_signers(current, keys, "targets")
        else:
            delegated = _delegation(current, role)
            names = role_key("targets", current.snapshot.signed.meta["targets.json"].version)
            signers = _role_signers(keys, "targets", delegated.keyids, delegated.threshold, names)
        out[role_key(role, signed.version)] = _sign(signed, signers)
        snapshot.meta[f"{role}.json"] = MetaFile(version=signed.version)
    _fresh(snapshot, current.next_version("snapshot", snapshot.version), now, expiries.snapshot)
    out[role_key("snapshot", snapshot.version)] = _sign(snapshot, _top_signers(current, keys, "snapshot"))
    out.update(_timestamp(current, snapshot.version, keys, now, expiries))
    return out


def _timestamp(
    current: _Current, snapshot_version: int, keys: RoleKeys, now: datetime, expiries: Expiries
) -> dict[str, bytes]:
    timestamp = current.timestamp.signed
    timestamp.snapshot_meta = MetaFile(version=snapshot_version)
    _fresh(timestamp, timestamp.version + 1, now, expiries.timestamp)
    return {TIMESTAMP_KEY: _sign(timestamp, _top_signers(current, keys, "timestamp"))}


def _delegation(current: _Current, role: str) -> DelegatedRole:
    delegations = current.targets.signed.delegations
    if delegations is None or delegations.roles is None or role not in delegations.roles:
        raise MetadataError(f"the targets role delegates no role {role!r}", fix="publish the box again")
    return delegations.roles[role]


# --- the steps -----------------------------------------------------------------------------------------


def init_metadata(
    keys: RoleKeys, now: datetime, expiries: Expiries = DEFAULT_EXPIRIES, root_threshold: int = 1
) -> dict[str, bytes]:
    """Version 1 of every role: root (its keys, ``root_threshold`` of them to sign), an empty targets that
    delegates no box yet, the snapshot listing it and the timestamp naming that; in write order."""
    root_keys = keys.public("root")
    if not 1 <= root_threshold <= len(root_keys):
        raise WrongKeyError(
            f"a root threshold of {root_threshold} needs at least that many root keys; {len(root_keys)} given "
            f"({keys.source('root')})",
            fix=f"give {root_threshold} root keys (root.pem, root-2.pem, …), or a threshold of at most "
            f"{len(root_keys)}",
        )
    root = _fresh(Root(consistent_snapshot=True), 1, now, expiries.root)
    for role in ("root", *ONLINE_ROLES):
        for key in keys.public(role):
            root.add_key(key, role)
    root.roles["root"].threshold = root_threshold
    targets = _fresh(Targets(delegations=Delegations(keys={}, roles={})), 1, now, expiries.targets)
    snapshot = _fresh(Snapshot(meta={"targets.json": MetaFile(version=1)}), 1, now, expiries.snapshot)
    timestamp = _fresh(Timestamp(snapshot_meta=MetaFile(version=1)), 1, now, expiries.timestamp)
    return {
        root_key(1): _sign(root, keys.of("root")),
        role_key("targets", 1): _sign(targets, keys.of("targets")),
        role_key("snapshot", 1): _sign(snapshot, keys.of("snapshot")),
        TIMESTAMP_KEY: _sign(timestamp, keys.of("timestamp")),
    }


def target_files(box_id: str, targets: Mapping[str, bytes | TargetFacts]) -> dict[str, TargetFile]:
    """The TUF target of each store key (length and sha256); TrustError for a key outside the box's folder."""
    out = {}
    for path, value in targets.items():
        if not any(DelegatedRole("_", [], 1, True, paths=[p]).is_delegated_path(path) for p in box_paths(box_id)):
            raise TrustError(
                f"{path} is not an object of box {box_id} (boxes/{box_id}/<file> or boxes/{box_id}/<version>/"
                "<target>/<file>): its box role cannot sign it",
                fix="this is a bug in scrollcase: report it",
            )
        if isinstance(value, bytes):
            out[path] = TargetFile.from_data(path, value, ["sha256"])
        else:
            out[path] = TargetFile(value.length, {"sha256": value.sha256}, path)
    return out


def sign_targets(
    current: StoreMetadata,
    box_id: str,
    targets: Mapping[str, bytes | TargetFacts],
    keys: RoleKeys,
    now: datetime,
    expiries: Expiries = DEFAULT_EXPIRIES,
) -> dict[str, bytes]:
    """Add (or update) ``targets`` in box ``box_id``'s role: the objects to write, in order: the index's
    content-addressed copy (when ``targets`` holds the index's bytes), the new box role version, the new
    top-level targets (only when the box is new: it delegates the box's role), the snapshot, the timestamp.
    ``{}`` when the role already signs exactly these targets.  ``current.roles`` must hold the box's role
    when the snapshot lists it."""
    state = _verified(current)
    for role in ONLINE_ROLES:
        _top_signers(state, keys, role)  # every key checked before anything is signed
    files = target_files(box_id, targets)
    role = box_role(box_id)
    changed: dict[str, Targets] = {}
    if f"{role}.json" not in state.snapshot.signed.meta:
        changed["targets"] = _delegate(state, box_id, now, expiries)
        box, base = Targets(), 0
    elif role not in state.roles:
        raise MetadataError(f"sign_targets needs the current {role} role", fix="this is a bug in scrollcase: report it")
    else:
        box = state.roles[role].signed
        base = box.version
        if all(box.targets.get(path) == target for path, target in files.items()):
            return {}
    box.targets.update(files)
    changed = {role: _fresh(box, state.next_version(role, base), now, expiries.targets), **changed}
    out = {
        hashed_index_key(path, files[path].hashes["sha256"]): value
        for path, value in targets.items()
        if isinstance(value, bytes) and path == f"boxes/{box_id}/index.json"
    }
    return out | _commit(state, changed, keys, now, expiries)


def _delegate(current: _Current, box_id: str, now: datetime, expiries: Expiries) -> Targets:
    """The next top-level targets: the current one delegating ``box.<boxId>`` to the targets keys."""
    targets = current.targets.signed
    spec = current.root.signed.roles["targets"]
    delegations = targets.delegations or Delegations(keys={}, roles={})
    for keyid in spec.keyids:
        delegations.keys[keyid] = current.root.signed.keys[keyid]
    roles = dict(delegations.roles or {})
    roles[box_role(box_id)] = DelegatedRole(
        box_role(box_id), list(spec.keyids), spec.threshold, terminating=True, paths=box_paths(box_id)
    )
    targets.delegations = Delegations(keys=delegations.keys, roles=roles)
    return _fresh(targets, current.next_version("targets", targets.version), now, expiries.targets)


def refresh_timestamp(
    current: StoreMetadata, keys: RoleKeys, now: datetime, expiries: Expiries = DEFAULT_EXPIRIES
) -> dict[str, bytes]:
    """A new timestamp (``scrollcase trust timestamp``, run on a schedule well inside its expiry), and a new
    snapshot first when the current one expires within a quarter of its lifetime."""
    state = _verified(current)
    if state.snapshot.signed.expires - now < expiries.snapshot / 4:
        return _commit(state, {}, keys, now, expiries)
    return _timestamp(state, state.snapshot.signed.version, keys, now, expiries)


def rotate_root(
    current: StoreMetadata,
    old_root_keys: RoleKeys,
    new_keys: RoleKeys,
    now: datetime,
    *,
    roles: Iterable[str],
    expiries: Expiries = DEFAULT_EXPIRIES,
    root_threshold: int | None = None,
) -> dict[str, bytes]:
    """Root N+1 naming ``new_keys``' keys for each of ``roles`` (replacing the old ones; ``root_threshold``
    changes the root's), signed by a threshold of root N's keys (``old_root_keys``) AND of N+1's, so a
    client holding root N accepts it; then each replaced online role re-signed with its new key (targets
    and every box role, whose delegations name the targets keys, then snapshot and timestamp): a lost
    timestamp or snapshot key is replaced this way.  ``new_keys`` holds the online keys this needs;
    ``current.roles`` every box role when ``roles`` has ``targets``."""
    state = _verified(current)
    replaced = list(dict.fromkeys(roles))
    old = state.root.signed.roles["root"]
    old_signers = _role_signers(old_root_keys, "root", list(old.keyids), old.threshold, state.root_name)
    root = state.root.signed
    for role in replaced:
        for keyid in list(root.roles[role].keyids):
            root.revoke_key(keyid, role)
        for key in new_keys.public(role):
            root.add_key(key, role)
    if root_threshold is not None:
        root.roles["root"].threshold = root_threshold
    new_spec = root.roles["root"]
    _fresh(root, root.version + 1, now, expiries.root)
    new_source = new_keys if "root" in replaced else old_root_keys
    new_signers = _role_signers(new_source, "root", new_spec.keyids, new_spec.threshold, root_key(root.version))
    signers = old_signers + [
        s for s in new_signers if s.public_key.keyid not in {o.public_key.keyid for o in old_signers}
    ]
    out = {root_key(root.version): _sign(root, signers)}
    if "targets" in replaced:
        return out | _commit(state, _redelegate(state, now, expiries), new_keys, now, expiries)
    if "snapshot" in replaced:
        return out | _commit(state, {}, new_keys, now, expiries)
    if "timestamp" in replaced:
        return out | _timestamp(state, state.snapshot.signed.version, new_keys, now, expiries)
    return out


def _redelegate(current: _Current, now: datetime, expiries: Expiries) -> dict[str, Targets]:
    """The top-level targets and every box role at new versions, the delegations naming the new targets keys."""
    spec = current.root.signed.roles["targets"]
    listed = [name.removesuffix(".json") for name in current.snapshot.signed.meta if name.startswith(BOX_ROLE_PREFIX)]
    missing = [role for role in listed if role not in current.roles]
    if missing:
        raise MetadataError(f"re-signing the box roles needs {', '.join(missing)}", fix="this is a bug in scrollcase")
    targets = current.targets.signed
    keys: dict[str, Key] = {keyid: current.root.signed.keys[keyid] for keyid in spec.keyids}
    delegated = dict((targets.delegations.roles or {}) if targets.delegations else {})
    for role in delegated.values():
        role.keyids, role.threshold = list(spec.keyids), spec.threshold
    targets.delegations = Delegations(keys=keys, roles=delegated)
    changed = {
        role: _fresh(
            current.roles[role].signed,
            current.next_version(role, current.roles[role].signed.version),
            now,
            expiries.targets,
        )
        for role in listed
    }
    changed["targets"] = _fresh(targets, current.next_version("targets", targets.version), now, expiries.targets)
    return changed


def describe(current: StoreMetadata, now: datetime) -> dict[str, Any]:
    """What ``scrollcase trust status`` shows: each role's version, expiry (and whether it passed), keys and
    threshold, and the box roles the snapshot lists."""
    state = _verified(current)
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
