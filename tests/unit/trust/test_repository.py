"""trust/keys.py and trust/repository.py: keys on disk and in the environment, and the metadata each step signs,
checked with python-tuf's own Metadata.verify_delegate (never with scrollcase's code)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from tuf.api.exceptions import UnsignedMetadataError
from tuf.api.metadata import Metadata, Root, Snapshot, TargetFile, Targets, Timestamp

from scrollcase.errors import TrustError
from scrollcase.io.digest import sha256_bytes
from scrollcase.trust.keys import (
    ENV_VARS,
    MissingKeysError,
    RoleKeys,
    WrongKeyError,
    generate_keys,
    load_keys,
    new_private_key,
    private_pem,
    require_keys,
    signer_from_pem,
)
from scrollcase.trust.repository import (
    TIMESTAMP_KEY,
    MetadataError,
    TargetFacts,
    expiring,
    init_metadata,
    read_current,
    refresh_timestamp,
    rotate_root,
    sign_targets,
)

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
INDEX = b'{"boxId": "demo", "schemaVersion": 1, "versions": {}}\n'
MANIFEST = b'{"release": "demo 1.0.0"}\n'


class DictStore:
    """Objects as a dict with ETags, written the way the store executor writes them."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def read(self, key: str) -> tuple[bytes, str] | None:
        data = self.objects.get(key)
        return None if data is None else (data, sha256_bytes(data))

    def write(self, objects: Mapping[str, bytes]) -> None:
        for key, data in objects.items():
            assert key == TIMESTAMP_KEY or key not in self.objects, f"{key} would be overwritten"
            self.objects[key] = data

    def current(self, roles: Any = ()) -> Any:
        return read_current(self.read, roles)

    def md(self, key: str) -> Metadata[Any]:
        return Metadata.from_bytes(self.objects[key])


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> RoleKeys:
    return generate_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def store(keys: RoleKeys) -> DictStore:
    store = DictStore()
    store.write(init_metadata(keys, NOW))
    return store


def publish(store: DictStore, keys: RoleKeys, box: str, version: str, now: datetime = NOW) -> dict[str, bytes]:
    index = INDEX.replace(b'"demo"', f'"{box}"'.encode()) + version.encode()
    targets: dict[str, bytes | TargetFacts] = {
        f"boxes/{box}/index.json": index,
        f"boxes/{box}/{version}/linux-x86_64-cpu/{box}.release.json": MANIFEST,
        f"boxes/{box}/{version}/linux-x86_64-cpu/{box}.tar.zst": TargetFacts(1234, "ab" * 32),
    }
    out = sign_targets(store.current([f"box.{box}"]), box, targets, keys, now)
    store.write(out)
    return out


def chain(store: DictStore, box: str) -> tuple[Metadata[Root], Metadata[Targets]]:
    """Verify timestamp -> snapshot -> targets -> box role with python-tuf; the box role."""
    root_version = max(int(k.split(".")[0].removeprefix("tuf/")) for k in store.objects if k.endswith(".root.json"))
    root = store.md(f"tuf/{root_version}.root.json")
    root.verify_delegate("root", root)
    timestamp = store.md(TIMESTAMP_KEY)
    root.verify_delegate("timestamp", timestamp)
    snapshot = store.md(f"tuf/{timestamp.signed.snapshot_meta.version}.snapshot.json")
    root.verify_delegate("snapshot", snapshot)
    targets = store.md(f"tuf/{snapshot.signed.meta['targets.json'].version}.targets.json")
    root.verify_delegate("targets", targets)
    role = store.md(f"tuf/{snapshot.signed.meta[f'box.{box}.json'].version}.box.{box}.json")
    targets.verify_delegate(f"box.{box}", role)
    return root, role


def test_generate_keys_writes_private_files_and_keeps_existing(tmp_path: Path) -> None:
    first = generate_keys(tmp_path / "keys")
    for role in ("root", "targets", "snapshot", "timestamp"):
        path = tmp_path / "keys" / f"{role}.pem"
        assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
        if os.name == "posix":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = generate_keys(tmp_path / "keys", root_keys=2)
    assert again.public("targets") == first.public("targets")
    assert again.public("root")[0].keyid == first.public("root")[0].keyid
    assert len(again.public("root")) == 2 and (tmp_path / "keys" / "root-2.pem").is_file()


