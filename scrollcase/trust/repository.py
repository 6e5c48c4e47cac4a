"""The repository half of a store's TUF metadata (docs/trust.md#signed-store-metadata): pure functions that take
the metadata bytes read from the store, the keys and the clock, and return the objects to write, in write order.

Layout (all keys relative to the store root): ``tuf/<N>.root.json`` (every version kept),
``tuf/timestamp.json`` (the only object replaced, by compare-and-swap), ``tuf/<N>.snapshot.json``,
``tuf/<N>.targets.json`` and ``tuf/<N>.box.<boxId>.json`` (consistent snapshots: a version is never
rewritten).  The top-level targets role signs no target itself: it delegates one terminating role
``box.<boxId>`` per box, for the paths ``boxes/<boxId>/*`` and ``boxes/<boxId>/*/*/*`` (TUF's ``*`` stops at
``/``), signed by the targets keys.  Target paths are the store's object keys; the mutable box index is also
written under its content-addressed key ``boxes/<boxId>/<sha256>.index.json``, the only key hosts read it from.

Nothing here reads or writes a store: the store's executor (store/signing.py) reads :class:`StoreMetadata`,
calls these, and writes what they return (create-if-absent, then the timestamp by compare-and-swap).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from securesystemslib.signer import CryptoSigner, Key
from tuf.api.metadata import (
    DelegatedRole,
    Delegations,
    Metadata,
    MetaFile,
    Root,
    Snapshot,
    TargetFile,
    Targets,
    Timestamp,
)

from scrollcase.errors import TrustError
from scrollcase.trust.current import (
    BOX_ROLE_PREFIX,
    TIMESTAMP_KEY,
    TUF_PREFIX,
    Current,
    MetadataError,
    Reader,
    SignedT,
    StoreMetadata,
    box_paths,
    box_role,
    describe,
    expiring,
    hashed_index_key,
    read_current,
    role_key,
    root_key,
    verified,
)
from scrollcase.trust.keys import ONLINE_ROLES, RoleKeys, WrongKeyError

# The API other modules use (trust.md): the layout's names and the reading live in trust/current.py.
__all__ = [
    "DEFAULT_EXPIRIES",
    "TIMESTAMP_KEY",
    "TUF_PREFIX",
    "Expiries",
    "MetadataError",
    "Reader",
    "StoreMetadata",
    "TargetFacts",
    "box_paths",
    "box_role",
    "check_keys",
    "describe",
    "expiring",
    "hashed_index_key",
    "init_metadata",
    "read_current",
    "refresh_timestamp",
    "role_key",
    "root_key",
    "rotate_root",
    "sign_targets",
]


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


def _top_signers(current: Current, keys: RoleKeys, role: str) -> list[CryptoSigner]:
    spec = current.root.signed.roles[role]
    return _role_signers(keys, role, spec.keyids, spec.threshold, current.root_name)


def _fresh(signed: SignedT, version: int, now: datetime, expiry: timedelta) -> SignedT:
    signed.version = version
    signed.expires = now + expiry
    return signed


def _commit(
    current: Current, changed: Mapping[str, Targets], keys: RoleKeys, now: datetime, expiries: Expiries
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
    current: Current, snapshot_version: int, keys: RoleKeys, now: datetime, expiries: Expiries
) -> dict[str, bytes]:
    timestamp = current.timestamp.signed
    timestamp.snapshot_meta = MetaFile(version=snapshot_version)
    _fresh(timestamp, timestamp.version + 1, now, expiries.timestamp)
    return {TIMESTAMP_KEY: _sign(timestamp, _top_signers(current, keys, "timestamp"))}


def _delegation(current: Current, role: str) -> DelegatedRole:
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


def check_keys(current: StoreMetadata, keys: RoleKeys, roles: Iterable[str] = ONLINE_ROLES) -> None:
    """WrongKeyError (or MissingKeysError) unless ``keys`` hold a threshold of the keys the store's root names
    for each of ``roles``: publish checks this before it uploads anything."""
    state = verified(current)
    for role in roles:
        _top_signers(state, keys, role)


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
    state = verified(current)
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


def _delegate(current: Current, box_id: str, now: datetime, expiries: Expiries) -> Targets:
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
    """A new timestamp (``scrollcase trust timestamp``, run on a schedule well inside its expiry); first, with
    the targets key, new versions of the targets and box roles (those in ``current.roles``) that expire within
    a quarter of their lifetime, and a new snapshot when those changed or it expires within a quarter of its
    own.  Without the targets key, expiring targets roles are left for :func:`expiring` to report."""
    state = verified(current)
    changed: dict[str, Targets] = {}
    if keys.signers.get("targets"):
        for role in expiring(current, now + expiries.targets / 4):
            signed = state.targets.signed if role == "targets" else state.roles[role].signed
            changed[role] = _fresh(signed, state.next_version(role, signed.version), now, expiries.targets)
    if changed or state.snapshot.signed.expires - now < expiries.snapshot / 4:
        return _commit(state, changed, keys, now, expiries)
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
    state = verified(current)
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


def _redelegate(current: Current, now: datetime, expiries: Expiries) -> dict[str, Targets]:
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
