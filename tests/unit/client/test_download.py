"""The resumable, verified download into the cache, from a directory store and a static HTTP server."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import io
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from scrollcase.client.download import Cancelled, cache_paths, download_archive, locked
from scrollcase.errors import BuildError, IntegrityError, ScrollcaseError, StoreError
from scrollcase.store.base import CHUNK, RangeRead
from scrollcase.store.http import HttpStore
from scrollcase.store.local import LocalStore
from tests.support.httpstore import ServerState, serve
from tests.support.meters import Meters

DATA = os.urandom(3 * 1024 * 1024 + 17)
SHA = hashlib.sha256(DATA).hexdigest()
KEY = "boxes/demo/1.0.0/linux-x86_64-cpu/demo.tar.zst"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)  # the test servers are on 127.0.0.1


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    (root / KEY).parent.mkdir(parents=True)
    (root / KEY).write_bytes(DATA)
    return root


def test_fresh_download_then_the_cache(store_root: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    said: list[str] = []
    meters = Meters()
    got = download_archive(
        LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=cache, progress=said.append, meter=meters
    )
    assert (got.downloaded, got.resumed_from, got.cached) == (len(DATA), 0, False)
    assert said == [] and [(m.total, m.done) for m in meters.made] == [(len(DATA), len(DATA))]  # one clean read
    assert got.path == cache / "downloads" / f"{SHA}.tar.zst" and got.path.read_bytes() == DATA
    assert sorted(p.name for p in got.path.parent.iterdir()) == [f"{SHA}.tar.zst"]  # no partial, no lock
    again = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=cache)
    assert (again.downloaded, again.resumed_from, again.cached, again.path) == (0, 0, True, got.path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.cached = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache_paths(SHA, cache).complete = cache  # type: ignore[misc]


def test_a_local_copy_continues_from_the_partial_file(store_root: Path, tmp_path: Path) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.partial.parent.mkdir(parents=True)
    paths.partial.write_bytes(DATA[:1_000_000])
    said: list[str] = []
    meters = Meters()
    got = download_archive(
        LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, progress=said.append, meter=meters
    )
    assert (got.downloaded, got.resumed_from) == (len(DATA) - 1_000_000, 1_000_000)
    assert [m.total for m in meters.made] == [len(DATA) - 1_000_000]  # the bar counts the missing bytes only
    assert got.path.read_bytes() == DATA and "resuming the download at 1000000" in said[0]


def test_http_resume_asks_only_for_the_missing_bytes(store_root: Path, tmp_path: Path) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.partial.parent.mkdir(parents=True)
    paths.partial.write_bytes(DATA[:2_000_000])
    with serve(store_root) as server:
        got = download_archive(HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert server.state.sent == len(DATA) - 2_000_000 == got.downloaded
    assert server.state.requests == [f"GET /{KEY} bytes=2000000-"]


def test_a_broken_connection_is_resumed_within_the_run(store_root: Path, tmp_path: Path) -> None:
    state = ServerState(budget=1_500_000)
    said: list[str] = []
    with serve(store_root, state) as server:

        def reopen(message: str) -> None:
            said.append(message)
            state.budget = None  # the server is back

        got = download_archive(
            HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, progress=reopen
        )
    assert got.path.read_bytes() == DATA and state.sent == len(DATA) == got.downloaded
    assert state.requests == [f"GET /{KEY} -", f"GET /{KEY} bytes=1500000-"]
    assert "resuming at 1500000" in said[0]


def test_a_dead_server_keeps_the_partial_for_a_rerun(store_root: Path, tmp_path: Path) -> None:
    state = ServerState(budget=1_000_000)
    with serve(store_root, state) as server:
        store = HttpStore(server.url)
        with pytest.raises(StoreError) as raised:
            download_archive(store, KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
        paths = cache_paths(SHA, tmp_path)
        assert paths.partial.stat().st_size == 1_000_000 and not paths.lock.exists()
        assert len(state.requests) == 2  # the try that got nothing earns no third
        assert "1000000 of" in raised.value.message
        assert raised.value.fix == "rerun: the download resumes where it stopped (a rerun resumes the download)"
        state.budget, state.sent = None, 0
        got = download_archive(store, KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert state.sent == len(DATA) - 1_000_000 and got.resumed_from == 1_000_000


def test_a_tampered_archive_is_refused_and_the_partial_deleted(store_root: Path, tmp_path: Path) -> None:
    tampered = bytearray(DATA)
    tampered[-5] ^= 1
    (store_root / KEY).write_bytes(bytes(tampered))
    with pytest.raises(IntegrityError, match="its sha256 is") as raised:
        download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert "nothing was installed" in raised.value.message
    assert list((tmp_path / "downloads").iterdir()) == []


def test_an_object_of_another_size_is_refused_before_a_byte_is_kept(store_root: Path, tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match=f"the release manifest says {len(DATA) + 1}"):
        download_archive(LocalStore(store_root), KEY, size=len(DATA) + 1, sha256=SHA, cache_dir=tmp_path)
    assert list((tmp_path / "downloads").iterdir()) == []
    (store_root / KEY).write_bytes(DATA + b"more")
    with pytest.raises(IntegrityError, match=f"the store holds {len(DATA) + 4} bytes, the release manifest says"):
        download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert list((tmp_path / "downloads").iterdir()) == []


def test_a_partial_longer_than_the_archive_is_started_over(store_root: Path, tmp_path: Path) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.partial.parent.mkdir(parents=True)
    paths.partial.write_bytes(DATA + b"junk")
    got = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert got.resumed_from == 0 and got.path.read_bytes() == DATA


def test_a_server_without_range_support_starts_over(store_root: Path, tmp_path: Path) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.partial.parent.mkdir(parents=True)
    paths.partial.write_bytes(DATA[:100])
    said: list[str] = []
    with serve(store_root, ServerState(honour_range=False)) as server:
        got = download_archive(
            HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, progress=said.append
        )
    assert got.path.read_bytes() == DATA and any("starting over" in line for line in said)
    assert (got.downloaded, got.resumed_from) == (len(DATA), 100)  # the whole archive again


def test_a_live_lock_is_refused_and_a_stale_one_taken_over(store_root: Path, tmp_path: Path) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.lock.parent.mkdir(parents=True)
    paths.lock.write_text(f"{os.getppid()}\n")  # a live process: our parent
    with pytest.raises(ScrollcaseError, match="is downloading this archive"):
        download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    paths.lock.write_text("999999999\n")  # no such process
    got = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert got.path.read_bytes() == DATA and not paths.lock.exists()


def test_a_missing_archive_names_it(tmp_path: Path) -> None:
    said: list[str] = []
    with pytest.raises(StoreError, match="does not exist") as raised:
        download_archive(
            LocalStore(tmp_path / "empty"), KEY, size=10, sha256=SHA, cache_dir=tmp_path, progress=said.append
        )
    assert "kept" not in raised.value.message and said == []  # nothing to resume, no retry
    assert list((tmp_path / "downloads").iterdir()) == []


def test_each_try_that_gets_bytes_earns_another(store_root: Path, tmp_path: Path) -> None:
    state = ServerState(budget=1_500_000)
    breaks = [500_000, None]  # the second transfer breaks off too, the third completes

    def reopen(_: str) -> None:
        more = breaks.pop(0)
        state.budget = None if more is None else state.sent + more

    with serve(store_root, state) as server:
        got = download_archive(
            HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, progress=reopen
        )
    assert state.requests == [f"GET /{KEY} -", f"GET /{KEY} bytes=1500000-", f"GET /{KEY} bytes=2000000-"]
    assert got.path.read_bytes() == DATA and got.downloaded == len(DATA) == state.sent and breaks == []


@pytest.mark.parametrize(("attempts", "requests"), [(0, 1), (1, 1), (3, 3), (None, 3)])
def test_retries_stop_after_the_attempts(store_root: Path, tmp_path: Path, attempts: int | None, requests: int) -> None:
    state = ServerState(budget=1_000_000)

    def reopen(_: str) -> None:
        state.budget = state.sent + 500_000  # every transfer breaks off again

    with serve(store_root, state) as server, pytest.raises(StoreError, match="broke off") as raised:
        download_archive(
            HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, progress=reopen,
            **({} if attempts is None else {"attempts": attempts}),
        )  # fmt: skip
    assert len(state.requests) == requests
    kept = 1_000_000 + 500_000 * (requests - 1)
    assert cache_paths(SHA, tmp_path).partial.stat().st_size == kept and f"{kept} of" in raised.value.message


def test_an_object_longer_than_the_manifest_without_a_length_is_cut_at_the_size(
    store_root: Path, tmp_path: Path
) -> None:
    (store_root / KEY).write_bytes(DATA + b"more")
    with serve(store_root, ServerState(send_length=False)) as server, pytest.raises(IntegrityError) as raised:
        download_archive(HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert f"holds more than {len(DATA)} bytes" in raised.value.message
    assert list((tmp_path / "downloads").iterdir()) == []


def test_a_body_that_ends_early_without_a_length_is_resumed(store_root: Path, tmp_path: Path) -> None:
    (store_root / KEY).write_bytes(DATA[:2_000_000])  # the store's copy is cut short; the server cannot tell
    said: list[str] = []
    with serve(store_root, ServerState(send_length=False)) as server, pytest.raises(StoreError):
        download_archive(
            HttpStore(server.url), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, progress=said.append
        )
    assert said and f"ended after 2000000 of {len(DATA)} bytes" in said[0]


def test_an_empty_archive_is_checked_too(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / KEY).parent.mkdir(parents=True)
    (root / KEY).write_bytes(b"")
    for wrong in ("0" * 64, "f" * 64):  # the digest is refused whichever way it differs
        with pytest.raises(IntegrityError, match="its sha256 is e3b0c442"):
            download_archive(LocalStore(root), KEY, size=0, sha256=wrong, cache_dir=tmp_path)
    empty = hashlib.sha256(b"").hexdigest()
    got = download_archive(LocalStore(root), KEY, size=0, sha256=empty, cache_dir=tmp_path)
    assert got.path.read_bytes() == b"" and (got.downloaded, got.cached) == (0, False)


@pytest.mark.parametrize("junk", [b"", b"x"], ids=["shorter", "longer"])
def test_a_cached_archive_of_another_size_is_fetched_again(store_root: Path, tmp_path: Path, junk: bytes) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.complete.parent.mkdir(parents=True)
    paths.complete.write_bytes(DATA + junk if junk else DATA[:-1])
    got = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert (got.cached, got.downloaded) == (False, len(DATA)) and got.path.read_bytes() == DATA


def test_a_partial_holding_every_byte_is_only_checked(store_root: Path, tmp_path: Path) -> None:
    paths = cache_paths(SHA, tmp_path)
    paths.partial.parent.mkdir(parents=True)
    paths.partial.write_bytes(DATA)  # killed between the last byte and the rename
    got = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert (got.downloaded, got.resumed_from, got.cached) == (0, len(DATA), False) and got.path.read_bytes() == DATA


def test_a_cache_folder_that_cannot_be_made_says_how_to_move_it(store_root: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ScrollcaseError, match=r"cannot create the download cache .*a-file/downloads") as raised:
        download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path / "a-file")
    assert "SCROLLCASE_CACHE_DIR" in (raised.value.fix or "")


def test_a_lock_deleted_by_hand_while_held_is_no_error(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with locked(lock, "is testing"):
        lock.unlink()  # what the refusal's fix tells a user to do
    assert not lock.exists()


class SizelessStore(LocalStore):
    """A directory store that does not say an object's size (as a server without Content-Length), read in
    whole CHUNKs: the chunk boundaries of a test are exact."""

    @contextlib.contextmanager
    def read_from(self, key: str, offset: int = 0, length: int | None = None) -> Iterator[RangeRead]:
        with super().read_from(key, offset, length) as read:
            yield RangeRead(read.offset, None, read.chunks)


def test_the_chunk_that_passes_the_size_is_refused(store_root: Path, tmp_path: Path) -> None:
    (store_root / KEY).write_bytes(DATA[: 2 * CHUNK])  # two whole chunks where the manifest says one and a byte
    with pytest.raises(IntegrityError, match=f"holds more than {CHUNK + 1} bytes"):
        download_archive(SizelessStore(store_root), KEY, size=CHUNK + 1, sha256=SHA, cache_dir=tmp_path)
    assert list((tmp_path / "downloads").iterdir()) == []


def test_a_download_stopped_by_its_caller_keeps_its_partial_for_a_rerun(store_root: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    arrived: list[int] = []

    def meter(label: str, total: int | None) -> Callable[[int], None]:
        def told(n: int) -> None:
            arrived.append(n)
            cancel.set()  # the caller (an unpack that failed, Ctrl-C) stops it after the first chunk

        return told

    with pytest.raises(Cancelled, match="stopped at"):
        download_archive(
            LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path, meter=meter, cancel=cancel
        )
    partial = cache_paths(SHA, tmp_path).partial
    assert partial.stat().st_size == sum(arrived) < len(DATA)
    got = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert got.resumed_from == sum(arrived) and got.path.read_bytes() == DATA


class FullDisk(io.BytesIO):
    """What the partial file becomes on a disk that fills up: the first ``room`` bytes fit, then ENOSPC."""

    def __init__(self, real: BinaryIO, room: int) -> None:
        super().__init__()
        self.real, self.room = real, room

    def write(self, data: Any) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.real.write(data)

    def close(self) -> None:
        self.real.close()
        super().close()


def test_a_full_disk_is_exit_5_naming_the_partial_file_and_keeps_what_fit(
    store_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no tmpfs can be mounted (tests/integration/test_hostile_cache.py), ENOSPC is injected at the
    partial file's writes: the real download path, the real store, the real file for what fit."""
    partial = cache_paths(SHA, tmp_path).partial
    opened = Path.open

    def full_open(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        real = opened(path, mode, *args, **kwargs)
        return FullDisk(real, CHUNK) if path == partial and "a" in mode else real

    monkeypatch.setattr(Path, "open", full_open)
    with pytest.raises(BuildError, match=f"cannot write {partial} \\(the download cache\\): No space left") as raised:
        download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert raised.value.exit_code == 5 and raised.value.problems[0].value == "ENOSPC"
    assert "SCROLLCASE_CACHE_DIR" in (raised.value.fix or "") and str(len(DATA)) in (raised.value.fix or "")
    assert partial.read_bytes() == DATA[:CHUNK]  # what fit is kept: a rerun resumes from it
    monkeypatch.undo()
    got = download_archive(LocalStore(store_root), KEY, size=len(DATA), sha256=SHA, cache_dir=tmp_path)
    assert got.resumed_from == CHUNK and got.path.read_bytes() == DATA