def test_load_keys_prefers_the_environment_and_reads_only_asked_roles(tmp_path: Path, keys: RoleKeys) -> None:
    folder = tmp_path / "k"
    generate_keys(folder)
    other = private_pem(new_private_key()).decode()
    loaded = load_keys(folder, {ENV_VARS["timestamp"]: other}, ["targets", "timestamp"])
    assert set(loaded.signers) == {"targets", "timestamp"}
    assert loaded.source("timestamp") == "SCROLLCASE_TUF_TIMESTAMP_KEY"
    assert loaded.public("timestamp")[0].keyid == signer_from_pem(other.encode(), "x").public_key.keyid
    assert loaded.source("targets").endswith("targets.pem")
    from_env = load_keys(None, {ENV_VARS["snapshot"]: other}, ["snapshot", "root"])
    assert set(from_env.signers) == {"snapshot"}  # the root never comes from the environment


def test_missing_keys_name_the_env_vars_and_the_file() -> None:
    with pytest.raises(MissingKeysError) as caught:
        require_keys(RoleKeys(), ["targets", "snapshot", "timestamp"], "publish to a store with signed metadata")
    assert caught.value.exit_code == 13
    for variable in ENV_VARS.values():
        assert variable in (caught.value.fix or "")
    assert "targets.pem" in (caught.value.fix or "")


def test_a_key_that_is_not_ed25519_pem_is_refused() -> None:
    with pytest.raises(WrongKeyError, match="SCROLLCASE_TUF_TARGETS_KEY is not an unencrypted PEM private key"):
        signer_from_pem(b"not a key", "SCROLLCASE_TUF_TARGETS_KEY")
    ecdsa = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(WrongKeyError, match="not an ed25519 key"):
        signer_from_pem(ecdsa, "keys/targets.pem")


def test_init_writes_version_1_of_every_role_signed_by_its_keys(store: DictStore) -> None:
    assert list(store.objects) == ["tuf/1.root.json", "tuf/1.targets.json", "tuf/1.snapshot.json", TIMESTAMP_KEY]
    root = store.md("tuf/1.root.json")
    assert isinstance(root.signed, Root) and root.signed.consistent_snapshot
    root.verify_delegate("root", root)
    for role in ("targets", "snapshot"):
        root.verify_delegate(role, store.md(f"tuf/1.{role}.json"))
    root.verify_delegate("timestamp", store.md(TIMESTAMP_KEY))
    assert root.signed.expires == NOW + timedelta(days=365)
    assert store.md(TIMESTAMP_KEY).signed.expires == NOW + timedelta(days=1)
    assert store.md("tuf/1.snapshot.json").signed.expires == NOW + timedelta(days=30)


def test_sign_targets_delegates_a_new_box_and_signs_its_objects(store: DictStore, keys: RoleKeys) -> None:
    out = publish(store, keys, "demo", "1.0.0")
    index = INDEX + b"1.0.0"
    assert list(out) == [
        f"boxes/demo/{sha256_bytes(index)}.index.json",
        "tuf/1.box.demo.json",
        "tuf/2.targets.json",
        "tuf/2.snapshot.json",
        TIMESTAMP_KEY,
    ]
    assert out[f"boxes/demo/{sha256_bytes(index)}.index.json"] == index
    _, role = chain(store, "demo")
    assert role.signed.targets["boxes/demo/index.json"] == TargetFile.from_data("boxes/demo/index.json", index)
    archive = role.signed.targets["boxes/demo/1.0.0/linux-x86_64-cpu/demo.tar.zst"]
    assert (archive.length, archive.hashes) == (1234, {"sha256": "ab" * 32})
    targets = store.md("tuf/2.targets.json").signed
    assert isinstance(targets, Targets) and targets.delegations and targets.delegations.roles
    delegated = targets.delegations.roles["box.demo"]
    assert delegated.terminating
    assert delegated.is_delegated_path("boxes/demo/1.0.0/linux-x86_64-cpu/demo.tar.zst")
    assert not delegated.is_delegated_path("boxes/other/index.json")


def test_a_second_release_and_a_second_box(store: DictStore, keys: RoleKeys) -> None:
    publish(store, keys, "demo", "1.0.0")
    out = publish(store, keys, "demo", "1.1.0")
    assert "tuf/2.box.demo.json" in out and not any(k.endswith(".targets.json") for k in out)  # no new delegation
    publish(store, keys, "other", "0.1.0")
    _, demo = chain(store, "demo")
    assert {"boxes/demo/1.0.0/linux-x86_64-cpu/demo.tar.zst", "boxes/demo/1.1.0/linux-x86_64-cpu/demo.tar.zst"} <= set(
        demo.signed.targets
    )
    _, other = chain(store, "other")
    assert all(path.startswith("boxes/other/") for path in other.signed.targets)
    snapshot = store.md(TIMESTAMP_KEY).signed
    assert isinstance(snapshot, Timestamp) and snapshot.version == 4


