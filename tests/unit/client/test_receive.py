"""An install's archive downloaded and unpacked side by side: a reader that follows the growing download,
and the whole from a real loopback HTTP store — DEST only when every check passed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from scrollcase.client import receive
from scrollcase.client.download import Download, Follower, cache_paths
from scrollcase.client.framecache import FrameCache, fill_from_archive
from scrollcase.client.receive import plan_receive, receive_release
from scrollcase.errors import IntegrityError
from scrollcase.store.base import RangeRead
from scrollcase.store.http import HttpStore
from scrollcase.store.local import LocalStore
from tests.support.framedreleases import new_frame_bytes, write_framed_release
from tests.support.httpstore import ServerState, serve
from tests.support.releases import SyntheticRelease

POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="Windows downloads, then unpacks")


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)  # the test server is on 127.0.0.1
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRelease:
    return write_framed_release(tmp_path_factory.mktemp("receive"), "1.0.0", payload=400_000, packages=4)


def store_with(release: SyntheticRelease, root: Path) -> Path:
    (root / release.manifest.keys.archive).parent.mkdir(parents=True)
    shutil.copyfile(release.archive_path, root / release.manifest.keys.archive)
    return root


def test_the_follower_reads_every_byte_as_the_writer_appends_them(tmp_path: Path) -> None:
    data = os.urandom(300_000)
    path = tmp_path / "growing.part"
    done = threading.Event()

    def write_slowly() -> None:
        time.sleep(0.05)  # the reader starts before the file exists
        with path.open("ab") as out:
            for start in range(0, len(data), 65_536):
                out.write(data[start : start + 65_536])
                out.flush()
                time.sleep(0.01)
        done.set()

    follower = Follower(path, len(data), done)
    writer = threading.Thread(target=write_slowly)
    writer.start()
    got = b"".join(iter(lambda: follower.read(50_000), b""))
    writer.join()
    assert got == data and follower.read_the_file(path)
    path.rename(tmp_path / "complete")  # as the download does: the same file under its final name
    assert follower.read_the_file(tmp_path / "complete")
    follower.close()


def test_a_writer_that_ends_early_or_never_starts_ends_the_reading(tmp_path: Path) -> None:
    done = threading.Event()
    done.set()
    assert Follower(tmp_path / "never", 10, done).read() == b""
    (tmp_path / "short").write_bytes(b"12345")
    follower = Follower(tmp_path / "short", 10, done)
    assert follower.read() == b"12345" and follower.read() == b""
    assert not follower.read_the_file(tmp_path / "short")  # not the whole archive
    follower.close()


@POSIX_ONLY
def test_an_install_unpacks_while_it_downloads_and_keeps_every_frame(release: SyntheticRelease, tmp_path: Path) -> None:
    cache = FrameCache.default()
    said: list[str] = []
    with serve(store_with(release, tmp_path / "store")) as server:
        store = HttpStore(server.url)
        got = receive_release(store, release.manifest, tmp_path / "box", cache, "SRC", progress=said.append)
    assert (tmp_path / "box" / "box.json").is_file() and got.unpacked.dest == tmp_path / "box"
    assert got.download.path.read_bytes() == release.archive_path.read_bytes()
    assert cache.missing(release.manifest.archive.frames or []) == []
    assert "downloaded and checked; finishing the unpack" in said


@POSIX_ONLY
def test_a_download_that_starts_over_is_unpacked_again_from_the_complete_file(
    release: SyntheticRelease, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partial = cache_paths(release.manifest.archive.sha256).partial
    partial.parent.mkdir(parents=True)
    partial.write_bytes(release.archive_path.read_bytes()[:1000])  # a server without Range: started over
    opened = threading.Event()

    class OpenTold(Follower):
        def _open(self) -> bool:
            found = super()._open()
            if found:
                opened.set()
            return found

    # The server answers only once the unpack reads the old partial file, so the download's new file
    # always comes after it (under load the download could otherwise start over before the first read).
    monkeypatch.setattr("scrollcase.client.receive.Follower", OpenTold)
    said: list[str] = []
    state = ServerState(honour_range=False, hold=opened)
    with serve(store_with(release, tmp_path / "store"), state) as server:
        got = receive_release(
            HttpStore(server.url), release.manifest, tmp_path / "box", FrameCache.default(), "SRC", progress=said.append
        )
    assert opened.is_set()
    assert any("started over meanwhile" in line for line in said)
    assert (tmp_path / "box" / "box.json").is_file() and got.download.downloaded == release.manifest.archive.size


@POSIX_ONLY
def test_a_tampered_archive_installs_nothing_and_keeps_none_of_its_frames(
    release: SyntheticRelease, tmp_path: Path
) -> None:
    store = store_with(release, tmp_path / "store")
    archive = store / release.manifest.keys.archive
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 1
    archive.write_bytes(bytes(data))
    cache = FrameCache.default()
    with serve(store) as server, pytest.raises(IntegrityError, match="sha256"):
        receive_release(HttpStore(server.url), release.manifest, tmp_path / "box", cache, "SRC")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "store"]  # no DEST, no temp tree beside it
    assert not cache.root.exists() or not any(cache.root.rglob("*.*"))


PIECE = 16_384
STALL_SECONDS = 30.0  # a broken cancel shows up as a failed test after this, never as a hang


class StallingStore(LocalStore):
    """A directory store whose archive arrives in 16 KiB pieces and stalls after ``stall_at`` bytes until
    ``resume`` is set (a slow network while the user presses Ctrl-C)."""

    def __init__(self, root: Path, stall_at: int) -> None:
        super().__init__(root)
        self.stall_at = stall_at
        self.stalled = threading.Event()
        self.resume = threading.Event()

    @contextlib.contextmanager
    def read_from(self, key: str, offset: int = 0, length: int | None = None) -> Iterator[RangeRead]:
        with super().read_from(key, offset, length) as got:
            yield RangeRead(got.offset, got.total, self._paced(got.chunks, offset))

    def _paced(self, chunks: Iterator[bytes], sent: int) -> Iterator[bytes]:
        for chunk in chunks:
            for start in range(0, len(chunk), PIECE):
                if sent >= self.stall_at and not self.stalled.is_set():
                    self.stalled.set()
                    self.resume.wait(STALL_SECONDS)
                yield chunk[start : start + PIECE]
                sent += len(chunk[start : start + PIECE])


@POSIX_ONLY
def test_ctrl_c_during_a_receive_stops_the_download_and_keeps_its_partial_file(
    release: SyntheticRelease, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT while the unpack follows a stalled download: the receive ends with KeyboardInterrupt,
    the download stops at its next chunk (not at the end of the archive), its partial file is kept for the
    rerun, and nothing appears at DEST."""
    size = release.manifest.archive.size
    stall_at = (size // 3) // PIECE * PIECE
    store = StallingStore(store_with(release, tmp_path / "store"), stall_at)
    followers: list[Follower] = []
    cancels: list[threading.Event] = []

    class Seen(Follower):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            followers.append(self)

    real_download = receive.download_archive

    def download(*args: Any, **kwargs: Any) -> Download:
        cancels.append(kwargs["cancel"])  # a spy: the real download runs
        return real_download(*args, **kwargs)

    monkeypatch.setattr(receive, "Follower", Seen)
    monkeypatch.setattr(receive, "download_archive", download)

    def press_ctrl_c() -> None:
        store.stalled.wait(STALL_SECONDS)
        while not (followers and followers[0].consumed):  # the unpack is reading: Ctrl-C lands inside it
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        cancels[0].wait(STALL_SECONDS)  # the stalled network comes back once the receive asked to stop
        store.resume.set()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_IGN in a background job
    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            receive_release(store, release.manifest, tmp_path / "box", FrameCache.default(), "SRC")
    finally:
        store.resume.set()
        signal.signal(signal.SIGINT, previous)
        presser.join()
    paths = cache_paths(release.manifest.archive.sha256)
    assert not paths.complete.exists()  # stopped, not downloaded to the end
    assert paths.partial.stat().st_size == stall_at  # the bytes before the stall, kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "store"]  # no DEST, no temp tree beside it
    monkeypatch.setattr(receive, "download_archive", real_download)  # the rerun: no spy, no stall
    again = receive_release(
        LocalStore(tmp_path / "store"), release.manifest, tmp_path / "box", FrameCache.default(), "SRC"
    )
    assert again.download.resumed_from == stall_at and (tmp_path / "box" / "box.json").is_file()


@pytest.mark.parametrize("cached", [True, False], ids=["in-the-download-cache", "downloaded"])
def test_an_archive_that_is_another_release_is_refused_on_either_path(
    release: SyntheticRelease, tmp_path: Path, cached: bool
) -> None:
    """A manifest that names this archive's size and sha256 but another version (a store whose manifest and
    archive disagree): box.json's identity is checked before DEST appears, also when the archive is already
    in the download cache and the receive takes the one-after-another path."""
    lying = release.manifest.model_copy(update={"version": "1.0.1"})
    store = store_with(release, tmp_path / "store")
    if cached:
        complete = cache_paths(release.manifest.archive.sha256).complete
        complete.parent.mkdir(parents=True)
        shutil.copyfile(release.archive_path, complete)
    cache = FrameCache.default()
    with pytest.raises(
        IntegrityError, match=r"refusing to unpack: .* and its release manifest do not describe"
    ) as raised:
        receive_release(LocalStore(store), lying, tmp_path / "box", cache, "SRC")
    assert [p.key for p in raised.value.problems] == ["keys", "version"]  # its keys name 1.0.0's objects too
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "store"]
    assert not cache.root.exists() or not any(cache.root.rglob("*.*"))  # none of its frames kept


