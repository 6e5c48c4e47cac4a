"""The user cache's folders: measured (hard links once, links from boxes apart), pruned by age, removed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from scrollcase.io import cache as usercache
from scrollcase.io.cache import Freed

SHA_A = "a" * 64
SHA_B = "b" * 64


def _file(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def _age(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def test_every_section_has_its_own_folder_and_the_rooms_use_these_names() -> None:
    from scrollcase.client.download import DOWNLOADS
    from scrollcase.client.framecache import FRAMES

    names = [s.name for s in usercache.CACHES]
    assert len(set(names)) == len(names) == len(usercache.BY_NAME)
    assert {FRAMES, DOWNLOADS} <= set(names)


def test_usage_counts_a_hard_linked_file_once_and_tells_the_bytes_a_box_also_links(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    entry = _file(root / "unpacked" / SHA_A / "files" / "lib.so", 1000)
    os.link(entry, root / "unpacked" / SHA_A / "files" / "again.so")  # two links inside: one file
    _file(root / "unpacked" / SHA_B / "files" / "big.so", 5000)
    box = tmp_path / "box"
    box.mkdir()
    os.link(root / "unpacked" / SHA_B / "files" / "big.so", box / "big.so")  # a box links it too

    (used,) = usercache.usage(root, [usercache.BY_NAME["unpacked"]])

    assert (used.files, used.bytes, used.shared_bytes, used.freeable_bytes) == (2, 6000, 5000, 1000)


def test_usage_of_an_absent_or_unreadable_folder_is_nothing(tmp_path: Path) -> None:
    used = usercache.usage(tmp_path / "nowhere")
    assert [(u.files, u.bytes) for u in used] == [(0, 0)] * len(usercache.CACHES)


def test_remove_unused_takes_only_entries_untouched_since_the_cutoff(tmp_path: Path) -> None:
    folder = tmp_path / "wheels"
    old = _file(folder / SHA_A / "old-1.0-py3-none-any.whl", 300).parent
    fresh = _file(folder / SHA_B / "fresh-1.0-py3-none-any.whl", 200).parent
    _file(folder / "notes.txt", 10)  # not an entry: never pruned
    _age(old, 40)
    _age(fresh, 40)
    usercache.WHEEL_CACHE.touch(fresh)  # used by a build just now

    removed = usercache.WHEEL_CACHE.prune(folder, 30)

    assert removed == [(old, 300)] and Freed.of(removed) == Freed(1, 300)
    assert not old.exists() and fresh.is_dir() and (folder / "notes.txt").is_file()
    assert sorted(p.name for p in folder.iterdir()) == [SHA_B, "notes.txt"]  # nothing left aside


def test_clean_removes_whole_sections_and_says_what_they_held(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    _file(root / "pyc" / "ab" / ("ab" + "0" * 62), 70)
    _file(root / "wheels" / SHA_A / "w.whl", 30)

    removed = usercache.clean(root, [usercache.BY_NAME["pyc"], usercache.BY_NAME["frames"]])

    assert [(u.section.name, u.files, u.bytes) for u in removed] == [("pyc", 1, 70), ("frames", 0, 0)]
    assert sorted(p.name for p in root.iterdir()) == ["wheels"]


def test_a_removal_killed_half_way_is_finished_by_the_next(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "pyc"
    _file(folder / "x", 1)
    dead = folder.with_name(f".pyc.{2**22 + 12345}-deadbeef{usercache.REMOVING}")  # no such process
    _file(dead / "leftover", 5)

    usercache.remove_tree(folder)

    assert list((tmp_path / "cache").iterdir()) == []


def test_a_folder_that_cannot_be_renamed_aside_is_an_error_and_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache" / "wheels"
    _file(folder / SHA_A / "w.whl", 5)

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError(13, "in use", str(self))

    monkeypatch.setattr(Path, "rename", refuse)
    with pytest.raises(PermissionError):
        usercache.remove_tree(folder)
    assert (folder / SHA_A / "w.whl").read_bytes() == b"xxxxx"


def test_every_cache_is_one_content_cache_and_prune_follows_each_rule(tmp_path: Path) -> None:
    """`scrollcase cache prune` has no code per cache: each instance's Keep decides what stays."""
    root = tmp_path / "cache"
    wheel = _file(usercache.WHEEL_CACHE.entry(root / "wheels", SHA_A) / "a.whl", 3).parent
    frame = _file(usercache.PACK_FRAME_CACHE.entry(root / "packframes", SHA_B), 7)
    pyc = _file(usercache.PYC_CACHE.entry(root / "pyc", SHA_A), 11)
    download = _file(usercache.DOWNLOAD_CACHE.entry(root / "downloads", SHA_A), 13)
    for path in (wheel, frame, pyc, download):
        _age(path, 40)
    usercache.PACK_FRAME_CACHE.touch(frame)  # reused by a pack: kept
    usercache.PYC_CACHE.touch(pyc)  # bytecode is never touched on use: still 40 days old

    freed = usercache.prune(root, usercache.CACHES, 30)

    assert all(isinstance(c, usercache.ContentCache) for c in usercache.CACHES)
    assert list(freed) == ["wheels", "unpacked", "packframes", "pyc", "frames", "files"]  # the caches with a rule
    assert (freed["wheels"], freed["packframes"], freed["pyc"]) == (Freed(1, 3), Freed(), Freed(1, 11))
    assert not wheel.exists() and frame.is_file() and not pyc.exists()
    assert download.is_file()  # no rule: only `cache clean` removes downloads


