"""The directory store: atomic create-if-absent, compare-and-swap for the index, safe keys."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.io import files
from scrollcase.store import local
from scrollcase.store.base import Blob, FileUpload, Piece, Transfer
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


@pytest.mark.parametrize("stale", ["0" * 64, "f" * 64])  # sorting before and after the current ETag
def test_any_etag_but_the_current_one_is_a_conflict(tmp_path: Path, stale: str) -> None:
    store = LocalStore(tmp_path)
    current = store.put_bytes("index.json", b"v1", if_none_match=True)
    with pytest.raises(ConflictError, match="changed since it was read"):
        store.put_bytes("index.json", b"v2", if_match=stale)
    assert store.get_bytes("index.json") == Blob(b"v1", current)


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
    second = store.put_bytes("index.json", b"v2", if_match=first)
    blob = store.get_bytes("index.json")
    assert blob is not None and blob.data == b"v2"
    assert not lock.exists()
    lock.write_text("4242\n")
    os.utime(lock, (1, 1))  # left in 1970 (a clock that was wrong then): stale too, by any arithmetic
    store.put_bytes("index.json", b"v3", if_match=second)
    assert not lock.exists()


def test_a_holder_whose_lock_was_broken_and_taken_leaves_the_new_holders_lock(tmp_path: Path) -> None:
    """A writer held its lock past 60 s, another broke it as stale and took it: the first one's release
    must not delete the second one's lock (a third writer would then run beside the second)."""
    target, lock = tmp_path / "index.json", tmp_path / "index.json.lock"
    with local._key_lock(target):
        assert lock.exists()
        lock.unlink()  # broken as stale by another writer...
        assert files.try_lock(lock, "theirs")  # ...who holds it now
    assert lock.read_text() == f"{os.getpid()}\ntheirs\n"
    assert files.lock_owner(lock) == os.getpid()
    lock.unlink()
    with local._key_lock(target):
        pass
    assert not lock.exists()  # its own lock, released


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
    for expected in ("0" * 64, "f" * 64, _sha(b"changed")):  # sorting before and after its sha256; or its size
        with pytest.raises(IntegrityError, match="changed while it was being published"):
            store.put_file("a.tar.zst", FileUpload(source, 7 if expected != _sha(b"changed") else 8, expected))
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


OLD = bytes(range(256)) * 40  # an earlier archive already in the store
NEW = OLD[1000:5000] + b"new bytes" + OLD[6000:9000]  # shares two runs with it, at other offsets


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pieces(source: str = "boxes/b/old.tar.zst") -> tuple[Piece, ...]:
    return (Piece(0, 4000, source, 1000), Piece(4000, 4009), Piece(4009, 7009, source, 6000))


def _new_upload(tmp_path: Path, notes: list[str], seen: list[int], pieces: tuple[Piece, ...]) -> FileUpload:
    path = tmp_path / "new.tar.zst"
    path.write_bytes(NEW)
    return FileUpload(path, len(NEW), _sha(NEW), pieces=pieces, progress=seen.append, notice=notes.append)


