"""The frame cache: real framed archives (tests/support/framedreleases.py) filled in, fetched by ranged reads
from a directory store and reassembled, each frame checked against the manifest's frame table."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.client.framecache import (
    PRUNE_GRACE_SECONDS,
    FrameCache,
    FrameStream,
    Pruned,
    adjacent_runs,
    distinct,
    fetch_frames,
    fill_from_archive,
    keep_installed,
    sharing,
    unpack_keeping_frames,
)
from scrollcase.errors import IntegrityError
from scrollcase.format.release import ArchiveFrame
from scrollcase.io.cache import FRAME_CACHE
from scrollcase.store.http import HttpStore
from scrollcase.store.local import LocalStore
from tests.support.framedreleases import write_framed_release
from tests.support.httpstore import serve
from tests.support.meters import Meters
from tests.support.releases import SyntheticRelease


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRelease:
    return write_framed_release(tmp_path_factory.mktemp("framecache"), "1.0.0", payload=30_000, packages=3)


def table(release: SyntheticRelease) -> list[ArchiveFrame]:
    return list(release.manifest.archive.frames or [])


def fill(cache: FrameCache, release: SyntheticRelease, archive: Path | None = None) -> int:
    info = release.manifest.archive
    return fill_from_archive(cache, archive or release.archive_path, table(release), info.size, "the test archive")


def test_an_entry_lives_under_its_digest_prefix(tmp_path: Path) -> None:
    cache = FrameCache.default(tmp_path)
    assert cache.root == tmp_path / "frames"
    assert cache.path_for("ab" + "c" * 62) == tmp_path / "frames" / "ab" / ("ab" + "c" * 62)


def test_fill_puts_every_frame_in_once(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    frames = table(release)
    assert fill(cache, release) == len(frames) > 2
    data = release.archive_path.read_bytes()
    for frame in frames:
        entry = cache.path_for(frame.sha256)
        assert entry.read_bytes() == data[frame.offset : frame.offset + frame.size]
    assert sorted(p.name for p in cache.root.rglob("*") if p.is_file()) == sorted(f.sha256 for f in frames)
    assert fill(cache, release) == 0  # all there already
    assert cache.missing(frames) == []


def test_has_wants_the_table_size(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    frame = table(release)[1]
    assert not cache.has(frame)
    for size in (frame.size - 1, frame.size + 1):
        cache.path_for(frame.sha256).parent.mkdir(parents=True, exist_ok=True)
        cache.path_for(frame.sha256).write_bytes(b"x" * size)
        assert not cache.has(frame)
    cache.path_for(frame.sha256).write_bytes(b"x" * frame.size)
    assert cache.has(frame)


def test_missing_lists_each_absent_digest_once_in_order(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    first, second, third, *_ = table(release)
    twin = second.model_copy(update={"name": "twin", "offset": 0})
    assert cache.missing([first, second, twin, third]) == [first, second, third]
    with cache.adding(second, "here") as out:
        out.write(release.archive_path.read_bytes()[second.offset : second.offset + second.size])
    assert cache.missing([third, second, twin, first]) == [third, first]


@pytest.mark.parametrize("change", ["flip", "shorter", "longer"])
def test_bytes_that_are_not_the_frame_are_refused_and_not_kept(
    tmp_path: Path, release: SyntheticRelease, change: str
) -> None:
    cache = FrameCache(tmp_path / "frames")
    frame = table(release)[1]
    data = bytearray(release.archive_path.read_bytes()[frame.offset : frame.offset + frame.size])
    if change == "flip":
        data[len(data) // 2] ^= 1  # same size, other sha256
    declared = {"shorter": frame.size + 1, "longer": frame.size - 1}.get(change, frame.size)
    claim = frame.model_copy(update={"size": declared})  # the right sha256 with another size
    with pytest.raises(IntegrityError, match=r"refusing frame 'box.json'") as raised, cache.adding(claim, "SRC") as out:
        out.write(bytes(data))
    assert "of SRC" in raised.value.message and f"says {declared} bytes" in raised.value.message
    assert not cache.path_for(frame.sha256).exists() and not list(cache.path_for(frame.sha256).parent.iterdir())


def test_fill_checks_the_frames_it_already_holds(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    frame = table(release)[-1]
    tampered = bytearray(release.archive_path.read_bytes())
    tampered[frame.offset + frame.size // 2] ^= 1
    bad = tmp_path / "bad.tar.zst"
    bad.write_bytes(bytes(tampered))
    with pytest.raises(IntegrityError, match=f"refusing frame {frame.name!r} of the test archive"):
        fill(cache, release, bad)


def test_fill_refuses_a_table_that_does_not_tile_the_archive(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    frames = table(release)
    with pytest.raises(IntegrityError, match="is not a table of its archive: the frames end at"):
        fill_from_archive(cache, release.archive_path, frames, release.manifest.archive.size + 1, "SRC")
    frames[1] = frames[1].model_copy(update={"offset": frames[1].offset + 1})  # a gap, and the end moves too
    with pytest.raises(IntegrityError, match=f"is not a table of its archive: frame {frames[1].name!r} starts at"):
        fill_from_archive(cache, release.archive_path, frames, release.manifest.archive.size, "SRC")
    assert not cache.root.exists()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cache.root = tmp_path  # type: ignore[misc]


def test_fetch_reads_only_the_frames_asked_for(tmp_path: Path, release: SyntheticRelease) -> None:
    key = "boxes/x/archive.tar.zst"
    (tmp_path / "store" / key).parent.mkdir(parents=True)
    (tmp_path / "store" / key).write_bytes(release.archive_path.read_bytes())
    cache = FrameCache(tmp_path / "frames")
    wanted = table(release)[1:]
    meters = Meters()
    fetched = fetch_frames(LocalStore(tmp_path / "store"), key, wanted, cache, meters)
    assert fetched == sum(f.size for f in wanted) == meters.made[0].total == meters.made[0].done
    assert cache.missing(table(release)) == table(release)[:1]


def test_frames_next_to_each_other_are_fetched_with_one_ranged_read(
    tmp_path: Path, release: SyntheticRelease, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)  # the server is on 127.0.0.1
    frames = table(release)
    wanted = [frames[0], frames[1], frames[3], *frames[5:]]  # three runs: 0-1, 3, 5-end
    assert [[f.name for f in run] for run in adjacent_runs(reversed(wanted))] == [
        [f.name for f in frames[:2]],
        [frames[3].name],
        [f.name for f in frames[5:]],
    ]
    key = "archive.tar.zst"
    (tmp_path / "store").mkdir()
    shutil.copyfile(release.archive_path, tmp_path / "store" / key)
    cache = FrameCache(tmp_path / "frames")
    with serve(tmp_path / "store") as server:
        fetched = fetch_frames(HttpStore(server.url), key, wanted, cache)
        requests = server.state.requests
    ranges = [(frames[0].offset, frames[2].offset - 1), (frames[3].offset, frames[4].offset - 1)]
    ranges.append((frames[5].offset, release.manifest.archive.size - 1))
    assert requests == [f"GET /{key} bytes={start}-{end}" for start, end in ranges]
    assert fetched == sum(f.size for f in wanted) and cache.evict_damaged(wanted) == []
    assert cache.missing(frames) == [frames[2], frames[4]]


def test_fetch_refuses_a_store_whose_bytes_differ(tmp_path: Path, release: SyntheticRelease) -> None:
    key = "archive.tar.zst"
    (tmp_path / "store").mkdir()
    tampered = bytearray(release.archive_path.read_bytes())
    frame = table(release)[2]
    tampered[frame.offset] ^= 1
    (tmp_path / "store" / key).write_bytes(bytes(tampered))
    cache = FrameCache(tmp_path / "frames")
    with pytest.raises(IntegrityError, match=r"archive.tar.zst"):
        fetch_frames(LocalStore(tmp_path / "store"), key, table(release), cache)
    assert cache.missing(table(release)) == table(release)[2:]  # the frames before it are kept


def test_the_frames_read_in_turn_are_the_archive(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    for size in (1, 1000, 1 << 20, -1):
        stream = FrameStream(cache, table(release))
        read = functools.partial(stream.read, size)
        assert b"".join(iter(read, b"")) == release.archive_path.read_bytes()
        stream.close()


def test_a_frame_gone_from_the_cache_is_an_integrity_error_naming_it(tmp_path: Path, release: SyntheticRelease) -> None:
    """Removed by another run between the check and the read: the unpack's healing fetches it again."""
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    gone = table(release)[1]
    cache.path_for(gone.sha256).unlink()
    stream = FrameStream(cache, table(release))
    with pytest.raises(IntegrityError, match=f"{gone.sha256} cannot be read"):
        while stream.read(1 << 16):
            pass
    stream.close()


