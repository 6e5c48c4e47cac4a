"""The directory store: atomic create-if-absent, compare-and-swap for the index, safe keys."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.store import local
from scrollcase.store.base import FileUpload
from scrollcase.store.local import LocalStore


def test_put_bytes_create_if_absent(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    etag = store.put_bytes("a/b.json", b"one", if_none_match=True)
    assert etag == hashlib.sha256(b"one").hexdigest()
    with pytest.raises(ConflictError):
        store.put_bytes("a/b.json", b"two", if_none_match=True)
    assert (tmp_path / "store/a/b.json").read_bytes() == b"one"
    assert not list((tmp_path / "store/a").glob(".*.tmp")), "temp files must not be left behind"


def test_head_and_get(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert store.head("x") is None and store.get_bytes("x") is None
    store.put_bytes("x", b"data")
    info = store.head("x")
    assert info is not None and (info.size, info.sha256) == (4, hashlib.sha256(b"data").hexdigest())
    blob = store.get_bytes("x")
    assert blob is not None and blob.data == b"data" and blob.etag == info.etag


def test_if_match_compare_and_swap(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    first = store.put_bytes("index.json", b"v1", if_none_match=True)
    second = store.put_bytes("index.json", b"v2", if_match=first)
    with pytest.raises(ConflictError, match="changed since it was read"):
        store.put_bytes("index.json", b"v3", if_match=first)  # stale ETag
    assert store.get_bytes("index.json") == store.get_bytes("index.json")
    blob = store.get_bytes("index.json")
    assert blob is not None and blob.data == b"v2" and blob.etag == second
    assert not (tmp_path / "index.json.lock").exists()


def test_a_lock_older_than_60_s_is_broken_a_fresh_one_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/publish.md: "a lock older than 60 s, left by a crashed writer, is broken" -- and only then."""
    assert local.STALE_LOCK_SECONDS == 60
    monkeypatch.setattr(local, "LOCK_WAIT_SECONDS", 0.5)  # the wait for a live lock, shortened
    store = LocalStore(tmp_path)
    first = store.put_bytes("index.json", b"v1", if_none_match=True)
    lock = tmp_path / "index.json.lock"
    lock.write_text("4242\n")
    with pytest.raises(StoreError, match="has been held for over"):
        store.put_bytes("index.json", b"v2", if_match=first)
    crashed = time.time() - local.STALE_LOCK_SECONDS - 5
    os.utime(lock, (crashed, crashed))
    store.put_bytes("index.json", b"v2", if_match=first)
    blob = store.get_bytes("index.json")
    assert blob is not None and blob.data == b"v2"
    assert not lock.exists()


def test_put_file_copies_and_refuses_existing(tmp_path: Path) -> None:
    source = tmp_path / "archive.tar.zst"
    source.write_bytes(b"z" * 100_000)
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    store = LocalStore(tmp_path / "store")
    seen: list[int] = []
    store.put_file("boxes/a.tar.zst", FileUpload(source, 100_000, sha, progress=seen.append))
    assert sum(seen) == 100_000
    assert (tmp_path / "store/boxes/a.tar.zst").read_bytes() == source.read_bytes()
    with pytest.raises(ConflictError):
        store.put_file("boxes/a.tar.zst", FileUpload(source, 100_000, sha))


def test_put_file_detects_an_archive_changed_after_hashing(tmp_path: Path) -> None:
    source = tmp_path / "archive.tar.zst"
    source.write_bytes(b"changed")
    store = LocalStore(tmp_path / "store")
    with pytest.raises(IntegrityError, match="changed while it was being published"):
        store.put_file("a.tar.zst", FileUpload(source, 7, "0" * 64))
    assert store.head("a.tar.zst") is None


@pytest.mark.parametrize("key", ["../escape", "/abs", "a/../../b", "a//b", "a\\b", "", "C:/x"])
def test_unsafe_keys_are_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(StoreError, match="not a safe relative key"):
        LocalStore(tmp_path).head(key)


def test_store_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        LocalStore(tmp_path / "file").check()


def test_concurrent_creators_exactly_one_wins(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def create(i: int) -> None:
        barrier.wait()
        try:
            store.put_bytes("k", f"writer {i}".encode(), if_none_match=True)
            outcomes.append("won")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["won"]


def test_defect6_temp_files_of_killed_publishers_are_removed_by_the_next_write(tmp_path: Path) -> None:
    """A killed `publish --to DIR` left .<name>.<uuid>.tmp in the store that nothing removed."""
    import os
    import subprocess
    import sys
    import uuid

    from scrollcase.store.local import LocalStore

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    store = LocalStore(tmp_path)
    folder = tmp_path / "boxes" / "b"
    folder.mkdir(parents=True)
    stale = folder / f".obj.{dead}-{uuid.uuid4().hex}.tmp"
    live = folder / f".obj.{os.getppid()}-{uuid.uuid4().hex}.tmp"
    other = folder / f".other.{dead}-{uuid.uuid4().hex}.tmp"
    for path in (stale, live, other):
        path.write_bytes(b"partial")
    store.put_bytes("boxes/b/obj", b"data", if_none_match=True)
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted(["obj", live.name, other.name])


def test_a_key_whose_name_nearly_fills_name_max_still_gets_a_temp_name(tmp_path: Path) -> None:
    """The temp beside a 250-byte name keeps only part of it: the write works, nothing is left over."""
    store = LocalStore(tmp_path)
    key = "boxes/" + "a" * 250
    store.put_bytes(key, b"{}", if_none_match=True, content_type="application/json")
    assert (tmp_path / key).read_bytes() == b"{}"
    assert [p.name for p in (tmp_path / "boxes").iterdir()] == ["a" * 250]