def test_signing_the_same_targets_again_writes_nothing(store: DictStore, keys: RoleKeys) -> None:
    publish(store, keys, "demo", "1.0.0")
    assert publish(store, keys, "demo", "1.0.0") == {}


def test_a_target_outside_the_box_is_refused(store: DictStore, keys: RoleKeys) -> None:
    with pytest.raises(TrustError, match=re.escape("boxes/other/index.json is not an object of box demo")):
        sign_targets(store.current(), "demo", {"boxes/other/index.json": b"x"}, keys, NOW)


def test_versions_a_lost_race_left_behind_are_skipped(store: DictStore, keys: RoleKeys) -> None:
    publish(store, keys, "demo", "1.0.0")
    orphan = sign_targets(
        store.current(["box.demo"]), "demo", {"boxes/demo/index.json": b"lost"}, keys, NOW
    )  # written up to the snapshot, then the publisher lost the timestamp's compare-and-swap
    store.write({k: v for k, v in orphan.items() if k != TIMESTAMP_KEY})
    current = store.current(["box.demo"])
    taken = frozenset(k for k in orphan if k != TIMESTAMP_KEY)
    out = sign_targets(
        type(current)(**{**current.__dict__, "taken": taken}), "demo", {"boxes/demo/index.json": b"won"}, keys, NOW
    )
    assert "tuf/3.box.demo.json" in out and "tuf/4.snapshot.json" in out
    store.write(out)
    _, role = chain(store, "demo")
    assert role.signed.version == 3


def test_publish_with_a_key_the_root_does_not_name_is_refused(store: DictStore, keys: RoleKeys) -> None:
    stranger = signer_from_pem(private_pem(new_private_key()), "SCROLLCASE_TUF_TARGETS_KEY")
    wrong = keys.with_role("targets", [stranger], "SCROLLCASE_TUF_TARGETS_KEY")
    with pytest.raises(
        WrongKeyError, match=r"targets key.*from SCROLLCASE_TUF_TARGETS_KEY.*tuf/1\.root\.json"
    ) as caught:
        sign_targets(store.current(), "demo", {"boxes/demo/index.json": b"x"}, wrong, NOW)
    assert "scrollcase trust rotate --role targets" in (caught.value.fix or "")


def test_metadata_in_the_store_not_signed_by_the_root_is_refused(store: DictStore, keys: RoleKeys) -> None:
    snapshot = store.md("tuf/1.snapshot.json")
    snapshot.sign(signer_from_pem(private_pem(new_private_key()), "x"), append=False)
    store.objects["tuf/1.snapshot.json"] = snapshot.to_bytes()
    with pytest.raises(MetadataError, match=re.escape("tuf/1.snapshot.json is not signed by the keys")):
        sign_targets(store.current(), "demo", {"boxes/demo/index.json": b"x"}, keys, NOW)


def test_a_threshold_2_root_needs_both_signatures(tmp_path: Path) -> None:
    keys = generate_keys(tmp_path / "keys", root_keys=2)
    store = DictStore()
    store.write(init_metadata(keys, NOW, root_threshold=2))
    root = store.md("tuf/1.root.json")
    assert root.signed.roles["root"].threshold == 2 and len(root.signatures) == 2
    root.verify_delegate("root", root)
    root.signatures.popitem()
    with pytest.raises(UnsignedMetadataError):
        root.verify_delegate("root", root)
    with pytest.raises(WrongKeyError, match="a root threshold of 3 needs at least that many root keys"):
        init_metadata(keys, NOW, root_threshold=3)


def test_rotating_the_root_key_signs_n_plus_1_with_the_old_and_new_keys(
    tmp_path: Path, store: DictStore, keys: RoleKeys
) -> None:
    new_root = load_keys(generate_keys(tmp_path / "new") and tmp_path / "new", {}, ["root"])
    out = rotate_root(store.current(), keys, new_root, NOW, roles=["root"])
    assert list(out) == ["tuf/2.root.json"]
    store.write(out)
    old, new = store.md("tuf/1.root.json"), store.md("tuf/2.root.json")
    old.verify_delegate("root", new)  # a client holding root 1 accepts root 2 ...
    new.verify_delegate("root", new)  # ... and root 2 is signed by its own keys
    assert new.signed.roles["root"].keyids == [new_root.public("root")[0].keyid]
    with pytest.raises(WrongKeyError, match="root key"):
        rotate_root(store.current(), keys, new_root, NOW, roles=["root"])  # root 2 no longer names the old key
    publish(store, keys, "demo", "1.0.0")  # the online keys did not change
    chain(store, "demo")


