"""A TUF repository in the store layout of docs/trust.md, written with python-tuf's Metadata API directly.

It lets the host side's tests make every kind of genuinely signed (or deliberately mis-signed) metadata an
attack needs: older versions kept to serve again, an expired timestamp, a file signed by a stranger's key, a root
rotation, a new timestamp key after the old one was lost.  ``objects`` is the store as a dict of key -> bytes;
``write_to`` puts it in a directory store.  The metadata it makes is what ``scrollcase trust`` / ``publish``
write: the same keys (``tuf/<N>.<role>.json``, ``tuf/timestamp.json``), roles and delegation per box.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from securesystemslib.signer import CryptoSigner
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

from scrollcase.io.digest import sha256_bytes

TOP_ROLES = ("root", "targets", "snapshot", "timestamp")
DAY = timedelta(days=1)


def later(days: float) -> datetime:
    return (datetime.now(UTC) + timedelta(days=days)).replace(microsecond=0)


class TufStore:
    """Signed metadata for boxes in a dict store; every method writes the objects a publish would write."""

    def __init__(self, boxes: tuple[str, ...] = ("demo",), root_threshold: int = 1) -> None:
        self.objects: dict[str, bytes] = {}
        self.signers: dict[str, list[CryptoSigner]] = {
            role: [CryptoSigner.generate_ed25519() for _ in range(root_threshold if role == "root" else 1)]
            for role in TOP_ROLES
        }
        root = Root(expires=later(365), consistent_snapshot=True)
        for role in TOP_ROLES:
            for signer in self.signers[role]:
                root.add_key(signer.public_key, role)
        root.roles["root"].threshold = root_threshold
        self.root = Metadata(root)
        self.targets = Metadata(Targets(expires=later(365)))
        self.targets.signed.delegations = Delegations(keys={}, roles={})
        self.box_roles: dict[str, Metadata[Targets]] = {}
        for box in boxes:
            self.delegate(box)
        self.snapshot = Metadata(Snapshot(expires=later(30)))
        self.timestamp = Metadata(Timestamp(expires=later(1)))
        self._write_root()
        self._write_targets()
        for box in boxes:
            self._write_box(box)
        self.publish_snapshot()

    # --- roles -----------------------------------------------------------------------------------------

    def delegate(self, box: str) -> None:
        keyids = [signer.public_key.keyid for signer in self.signers["targets"]]
        role = DelegatedRole(f"box.{box}", keyids, 1, True, paths=[f"boxes/{box}/*", f"boxes/{box}/*/*/*"])
        assert self.targets.signed.delegations is not None and self.targets.signed.delegations.roles is not None
        self.targets.signed.delegations.roles[role.name] = role
        for signer in self.signers["targets"]:
            self.targets.signed.delegations.keys[signer.public_key.keyid] = signer.public_key
        self.box_roles[box] = Metadata(Targets(expires=later(365)))

    def sign(self, md: Metadata[Any], role: str, signers: list[CryptoSigner] | None = None) -> bytes:
        md.signatures.clear()
        for signer in signers or self.signers[role]:
            md.sign(signer, append=True)
        return md.to_bytes()

    def _write_root(self, extra_signers: list[CryptoSigner] = ()) -> None:  # type: ignore[assignment]
        data = self.sign(self.root, "root", [*self.signers["root"], *extra_signers])
        self.objects[f"tuf/{self.root.signed.version}.root.json"] = data

    def _write_targets(self) -> None:
        self.objects[f"tuf/{self.targets.signed.version}.targets.json"] = self.sign(self.targets, "targets")

    def _write_box(self, box: str) -> None:
        md = self.box_roles[box]
        self.objects[f"tuf/{md.signed.version}.box.{box}.json"] = self.sign(md, "targets")

    # --- what publish and `trust timestamp` do ----------------------------------------------------------

    def add_targets(self, box: str, targets: Mapping[str, bytes], *, index_copy: bool = True) -> None:
        """``targets`` (store key -> bytes) signed in the box's role, written to the store with the hashed index
        copy, then a new snapshot and timestamp (as publish does)."""
        md = self.box_roles[box]
        for key, data in targets.items():
            md.signed.targets[key] = TargetFile.from_data(key, data, ["sha256"])
            self.objects[key] = data
            if index_copy and key.endswith("/index.json"):
                folder = key.rsplit("/", 1)[0]
                self.objects[f"{folder}/{sha256_bytes(data)}.index.json"] = data
        md.signed.version += 1
        self._write_box(box)
        self.publish_snapshot()

    def publish_snapshot(self, *, timestamp_expires: datetime | None = None) -> None:
        snap = self.snapshot.signed
        snap.meta["targets.json"] = MetaFile(self.targets.signed.version)
        for box, md in self.box_roles.items():
            snap.meta[f"box.{box}.json"] = MetaFile(md.signed.version)
        snap.version += 1
        snap.expires = later(30)
        self.objects[f"tuf/{snap.version}.snapshot.json"] = self.sign(self.snapshot, "snapshot")
        self.refresh_timestamp(expires=timestamp_expires)

    def refresh_timestamp(self, *, expires: datetime | None = None, signers: list[CryptoSigner] | None = None) -> None:
        stamp = self.timestamp.signed
        snapshot_bytes = self.objects[f"tuf/{self.snapshot.signed.version}.snapshot.json"]
        stamp.snapshot_meta = MetaFile(
            self.snapshot.signed.version, len(snapshot_bytes), {"sha256": sha256_bytes(snapshot_bytes)}
        )
        stamp.version += 1
        stamp.expires = expires or later(1)
        self.objects["tuf/timestamp.json"] = self.sign(self.timestamp, "timestamp", signers)

    def rotate(self, role: str) -> list[CryptoSigner]:
        """Root N+1 naming a new key for ``role`` (the old one lost or compromised), signed by root N's keys and,
        for the root role, by the new keys too; returns the old signers."""
        old = self.signers[role]
        new = [CryptoSigner.generate_ed25519() for _ in old]
        root = self.root.signed
        for signer in old:
            root.revoke_key(signer.public_key.keyid, role)
        for signer in new:
            root.add_key(signer.public_key, role)
        root.version += 1
        self.signers[role] = new
        self._write_root(extra_signers=old if role == "root" else [])
        if role == "targets":  # the delegations name the new key; every role it signs is signed again
            delegations = self.targets.signed.delegations
            assert delegations is not None and delegations.roles is not None
            delegations.keys = {signer.public_key.keyid: signer.public_key for signer in new}
            for delegated in delegations.roles.values():
                delegated.keyids = [signer.public_key.keyid for signer in new]
            self.targets.signed.version += 1
            self._write_targets()
            for box, md in self.box_roles.items():
                md.signed.version += 1
                self._write_box(box)
        if role in ("targets", "snapshot"):
            self.publish_snapshot()
        return old

    def root_bytes(self, version: int = 1) -> bytes:
        return self.objects[f"tuf/{version}.root.json"]

    def write_to(self, root: Path) -> None:
        for key, data in self.objects.items():
            path = root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def reader(self) -> DictReader:
        return DictReader(self.objects)


class DictReader:
    """The reader the client builds over a store, over ``objects``; counts what was read."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects
        self.reads: list[str] = []

    def __call__(self, key: str, max_bytes: int) -> bytes | None:
        self.reads.append(key)
        data = self.objects.get(key)
        return None if data is None else data[: max_bytes + 1]


def tree_digest(folder: Path) -> str:
    """Every name, link target and byte under ``folder``: equal digests = the same state."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()