def test_a_cached_entry_that_is_a_link_is_read_as_no_entry(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    linked = table(release)[1]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(cache.path_for(linked.sha256).read_bytes())  # even the right bytes
    cache.path_for(linked.sha256).unlink()
    cache.path_for(linked.sha256).symlink_to(elsewhere)
    stream = FrameStream(cache, table(release))
    with pytest.raises(IntegrityError, match=f"{linked.sha256} cannot be read"):
        while stream.read(1 << 16):
            pass
    stream.close()


def poisoned(cache: FrameCache, frame: ArchiveFrame) -> Path:
    """``frame``'s entry with one byte changed: the same size, other bytes."""
    entry = cache.path_for(frame.sha256)
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    return entry


def test_evict_damaged_removes_the_frames_whose_bytes_are_not_their_digest(
    tmp_path: Path, release: SyntheticRelease
) -> None:
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    frames = table(release)
    bad = poisoned(cache, frames[2])
    assert cache.has(frames[2])  # the size alone cannot tell
    target = tmp_path / "target"
    target.write_bytes(b"x" * frames[1].size)
    cache.path_for(frames[1].sha256).unlink()
    cache.path_for(frames[1].sha256).symlink_to(target)
    cache.path_for(frames[3].sha256).unlink()
    damaged = cache.evict_damaged([*frames, frames[2]])
    assert [f.sha256 for f in damaged] == [frames[i].sha256 for i in (1, 2, 3)]
    assert not bad.exists() and not cache.path_for(frames[1].sha256).is_symlink() and target.exists()
    assert cache.evict_damaged(frames[4:]) == [] and all(cache.has(f) for f in frames[4:])


def test_has_removes_a_link_and_a_linked_folder_never_what_they_name(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    frame, other = table(release)[0], table(release)[1]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / frame.sha256).write_bytes(cache.path_for(frame.sha256).read_bytes())
    os.utime(outside / frame.sha256, (1_000_000, 1_000_000))
    shutil.rmtree(cache.path_for(frame.sha256).parent)
    cache.path_for(frame.sha256).parent.symlink_to(outside)  # the fanout folder is a link
    assert cache.missing([frame]) == [frame]
    assert not cache.path_for(frame.sha256).parent.exists() and (outside / frame.sha256).stat().st_mtime == 1_000_000
    cache.path_for(other.sha256).unlink()
    cache.path_for(other.sha256).symlink_to(outside / frame.sha256)
    assert cache.missing([other]) == [other] and not cache.path_for(other.sha256).is_symlink()
    assert (outside / frame.sha256).stat().st_mtime == 1_000_000  # never touched through the link


def aged(cache: FrameCache, seconds: float = 2 * PRUNE_GRACE_SECONDS) -> None:
    """Every frame in the cache written ``seconds`` ago (older than the prune's grace)."""
    when = time.time() - seconds
    for path in cache.root.glob("??/*"):
        os.utime(path, (when, when))


def aged_cache(tmp_path: Path, release: SyntheticRelease) -> FrameCache:
    """A frame cache holding every frame of ``release``, all older than the prune's grace."""
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    aged(cache)
    return cache


def test_prune_keeps_what_installed_folders_pin_and_removes_the_rest(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = aged_cache(tmp_path, release)
    frames = table(release)
    installed, deleted = tmp_path / "box", tmp_path / "gone"
    installed.mkdir()
    cache.pin(installed, frames[:2])
    cache.pin(deleted, frames[2:])  # a box the user deleted: its pin no longer counts
    (cache.root / "pins" / "junk.json").write_text("{not a pin")
    temp = cache.root / frames[0].sha256[:2] / f".{frames[0].sha256}.123-abc.part"
    temp.write_bytes(b"a download in progress")
    pruned = cache.prune()
    left = sorted(p.name for p in cache.root.glob("??/*"))
    assert left == sorted([temp.name, *(f.sha256 for f in frames[:2])])
    assert pruned == Pruned(len(frames) - 2, sum(f.size for f in frames[2:]))
    assert sorted(p.name for p in (cache.root / "pins").iterdir()) == [FRAME_CACHE.pin_path(cache.root, installed).name]
    assert cache.pinned(installed) == tuple(sorted(f.sha256 for f in frames[:2]))
    assert cache.pinned(deleted) == ()


def test_prune_leaves_frames_younger_than_the_grace(tmp_path: Path, release: SyntheticRelease) -> None:
    """Another install may have fetched them and not pinned them yet."""
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    assert cache.prune() == Pruned(0, 0)
    assert cache.prune(now=time.time() + PRUNE_GRACE_SECONDS + 1).frames == len(table(release))


def test_missing_touches_the_frames_it_relies_on(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = aged_cache(tmp_path, release)
    frames = table(release)
    cache.path_for(frames[0].sha256).unlink()
    assert [f.sha256 for f in cache.missing(frames)] == [frames[0].sha256]
    assert cache.prune() == Pruned(0, 0)  # an upgrade about to assemble from them: not pruned beside it


def test_keep_installed_pins_a_kept_previous_tree_too(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = aged_cache(tmp_path, release)
    frames = table(release)
    dest, previous = tmp_path / "box", tmp_path / ".box.previous"
    dest.mkdir()
    previous.mkdir()
    assert keep_installed(cache, dest, frames[:1], (previous, [frames[1].sha256])) == Pruned(
        len(frames) - 2, sum(f.size for f in frames[2:])
    )
    assert sorted(p.name for p in cache.root.glob("??/*")) == sorted(f.sha256 for f in frames[:2])


def test_keep_installed_prunes_nothing_when_it_cannot_pin(tmp_path: Path, release: SyntheticRelease) -> None:
    """Without DEST's pin, a prune would remove the frames DEST's next upgrade starts from."""
    cache = aged_cache(tmp_path, release)
    (cache.root / "pins").write_text("a file where the pins folder belongs")
    dest = tmp_path / "box"
    dest.mkdir()
    assert keep_installed(cache, dest, table(release)) == Pruned(0, 0)
    assert len(list(cache.root.glob("??/*"))) == len(table(release))


def test_a_cache_that_cannot_be_listed_is_not_pruned(
    tmp_path: Path, release: SyntheticRelease, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune runs after the install is complete: a listing error must cost nothing but disk."""
    cache = aged_cache(tmp_path, release)
    frames_before = len(list(cache.root.glob("??/*")))
    listing = Path.iterdir

    def unlistable(self: Path) -> Iterator[Path]:
        if self == cache.root:  # as root, a mode of 000 would not stop the listing
            raise PermissionError(13, "Permission denied", str(self))
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", unlistable)
    assert cache.prune() == Pruned(0, 0)
    assert frames_before == len(list(cache.root.glob("??/*"))) == len(table(release))


def test_unpacking_keeps_every_frame_of_the_archive_beside_the_tree(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    result = unpack_keeping_frames(cache, release.archive_path, tmp_path / "box", release.manifest.archive, "SRC")
    assert result.dest == tmp_path / "box" and (tmp_path / "box" / "box.json").is_file()
    assert cache.missing(table(release)) == []


def test_a_frame_table_that_lies_about_one_frame_installs_nothing(tmp_path: Path, release: SyntheticRelease) -> None:
    frames = table(release)  # the archive's own sha256 is right: only the table is wrong
    frames[2] = frames[2].model_copy(update={"sha256": "0" * 64})
    info = release.manifest.archive.model_copy(update={"frames": frames})
    cache = FrameCache(tmp_path / "frames")
    with pytest.raises(IntegrityError, match=f"refusing frame {frames[2].name!r} of SRC"):
        unpack_keeping_frames(cache, release.archive_path, tmp_path / "box", info, "SRC")
    assert list(tmp_path.iterdir()) == [tmp_path / "frames"]  # no DEST, no temp tree beside it
    assert not cache.has(frames[2])


def test_sharing_names_every_installed_folder_that_pins_a_frame(tmp_path: Path, release: SyntheticRelease) -> None:
    cache = FrameCache(tmp_path / "frames")
    fill(cache, release)
    frames = distinct(table(release))
    a, b, gone = tmp_path / "a", tmp_path / "b", tmp_path / "deleted"
    for dest in (a, b, gone):
        dest.mkdir()
    cache.pin(a, frames)
    cache.pin(b, frames[:2])  # b shares two of a's frames
    cache.pin(gone, frames)
    gone.rmdir()  # a box the user deleted shares nothing any more
    view = sharing(cache)
    assert [(s.sha256, s.dests) for s in view.shared] == sorted(
        (f.sha256, (str(a.absolute()), str(b.absolute()))) for f in frames[:2]
    )
    two = sum(f.size for f in frames[:2])
    assert [(box.dest, box.frames, box.shared_frames, box.shared_bytes) for box in view.boxes] == [
        (str(a.absolute()), len(frames), 2, two),
        (str(b.absolute()), 2, 2, two),
    ]
    assert view.boxes[0].bytes == sum(f.size for f in frames) and view.saved_bytes == two


def test_distinct_keeps_each_frame_once_in_archive_order(release: SyntheticRelease) -> None:
    frames = table(release)
    assert distinct([*frames, frames[0]]) == distinct(frames) == frames