def test_a_lost_timestamp_key_is_replaced_through_a_new_root(store: DictStore, keys: RoleKeys) -> None:
    publish(store, keys, "demo", "1.0.0")
    replacement = signer_from_pem(private_pem(new_private_key()), "new-timestamp.pem")
    online = keys.with_role("timestamp", [replacement], "new-timestamp.pem")
    out = rotate_root(store.current(), keys, online, NOW, roles=["timestamp"])
    assert list(out) == ["tuf/2.root.json", TIMESTAMP_KEY]
    store.write(out)
    old_root, root = store.md("tuf/1.root.json"), store.md("tuf/2.root.json")
    old_root.verify_delegate("root", root)
    root.verify_delegate("timestamp", store.md(TIMESTAMP_KEY))
    with pytest.raises(UnsignedMetadataError):
        old_root.verify_delegate("timestamp", store.md(TIMESTAMP_KEY))
    with pytest.raises(WrongKeyError, match="timestamp key"):
        publish(store, keys, "demo", "1.1.0")  # the lost key signs no more
    publish(store, online, "demo", "1.1.0")
    chain(store, "demo")


def test_rotating_the_targets_key_re_signs_every_box_role(store: DictStore, keys: RoleKeys) -> None:
    publish(store, keys, "demo", "1.0.0")
    publish(store, keys, "other", "1.0.0")
    online = keys.with_role("targets", [signer_from_pem(private_pem(new_private_key()), "t.pem")], "t.pem")
    out = rotate_root(store.current(None), keys, online, NOW, roles=["targets"])
    assert {"tuf/2.root.json", "tuf/2.box.demo.json", "tuf/2.box.other.json", "tuf/4.targets.json"} <= set(out)
    store.write(out)
    for box in ("demo", "other"):
        root, role = chain(store, box)
        assert root.signed.version == 2 and len(role.signed.targets) == 3


def test_refresh_timestamp_re_signs_the_snapshot_only_near_its_expiry(store: DictStore, keys: RoleKeys) -> None:
    online = load_keys(None, {}, []).with_role("timestamp", keys.of("timestamp"), "t")
    out = refresh_timestamp(store.current(), online, NOW + timedelta(hours=20))
    assert list(out) == [TIMESTAMP_KEY]
    store.write(out)
    assert store.md(TIMESTAMP_KEY).signed.expires == NOW + timedelta(hours=44)
    later = NOW + timedelta(days=25)
    with pytest.raises(MissingKeysError, match="no snapshot key"):
        refresh_timestamp(store.current(), online, later)
    out = refresh_timestamp(store.current(), keys, later)
    assert list(out) == ["tuf/2.snapshot.json", TIMESTAMP_KEY]
    store.write(out)
    snapshot = store.md("tuf/2.snapshot.json")
    assert isinstance(snapshot.signed, Snapshot) and snapshot.signed.expires == later + timedelta(days=30)
    store.md("tuf/1.root.json").verify_delegate("snapshot", snapshot)


def test_refresh_timestamp_re_signs_box_roles_near_their_expiry_only_with_the_targets_key(
    store: DictStore, keys: RoleKeys
) -> None:
    publish(store, keys, "demo", "1.0.0")
    late = NOW + timedelta(days=300)  # the box role and targets expire at NOW + 365 d: in their last quarter
    assert set(expiring(store.current(None), late + timedelta(days=365) / 4)) == {"targets", "box.demo"}
    online = keys.with_role("targets", [], "none")
    out = refresh_timestamp(store.current(None), online, late)
    assert list(out) == ["tuf/3.snapshot.json", TIMESTAMP_KEY]  # the snapshot expired; the box role left
    store.write(out)
    out = refresh_timestamp(store.current(None), keys, late)
    assert list(out) == ["tuf/3.targets.json", "tuf/2.box.demo.json", "tuf/4.snapshot.json", TIMESTAMP_KEY]
    store.write(out)
    _, role = chain(store, "demo")
    assert role.signed.expires == late + timedelta(days=365) and len(role.signed.targets) == 3
    assert expiring(store.current(None), late + timedelta(days=90)) == {}