def test_put_file_copies_the_pieces_an_earlier_file_holds_and_sends_the_rest(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    store.put_bytes("boxes/b/old.tar.zst", OLD, if_none_match=True)
    notes: list[str] = []
    seen: list[int] = []
    transfer = store.put_file("boxes/b/new.tar.zst", _new_upload(tmp_path, notes, seen, _pieces()))
    assert transfer == Transfer(sent=9, reused=7000)
    assert (tmp_path / "store/boxes/b/new.tar.zst").read_bytes() == NEW
    assert seen == [4000, 9, 3000] and notes == []
    assert sorted(p.name for p in (tmp_path / "store/boxes/b").iterdir()) == ["new.tar.zst", "old.tar.zst"]
    with pytest.raises(ConflictError, match="already exists"):
        store.put_file("boxes/b/new.tar.zst", _new_upload(tmp_path, notes, seen, _pieces()))


def test_only_the_copied_pieces_count_as_reused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    store.put_bytes("boxes/b/old.tar.zst", OLD, if_none_match=True)
    pieces = (Piece(0, 4009), Piece(4009, 7009, "boxes/b/old.tar.zst", 6000))  # less than half copied
    transfer = store.put_file("boxes/b/new.tar.zst", _new_upload(tmp_path, [], [], pieces))
    assert transfer == Transfer(sent=4009, reused=3000)
    assert (tmp_path / "store/boxes/b/new.tar.zst").read_bytes() == NEW


def test_an_archive_on_another_file_system_is_assembled_from_reads_and_copies(tmp_path: Path) -> None:
    """An archive built on a tmpfs, a store on disk: copy_file_range refuses the sent pieces (EXDEV) and
    they are read and written, between the copies the kernel makes from the earlier file."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a tmpfs at /dev/shm beside the test's folder")
    store = LocalStore(tmp_path / "store")
    store.put_bytes("boxes/b/old.tar.zst", OLD, if_none_match=True)
    with tempfile.TemporaryDirectory(dir=shm) as elsewhere:
        notes: list[str] = []
        transfer = store.put_file("boxes/b/new.tar.zst", _new_upload(Path(elsewhere), notes, [], _pieces()))
    assert (transfer, notes) == (Transfer(sent=9, reused=7000), [])
    assert (tmp_path / "store/boxes/b/new.tar.zst").read_bytes() == NEW


@pytest.mark.parametrize(
    ("earlier", "why"),
    [
        (None, "old.tar.zst is gone: copying the whole archive instead"),
        (OLD[:8000], "old.tar.zst ends before byte 9000: copying the whole archive instead"),
        # same size, bytes rotted inside the second run (the message: below); the assembled file's sha256
        # sorts before the checked one for the first, after it for the second
        (OLD[:7000] + b"rot" + OLD[7003:], None),
        (OLD[:7000] + b"ROT" + OLD[7003:], None),
    ],
)
def test_an_earlier_file_that_does_not_give_the_bytes_means_a_whole_copy(
    tmp_path: Path, earlier: bytes | None, why: str | None
) -> None:
    store = LocalStore(tmp_path / "store")
    if earlier is not None:
        store.put_bytes("boxes/b/old.tar.zst", earlier, if_none_match=True)
    notes: list[str] = []
    seen: list[int] = []
    transfer = store.put_file("boxes/b/new.tar.zst", _new_upload(tmp_path, notes, seen, _pieces()))
    assert transfer == Transfer(sent=len(NEW), reused=0)
    assert (tmp_path / "store/boxes/b/new.tar.zst").read_bytes() == NEW
    assert sum(seen) == len(NEW) and len(notes) == 1  # each byte counted once, the assembly's and the copy's
    if why is not None:
        assert notes[0].endswith(why)
    else:
        source = tmp_path / "store/boxes/b/old.tar.zst"
        assert notes[0] == (
            f"the bytes copied from {source} do not give the checked archive (sha256 "
            f"{_sha(OLD[1000:5000] + b'new bytes' + earlier[6000:9000])}): copying the whole archive instead"
        )
    assert not list((tmp_path / "store/boxes/b").glob(".*.tmp"))


def test_a_whole_copy_after_an_assembly_reports_no_byte_twice_and_no_empty_or_negative_count(tmp_path: Path) -> None:
    """The assembly reported all 20 MiB before its sha256 failed; the whole copy's 8 MiB reads then stay below that
    count until its very end: the meter hears nothing more, never a negative or an empty step."""
    new = os.urandom(20 << 20)
    rotted = new[:-1] + bytes([new[-1] ^ 1])
    store = LocalStore(tmp_path / "store")
    store.put_bytes("boxes/b/old.tar.zst", rotted, if_none_match=True)
    path = tmp_path / "new.tar.zst"
    path.write_bytes(new)
    seen: list[int] = []
    upload = FileUpload(
        path, len(new), _sha(new), pieces=(Piece(0, len(new), "boxes/b/old.tar.zst", 0),), progress=seen.append
    )
    assert store.put_file("boxes/b/new.tar.zst", upload) == Transfer(sent=len(new))
    assert seen == [len(new)]  # the assembly's one piece; the whole copy only caught up with it


def test_a_whole_copy_says_nothing_without_a_notice_and_sent_pieces_only_are_a_plain_copy(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    path = tmp_path / "new.tar.zst"
    path.write_bytes(NEW)
    gone = FileUpload(path, len(NEW), _sha(NEW), pieces=_pieces())  # old.tar.zst is not in the store
    assert store.put_file("boxes/b/a.tar.zst", gone) == Transfer(sent=len(NEW))
    sent_only = FileUpload(path, len(NEW), _sha(NEW), pieces=(Piece(0, 4000), Piece(4000, len(NEW))))
    assert store.put_file("boxes/b/c.tar.zst", sent_only) == Transfer(sent=len(NEW))
    assert store.get_bytes("boxes/b/c.tar.zst") == store.get_bytes("boxes/b/a.tar.zst")


def test_a_directory_store_sends_whole_and_takes_any_layout(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert (store.url, store.url_for("boxes/b/k")) == (str(tmp_path), str(tmp_path / "boxes" / "b" / "k"))
    assert store.checksum_part_size(10 << 30) is None
    assert store.reuse_layout(7009, list(_pieces())) == _pieces()


def test_read_from_an_offset_and_a_length(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put_bytes("k", OLD)
    with store.read_from("k", 100, 20) as stream:
        assert (stream.offset, stream.total, b"".join(stream.chunks)) == (100, len(OLD), OLD[100:120])
    with store.read_from("k", 10_000) as stream:
        assert b"".join(stream.chunks) == OLD[10_000:]
    with store.read_from("k") as stream:  # from the start, to the end
        assert (stream.offset, stream.total, b"".join(stream.chunks)) == (0, len(OLD), OLD)
    with pytest.raises(StoreError, match="does not exist"):
        store.read_from("nope").__enter__()


def test_a_key_that_is_a_folder_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "boxes" / "k").mkdir(parents=True)
    store = LocalStore(tmp_path)
    with pytest.raises(StoreError, match="cannot read"):
        store.get_bytes("boxes/k")
    with pytest.raises(StoreError, match="cannot read"):
        store.read_from("boxes/k").__enter__()
    assert store.head("boxes/k") is None and not store.exists("boxes/k")


def test_a_plain_write_replaces_and_a_compare_and_swap_of_a_missing_key_is_a_conflict(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put_bytes("k", b"one")
    assert store.put_bytes("k", b"two") == _sha(b"two")
    assert (tmp_path / "k").read_bytes() == b"two"
    with pytest.raises(ConflictError, match="changed since it was read"):
        store.put_bytes("gone", b"x", if_match=_sha(b"x"))
    assert not (tmp_path / "gone").exists()
    assert store.exists("k") and not store.exists("gone")


def test_a_store_below_a_file_cannot_be_written_and_a_vanished_archive_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot create"):
        LocalStore(tmp_path / "file" / "store").put_bytes("a/b", b"x")
    store = LocalStore(tmp_path / "store")
    with pytest.raises(StoreError, match=r"writing .* failed"):
        store.put_file("a.tar.zst", FileUpload(tmp_path / "missing.tar.zst", 1, "0" * 64))
    assert not list((tmp_path / "store").iterdir())
    LocalStore(tmp_path / "not-yet").check()  # a store that does not exist yet is made by the first write


def test_claiming_the_name_without_hard_links_is_create_if_absent_too(tmp_path: Path) -> None:
    temp, target = tmp_path / ".t.tmp", tmp_path / "target"
    temp.write_bytes(b"new")
    local._claim_then_replace(temp, target)
    assert target.read_bytes() == b"new" and not temp.exists()
    temp.write_bytes(b"newer")
    with pytest.raises(ConflictError, match="already exists"):
        local._claim_then_replace(temp, target)
    assert target.read_bytes() == b"new"
