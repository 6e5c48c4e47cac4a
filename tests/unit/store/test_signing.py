"""store/signing.py over a real directory store: the write order, a lost race read again and signed on top of the
winner (deterministically: the other publisher commits in the middle of ours), and publish's refusal before the
first upload when a signed store gets no keys.  Signatures are checked with python-tuf's verify_delegate."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack

import pytest
from tuf.api.metadata import Metadata

from scrollcase.errors import TrustError
from scrollcase.store.base import WriteOptions
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.signing import LostRaceError, check_signing, commit_signed, init_store, write_objects
from scrollcase.trust.keys import MissingKeysError, RoleKeys, generate_keys
from scrollcase.trust.repository import TIMESTAMP_KEY, TargetFacts, sign_targets
from tests.support.releases import write_release

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def md(store: LocalStore, key: str) -> Metadata[Any]:
    return Metadata.from_bytes(store.path_for(key).read_bytes())


def signed_paths(store: LocalStore, box: str) -> set[str]:
    """The box role's targets, after python-tuf checked timestamp -> snapshot -> targets -> box role."""
    root = md(store, "tuf/1.root.json")
    timestamp = md(store, TIMESTAMP_KEY)
    root.verify_delegate("timestamp", timestamp)
    snapshot = md(store, f"tuf/{timestamp.signed.snapshot_meta.version}.snapshot.json")
    root.verify_delegate("snapshot", snapshot)
    targets = md(store, f"tuf/{snapshot.signed.meta['targets.json'].version}.targets.json")
    root.verify_delegate("targets", targets)
    role = md(store, f"tuf/{snapshot.signed.meta[f'box.{box}.json'].version}.box.{box}.json")
    targets.verify_delegate(f"box.{box}", role)
    return set(role.signed.targets)


class Interleaved(LocalStore):
    """A store where, just before our first metadata write, another publisher signs and commits."""

    def __init__(self, root: Path, other: Any) -> None:
        super().__init__(root)
        self.other = other

    def put_bytes(self, key: str, data: bytes, **write: Unpack[WriteOptions]) -> str:
        if key.startswith("tuf/") and self.other is not None:
            other, self.other = self.other, None
            other()
        return super().put_bytes(key, data, **write)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> RoleKeys:
    return generate_keys(tmp_path_factory.mktemp("keys"))


def facts(box: str, version: str) -> dict[str, bytes | TargetFacts]:
    return {f"boxes/{box}/{version}/t/{box}.tar.zst": TargetFacts(10, "cd" * 32)}


def test_a_publisher_that_lost_the_race_signs_again_on_top_of_the_winner(tmp_path: Path, keys: RoleKeys) -> None:
    plain = LocalStore(tmp_path / "store")
    init_store(plain, keys, [], now=lambda: NOW)

    def winner() -> None:
        commit_signed(plain, lambda now: sign_targets(now, "demo", facts("demo", "2.0.0"), keys, NOW), ["box.demo"])

    racing = Interleaved(tmp_path / "store", winner)
    notes: list[str] = []
    written = commit_signed(
        racing,
        lambda now: sign_targets(now, "demo", facts("demo", "1.0.0"), keys, NOW),
        ["box.demo"],
        progress=notes.append,
        sleep=lambda _: None,
    )
    assert notes == ["another writer signed first (tuf/1.box.demo.json): reading the signed metadata again"]
    assert written == ("tuf/2.box.demo.json", "tuf/3.snapshot.json", TIMESTAMP_KEY)  # the winner's targets.json
    assert signed_paths(plain, "demo") == {"boxes/demo/1.0.0/t/demo.tar.zst", "boxes/demo/2.0.0/t/demo.tar.zst"}


def test_a_lost_compare_and_swap_of_the_timestamp_is_retried(tmp_path: Path, keys: RoleKeys) -> None:
    store = LocalStore(tmp_path / "store")
    init_store(store, keys, [], now=lambda: NOW)
    etag = store.get_bytes(TIMESTAMP_KEY).etag  # type: ignore[union-attr]
    commit_signed(store, lambda now: sign_targets(now, "a", facts("a", "1.0.0"), keys, NOW), ["box.a"])
    with pytest.raises(LostRaceError) as caught:
        write_objects(store, {TIMESTAMP_KEY: b"{}"}, etag)  # the etag read before the other commit
    assert caught.value.key == TIMESTAMP_KEY
    assert md(store, TIMESTAMP_KEY).signed.version == 2  # untouched


def test_a_signed_store_without_keys_is_refused_before_the_first_upload(tmp_path: Path, keys: RoleKeys) -> None:
    store = LocalStore(tmp_path / "store")
    assert check_signing(store, None) is False  # no tuf/: publish as before
    init_store(store, keys, [], now=lambda: NOW)
    release = write_release(tmp_path / "dist", box_id="demo")
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    with pytest.raises(MissingKeysError) as caught:
        publish(store, release.manifest, release.archive_path)
    assert caught.value.exit_code == 13 and "SCROLLCASE_TUF_TIMESTAMP_KEY" in (caught.value.fix or "")
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before
    result = publish(store, release.manifest, release.archive_path, keys=keys, now=lambda: NOW)
    assert result.store_signed and result.signed[-1] == TIMESTAMP_KEY
    assert release.manifest.keys.archive in signed_paths(store, "demo")


def test_init_twice_is_refused(tmp_path: Path, keys: RoleKeys) -> None:
    store = LocalStore(tmp_path / "store")
    init_store(store, keys, [], now=lambda: NOW)
    with pytest.raises(TrustError, match="already set up"):
        init_store(store, keys, [], now=lambda: NOW)
