"""trust/verify.py: the host's check of a store's objects against its signed metadata, with python-tuf doing the
checking, on metadata made by python-tuf's Metadata API (tests/support/tufstore.py)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from scrollcase.errors import TrustError
from scrollcase.trust import verify
from scrollcase.trust.verify import (
    ExpiredError,
    MissingMetadataError,
    NotSignedError,
    OversizedError,
    RollbackError,
    StoreTrust,
    TargetMismatchError,
    TrustedRootError,
    UnsignedError,
)
from tests.support.tufstore import TufStore, tree_digest

INDEX = "boxes/demo/index.json"
MANIFEST = "boxes/demo/1.0.0/linux-x86_64-cpu/demo-1.0.0.release.json"
ARCHIVE = "boxes/demo/1.0.0/linux-x86_64-cpu/demo-1.0.0.tar.zst"


@pytest.fixture
def repo() -> TufStore:
    store = TufStore()
    store.add_targets("demo", {INDEX: b'{"index": 1}', MANIFEST: b'{"manifest": 1}', ARCHIVE: b"archive-1"})
    return store


def trust_for(repo: TufStore, state: Path, root: bytes | None = None) -> StoreTrust:
    return StoreTrust(root or repo.root_bytes(1), state, repo.reader(), "file:///store", "root.json")


def checked_once(repo: TufStore, state: Path) -> None:
    """A host that installed once: it saw the store's current metadata and saved it."""
    trust = trust_for(repo, state)
    trust.refresh()
    trust.read_index(INDEX)
    assert trust.commit()


def refused(repo: TufStore, state: Path, kind: type[TrustError], key: str = INDEX) -> TrustError:
    """``kind`` raised by a fresh check of ``key`` (the index: reads it from its hashed copy), state unchanged."""
    before = tree_digest(state) if state.exists() else None
    trust = trust_for(repo, state)
    with pytest.raises(kind) as caught:
        trust.refresh()
        trust.read_index(key) if key == INDEX else trust.read(key)
    trust.close()
    assert (tree_digest(state) if state.exists() else None) == before
    assert caught.value.exit_code == 13
    assert caught.value.fix
    return caught.value