# ------------------------------------------------------------------ from the frames this machine holds


@pytest.fixture(scope="module")
def newer(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRelease:
    """Another release whose frames are the first one's but pkg0's and box.json's (as a second box's are)."""
    return write_framed_release(tmp_path_factory.mktemp("receive-newer"), "1.0.1", payload=400_000, packages=4)


def holding(cache: FrameCache, release: SyntheticRelease) -> FrameCache:
    info = release.manifest.archive
    fill_from_archive(cache, release.archive_path, info.frames or [], info.size, "SRC")
    return cache


def test_the_figures_say_what_a_receive_will_fetch_before_it_fetches(
    release: SyntheticRelease, newer: SyntheticRelease, tmp_path: Path
) -> None:
    cache = FrameCache(tmp_path / "frames")
    info = newer.manifest.archive
    tree = sum(f.uncompressedSize for f in info.frames or [])
    first = plan_receive(info, cache)
    assert (first.how, first.download_bytes, first.disk_bytes, first.reused_bytes) == ("archive", info.size, tree, 0)
    holding(cache, release)
    second = plan_receive(info, cache)
    assert (second.how, second.download_bytes) == ("frames", new_frame_bytes(release, newer))
    assert second.reused_bytes + second.download_bytes == info.size == second.reused_bytes + second.frame_cache_bytes
    assert second.frames_missing == 2 and second.frames == len(info.frames or [])  # pkg0 and box.json
    assert plan_receive(info, cache, whole=True).how == "archive"  # --keep-download: the file itself
    alone = FrameCache(tmp_path / "only-the-end")
    end = (info.frames or [])[-1]
    with alone.adding(end, "SRC") as out:
        out.write(newer.archive_path.read_bytes()[end.offset : end.offset + end.size])
    assert plan_receive(info, alone).how == "archive"  # the tar's end alone: below 1 %, the whole download
    bare = plan_receive(info.model_copy(update={"frames": None}), cache)
    assert (bare.how, bare.download_bytes, bare.disk_bytes) == ("archive", info.size, None)
    assert cache.missing(info.frames or []) != []  # planning fetched nothing


def test_a_receive_from_frames_reads_only_the_missing_ones_by_range(
    release: SyntheticRelease, newer: SyntheticRelease, tmp_path: Path
) -> None:
    cache = holding(FrameCache.default(), release)
    plan = plan_receive(newer.manifest.archive, cache)
    with serve(store_with(newer, tmp_path / "store")) as server:
        got = receive.receive(HttpStore(server.url), newer.manifest, tmp_path / "box", cache, plan, "SRC")
        sent = server.state.sent
    assert got.download is None and got.fetched is not None
    assert sent == got.bytes_downloaded == plan.download_bytes == new_frame_bytes(release, newer)
    assert all(" bytes=" in request for request in server.state.requests)  # ranged reads only
    tree = newer.archive_path.parent.parent / "tree-1.0.1"  # what was packed
    for name in ("box.json", *(str(p.relative_to(tree)) for p in tree.rglob("data.bin"))):
        assert (tmp_path / "box" / name).read_bytes() == (tree / name).read_bytes(), name
    assert not cache_paths(newer.manifest.archive.sha256).complete.exists()  # never written whole


def test_concurrent_receives_that_share_frames_both_succeed(
    release: SyntheticRelease, newer: SyntheticRelease, tmp_path: Path
) -> None:
    cache = holding(FrameCache.default(), release)
    store = LocalStore(store_with(newer, tmp_path / "store"))
    plan = plan_receive(newer.manifest.archive, cache)
    with ThreadPoolExecutor(2) as pool:
        into = (tmp_path / "b", tmp_path / "c")
        runs = [pool.submit(receive.receive, store, newer.manifest, dest, cache, plan, "SRC") for dest in into]
        results = [run.result() for run in runs]
    assert all((tmp_path / name / "box.json").is_file() for name in ("b", "c"))
    assert all(result.unpacked.files == results[0].unpacked.files for result in results)
    assert cache.evict_damaged(newer.manifest.archive.frames or []) == []  # every entry is its bytes
    assert not list(cache.root.rglob("*.part"))  # no temp of either run is left


def test_with_sharing_the_disk_figure_is_the_tree_of_the_frames_this_machine_lacks(
    release: SyntheticRelease, newer: SyntheticRelease, tmp_path: Path
) -> None:
    """install shares the files of the frames it holds with the boxes that brought them: the disk it adds is
    estimated from the frames it lacks (pkg0's and box.json's here); without sharing, the whole tree."""
    cache = holding(FrameCache(tmp_path / "frames"), release)
    info = newer.manifest.archive
    frames = info.frames or []
    lacking = {f.sha256 for f in cache.missing(frames)}
    assert plan_receive(info, cache).disk_bytes == sum(f.uncompressedSize for f in frames)
    shared = plan_receive(info, cache, shared=True).disk_bytes
    assert shared == sum(f.uncompressedSize for f in frames if f.sha256 in lacking) and shared > 0
    assert shared < sum(f.uncompressedSize for f in frames) // 2
    assert plan_receive(info.model_copy(update={"frames": None}), cache, shared=True).disk_bytes is None
