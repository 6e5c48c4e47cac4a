"""An install's archive downloaded and unpacked side by side: a reader that follows the growing download,
and the whole from a real loopback HTTP store — DEST only when every check passed."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from scrollcase.client.download import Follower, cache_paths
from scrollcase.client.framecache import FrameCache
from scrollcase.client.receive import receive_release
from scrollcase.errors import IntegrityError
from scrollcase.store.http import HttpStore
from tests.support.framedreleases import write_framed_release
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