def test_signed_targets_are_read_checked_and_the_state_saved_on_commit(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    trust = trust_for(repo, state)
    trust.refresh()
    assert trust.read_index(INDEX) == b'{"index": 1}'
    assert repo.reader is not None
    assert trust.read(MANIFEST) == b'{"manifest": 1}'
    signed = trust.signed(ARCHIVE)
    assert (signed.length, signed.sha256) == (9, hashlib.sha256(b"archive-1").hexdigest())
    assert not state.exists()  # nothing saved before the whole check passed
    assert trust.commit()
    assert (state / "timestamp.json").read_bytes() == repo.objects["tuf/timestamp.json"]
    assert (state / "box.demo.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["state"]  # no copy left beside it


def test_the_index_is_read_only_from_its_hashed_copy(repo: TufStore, tmp_path: Path) -> None:
    reader = repo.reader()
    trust = StoreTrust(repo.root_bytes(), tmp_path / "s", reader, "file:///store", "root.json")
    trust.refresh()
    trust.read_index(INDEX)
    sha = hashlib.sha256(b'{"index": 1}').hexdigest()
    assert f"boxes/demo/{sha}.index.json" in reader.reads
    assert INDEX not in reader.reads
    trust.close()


def test_a_repacked_object_is_refused_by_its_hash(repo: TufStore, tmp_path: Path) -> None:
    repo.objects[MANIFEST] = b'{"manifest": 2}'  # same length, other bytes
    error = refused(repo, tmp_path / "state", TargetMismatchError, MANIFEST)
    assert MANIFEST in error.message and "rule: an object's length and sha256" in error.message


def test_an_object_longer_than_signed_is_refused_as_endless_data(repo: TufStore, tmp_path: Path) -> None:
    repo.objects[MANIFEST] = b'{"manifest": 1}' + b" " * 10_000
    error = refused(repo, tmp_path / "state", OversizedError, MANIFEST)
    assert "more than the 15 bytes" in error.message and "endless data" in error.message


def test_an_index_mixed_from_another_release_is_refused(repo: TufStore, tmp_path: Path) -> None:
    old_index = repo.objects[INDEX]
    repo.add_targets("demo", {INDEX: b'{"index": 2}'})
    sha = hashlib.sha256(b'{"index": 2}').hexdigest()
    repo.objects[f"boxes/demo/{sha}.index.json"] = old_index  # release 1's index where release 2's is signed
    error = refused(repo, tmp_path / "state", TargetMismatchError)
    assert f"{sha}.index.json" in error.message


def test_a_key_no_role_signs_is_refused(repo: TufStore, tmp_path: Path) -> None:
    repo.objects["boxes/demo/extra.json"] = b"{}"
    error = refused(repo, tmp_path / "state", NotSignedError, "boxes/demo/extra.json")
    assert "boxes/demo/extra.json" in error.message


def test_a_rolled_back_timestamp_and_snapshot_are_refused(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    old = dict(repo.objects)
    repo.add_targets("demo", {INDEX: b'{"index": 2}'})
    checked_once(repo, state)
    repo.objects.clear()
    repo.objects.update(old)  # yesterday's store, every file genuinely signed
    error = refused(repo, state, RollbackError)
    assert "tuf/timestamp.json" in error.message and "rule: rollback" in error.message


def test_a_rolled_back_snapshot_alone_is_refused(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo.add_targets("demo", {INDEX: b'{"index": 2}'})
    checked_once(repo, state)
    snap_v = repo.snapshot.signed.version
    # a new timestamp (genuinely signed, by a compromised timestamp key say) naming the older snapshot
    repo.snapshot.signed.version = snap_v - 1
    repo.refresh_timestamp()
    error = refused(repo, state, RollbackError)
    assert "snapshot" in error.message


def test_an_expired_timestamp_is_refused_as_a_freeze(repo: TufStore, tmp_path: Path) -> None:
    repo.refresh_timestamp(expires=datetime.now(UTC) - timedelta(hours=1))
    error = refused(repo, tmp_path / "state", ExpiredError)
    assert "tuf/timestamp.json" in error.message and "freeze" in error.message
    assert "scrollcase trust timestamp" in (error.fix or "")


def test_metadata_signed_by_the_wrong_key_is_refused(repo: TufStore, tmp_path: Path) -> None:
    repo.refresh_timestamp(signers=[CryptoSigner.generate_ed25519()])
    error = refused(repo, tmp_path / "state", UnsignedError)
    assert "tuf/timestamp.json" in error.message and "threshold" in error.message


def test_a_box_role_signed_by_the_wrong_key_is_refused(repo: TufStore, tmp_path: Path) -> None:
    md = repo.box_roles["demo"]
    key = f"tuf/{md.signed.version}.box.demo.json"
    repo.objects[key] = repo.sign(md, "targets", [CryptoSigner.generate_ed25519()])
    error = refused(repo, tmp_path / "state", UnsignedError)
    assert key in error.message


def test_a_store_without_metadata_is_refused(tmp_path: Path) -> None:
    repo = TufStore()
    shipped = repo.root_bytes()
    repo.objects.clear()
    trust = StoreTrust(shipped, tmp_path / "state", repo.reader(), "file:///store", "root.json")
    with pytest.raises(MissingMetadataError) as caught:
        trust.refresh()
    assert "tuf/timestamp.json" in caught.value.message
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("which", ["not json", "a timestamp"])
def test_a_trusted_root_that_is_no_root_is_refused(repo: TufStore, tmp_path: Path, which: str) -> None:
    root = b"not json" if which == "not json" else repo.objects["tuf/timestamp.json"]
    trust = trust_for(repo, tmp_path / "state", root=root)
    with pytest.raises(TrustedRootError, match=r"root\.json is not TUF root metadata"):
        trust.refresh()


def test_the_host_follows_root_rotations_from_its_shipped_root(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    shipped = repo.root_bytes(1)
    repo.rotate("root")  # root 2: signed by root 1's key and root 2's
    repo.rotate("targets")  # root 3: a new targets key; the box role is re-signed with it
    repo.add_targets("demo", {INDEX: b'{"index": 3}'})
    checked_once(repo, state)
    assert verify.root_version((state / "root.json").read_bytes()) == 3
    # the next run starts from the saved root 3, not the shipped root 1
    assert verify.root_version(trust_for(repo, state, shipped).bootstrap()) == 3


def test_a_root_not_signed_by_the_new_keys_is_refused(repo: TufStore, tmp_path: Path) -> None:
    old_signers = repo.signers["root"]
    repo.rotate("root")
    repo.objects["tuf/2.root.json"] = repo.sign(repo.root, "root", old_signers)  # only the old key signed it
    error = refused(repo, tmp_path / "state", UnsignedError)
    assert "tuf/2.root.json" in error.message


def test_the_host_follows_a_lost_timestamp_key_recovery(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    checked_once(repo, state)
    lost = repo.rotate("timestamp")  # the key is lost: root 2 names a new one
    repo.refresh_timestamp()
    checked_once(repo, state)
    # the lost key (now in an attacker's hands, say) signs no timestamp the host accepts any more
    repo.refresh_timestamp(signers=lost)
    refused(repo, state, UnsignedError)


def test_the_higher_of_the_shipped_and_saved_roots_bootstraps(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    checked_once(repo, state)
    repo.rotate("snapshot")
    newer_shipped = repo.root_bytes(2)  # the app was updated to ship root 2
    assert verify.root_version(trust_for(repo, state, newer_shipped).bootstrap()) == 2


def test_a_killed_commit_is_put_back(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    checked_once(repo, state)
    trust = trust_for(repo, state)
    state.rename(trust.previous)  # killed between the two renames of the swap
    trust.refresh()
    assert state.is_dir()
    trust.close()


def test_keys_and_folders() -> None:
    assert verify.consistent_key("boxes/b/index.json", "ab" * 32) == f"boxes/b/{'ab' * 32}.index.json"
    one = verify.default_state_dir("s3://bucket/a", Path("cache"))
    assert one.parent == Path("cache") / "trust"
    assert one != verify.default_state_dir("s3://bucket/b", Path("cache"))


def test_a_root_signed_below_the_threshold_is_refused(tmp_path: Path) -> None:
    """Key compromise below the threshold: one of root 1's two keys alone signs a root 2 naming the attacker's keys."""
    repo = TufStore(root_threshold=2)
    repo.add_targets("demo", {INDEX: b'{"index": 1}'})
    stolen = repo.signers["root"][0]
    attacker = CryptoSigner.generate_ed25519()
    root = repo.root.signed
    for keyid in list(root.roles["root"].keyids):
        root.revoke_key(keyid, "root")
    root.add_key(attacker.public_key, "root")
    root.roles["root"].threshold = 1
    root.version += 1
    repo.objects["tuf/2.root.json"] = repo.sign(repo.root, "root", [stolen, attacker])
    error = refused(repo, tmp_path / "state", UnsignedError)
    assert "tuf/2.root.json" in error.message


def test_a_fresh_timestamp_over_an_expired_snapshot_is_refused(repo: TufStore, tmp_path: Path) -> None:
    """A compromised timestamp key alone keeps re-signing the timestamp: the snapshot it names still expires."""
    repo.snapshot.signed.expires = datetime.now(UTC) - timedelta(hours=1)
    repo.snapshot.signed.version += 1
    repo.objects[f"tuf/{repo.snapshot.signed.version}.snapshot.json"] = repo.sign(repo.snapshot, "snapshot")
    repo.refresh_timestamp()  # fresh, valid for a day
    error = refused(repo, tmp_path / "state", ExpiredError)
    assert "snapshot" in error.message


def test_a_previous_state_left_by_a_killed_swap_does_not_block_the_next_commit(repo: TufStore, tmp_path: Path) -> None:
    state = tmp_path / "state"
    checked_once(repo, state)
    trust = trust_for(repo, state)
    trust.previous.mkdir()
    (trust.previous / "timestamp.json").write_bytes(b"old")  # killed after both renames, before the removal
    repo.refresh_timestamp()
    checked_once(repo, state)
    assert (state / "timestamp.json").read_bytes() == repo.objects["tuf/timestamp.json"]
    assert not trust.previous.exists()