def test_a_cache_kept_by_pins_keeps_what_live_folders_name_and_ignores_the_age(tmp_path: Path) -> None:
    folder = tmp_path / "frames"
    cache = usercache.FRAME_CACHE
    kept, dropped = _file(cache.entry(folder, SHA_A), 5), _file(cache.entry(folder, SHA_B), 9)
    box = tmp_path / "box"
    box.mkdir()
    cache.pin(folder, box, [SHA_A])
    cache.pin(folder, tmp_path / "deleted-box", [SHA_B])  # its folder is gone: the pin no longer counts

    assert cache.prune(folder, max_age_days=1000) == []  # both younger than the grace
    _age(kept, 1)
    _age(dropped, 1)

    assert cache.prune(folder, max_age_days=1000) == [(dropped, 9)]
    assert kept.is_file() and cache.pinned(folder, box) == (SHA_A,)
    assert [p.name for p in (folder / usercache.PINS).iterdir()] == [cache.pin_path(folder, box).name]


def test_shared_files_stay_while_a_box_pins_or_hard_links_them_and_go_when_none_does(tmp_path: Path) -> None:
    """`cache prune` never removes content an installed box uses (client/share.py's store)."""
    cache = usercache.SHARED_FILES_CACHE
    folder = cache.folder(tmp_path / "cache")
    pinned, linked, unused = (_file(cache.entry(folder, sha), 5) for sha in (SHA_A, SHA_B, "c" * 64))
    for path in (pinned, linked, unused):
        _age(path, 400)  # a shared file keeps the time it was packed with: the grace never applies
    box_a, box_b = tmp_path / "a", tmp_path / "b"
    box_a.mkdir()
    box_b.mkdir()
    cache.pin(folder, box_a, [SHA_A])  # a box on a file system with clones: pinned, not linked
    os.link(linked, box_b / "lib.so")  # a box whose pin was lost: still hard-linked

    removed = cache.prune(folder, 30)

    assert [path for path, _ in removed] == [unused]
    assert pinned.is_file() and linked.is_file()
    assert cache.linked_entries(folder) == {SHA_B}
    assert [pin.dest for pin in cache.pins(folder)] == [str(box_a)]
    (box_b / "lib.so").unlink()
    box_a.rmdir()  # both boxes deleted: nothing of theirs is kept
    assert sorted(path for path, _ in cache.prune(folder, 30)) == sorted([pinned, linked])
