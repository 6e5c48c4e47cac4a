"""The upgrade's steps on real folders and real framed releases (tests/support/framedreleases.py) in a
directory store: what DEST holds, the lock, fetching only the new frames, the swap and its recovery."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from scrollcase.client.framecache import FrameCache, fill_from_archive
from scrollcase.client.receive import Fetched, fetch_release, unpack_from_frames, unpack_healing
from scrollcase.client.upgrade import (
    Siblings,
    clear_staging,
    installed_box,
    recover_swap,
    swap_in,
    upgrading,
)
from scrollcase.errors import BuildError, IntegrityError, ScrollcaseError, UsageError
from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, PrefixFile, RelocationInfo, prefix_text
from scrollcase.progress import silent_meter
from scrollcase.store.local import LocalStore
from tests.support.framedbox import make_framed_box
from tests.support.framedreleases import new_frame_bytes, write_framed_release
from tests.support.releases import SyntheticRelease, box_json_for, make_manifest


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticRelease]:
    work = tmp_path_factory.mktemp("upgrade-steps")
    return {v: write_framed_release(work, v, payload=30_000, packages=3) for v in ("1.0.0", "1.0.1")}


def cache_holding(root: Path, release: SyntheticRelease) -> FrameCache:
    """A frame cache filled from ``release``'s archive, as its install left it."""
    cache = FrameCache(root)
    info = release.manifest.archive
    fill_from_archive(cache, release.archive_path, info.frames or [], info.size, release.manifest.version)
    return cache


def a_box(folder: Path, release: SyntheticRelease, marker: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "box.json").write_bytes(dump_box_json(box_json_for(release.manifest)))
    (folder / "marker").write_text(marker)
    return folder


def test_the_siblings_sit_beside_dest(tmp_path: Path) -> None:
    sib = Siblings(tmp_path / "box")
    assert (sib.staging, sib.previous, sib.lock) == (
        tmp_path / ".box.upgrade",
        tmp_path / ".box.previous",
        tmp_path / ".box.upgrade.lock",
    )


def test_installed_box_reads_box_json(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    box = installed_box(a_box(tmp_path / "box", releases["1.0.0"], "old"))
    assert (box.boxId, box.version) == ("reuse-box", "1.0.0")


@pytest.mark.parametrize("shape", ["absent", "empty", "box.json is a folder"])
def test_a_folder_without_box_json_is_no_installed_box(tmp_path: Path, shape: str) -> None:
    dest = tmp_path / "box"
    if shape != "absent":
        dest.mkdir()
    if shape == "box.json is a folder":
        (dest / "box.json").mkdir()
    with pytest.raises(UsageError, match=r"holds no box.json"):
        installed_box(dest)


def test_a_box_json_that_describes_no_box_is_named_as_the_user_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "box.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IntegrityError, match=r"^box/box.json does not describe a box"):
        installed_box(tmp_path / "box")


def test_recover_swap_puts_back_only_a_complete_previous(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    dest = tmp_path / "box"
    sib = Siblings(dest)
    assert recover_swap(dest) is False  # nothing to put back
    a_box(sib.previous, releases["1.0.0"], "old")
    assert recover_swap(dest) is True
    assert (dest / "marker").read_text() == "old" and not sib.previous.exists()
    a_box(sib.previous, releases["1.0.0"], "older")
    assert recover_swap(dest) is False  # DEST is there: the previous tree is only a kept one
    assert (dest / "marker").read_text() == "old"


def test_one_upgrade_of_a_dest_at_a_time(tmp_path: Path) -> None:
    dest = tmp_path / "box"
    with upgrading(dest) as sib:
        assert sib == Siblings(dest)
        assert sib.lock.read_text() == f"{os.getpid()}\n"
        held = r"is upgrading .*box now: it holds the lock .*\.box\.upgrade\.lock"
        with pytest.raises(ScrollcaseError, match=held), upgrading(dest):
            pass
    assert not Siblings(dest).lock.exists()


def test_fetch_release_fetches_only_the_frames_the_cache_lacks(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    old, new = releases["1.0.0"], releases["1.0.1"]
    cache = cache_holding(tmp_path / "frames", old)
    store_root = tmp_path / "store"
    (store_root / new.manifest.keys.archive).parent.mkdir(parents=True)
    (store_root / new.manifest.keys.archive).write_bytes(new.archive_path.read_bytes())
    frames = list(new.manifest.archive.frames or [])
    got = fetch_release(LocalStore(store_root), new.manifest, frames, cache)
    assert got.archive is None and cache.missing(frames) == []  # the archive is never written whole
    have = {f.sha256 for f in old.manifest.archive.frames or []}
    assert (got.frames_total, got.frames_fetched) == (len(frames), len([f for f in frames if f.sha256 not in have]))
    assert got.bytes_fetched == new_frame_bytes(old, new) > 0
    again = fetch_release(LocalStore(store_root), new.manifest, frames, cache)
    assert (again.frames_fetched, again.bytes_fetched) == (0, 0)


def test_the_release_is_unpacked_from_the_cached_frames(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    new = releases["1.0.1"]
    cache, info = cache_holding(tmp_path / "frames", new), new.manifest.archive
    staging, dest = tmp_path / ".box.upgrade", tmp_path / "box"
    result = unpack_from_frames(cache, new.manifest, staging, dest, "SRC")
    assert result.dest == staging and result.sha256 == info.sha256
    assert installed_box(staging).version == "1.0.1"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".box.upgrade", "frames"]  # no archive written


def test_frames_that_do_not_make_the_archive_unpack_nothing(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    new = releases["1.0.1"]
    cache, info = cache_holding(tmp_path / "frames", new), new.manifest.archive
    lying = new.manifest.model_copy(update={"archive": info.model_copy(update={"sha256": "0" * 64})})
    with pytest.raises(IntegrityError, match=r"SRC \(reassembled from the frame cache\): sha256 is"):
        unpack_from_frames(cache, lying, tmp_path / ".box.upgrade", tmp_path / "box", "SRC")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


def test_a_box_json_frame_of_another_release_is_refused_before_unpacking(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    old, new = releases["1.0.0"], releases["1.0.1"]
    cache, info = cache_holding(tmp_path / "frames", old), new.manifest.archive
    old_box_json = next(f for f in old.manifest.archive.frames or [] if f.name == "box.json")
    frames = [old_box_json if f.name == "box.json" else f for f in info.frames or []]  # a table naming 1.0.0's
    mixed = new.manifest.model_copy(update={"archive": info.model_copy(update={"frames": frames})})
    with pytest.raises(IntegrityError, match=r"refusing to unpack: .* and its release manifest do not describe"):
        unpack_from_frames(cache, mixed, tmp_path / ".box.upgrade", tmp_path / "box", "SRC")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


def test_a_damaged_box_json_frame_in_the_cache_is_named_before_it_is_believed(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    new = releases["1.0.1"]
    cache = cache_holding(tmp_path / "frames", new)
    box_json = next(f for f in new.manifest.archive.frames or [] if f.name == "box.json")
    entry = cache.path_for(box_json.sha256)
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    with pytest.raises(
        IntegrityError, match=f"the frame cache entry {entry} \\(box.json\\) is not the bytes"
    ) as raised:
        unpack_from_frames(cache, new.manifest, tmp_path / ".box.upgrade", tmp_path / "box", "SRC")
    assert "damaged on this machine" in (raised.value.fix or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


def test_frames_that_match_their_table_but_not_the_archive_blame_the_release_not_the_cache(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    new = releases["1.0.1"]
    cache, info = cache_holding(tmp_path / "frames", new), new.manifest.archive
    lying = new.manifest.model_copy(update={"archive": info.model_copy(update={"sha256": "0" * 64})})
    fetched = Fetched(None, len(info.frames or []), 0, 0)
    empty = LocalStore(tmp_path / "empty-store")  # nothing is fetched again: no frame is damaged
    with pytest.raises(IntegrityError, match="every cached frame matches the release manifest's frame table") as raised:
        unpack_healing(  # the heal's refusal, with no store to heal from
            empty, fetched, lying, cache, tmp_path / ".box.upgrade", tmp_path / "box", print, silent_meter
        )
    assert "the release itself is at fault" in (raised.value.fix or "") and "again" not in (raised.value.fix or "")
    assert all(cache.has(f) for f in info.frames or [])


def test_swap_in_moves_the_old_tree_aside(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    sib = Siblings(tmp_path / "box")
    a_box(sib.dest, releases["1.0.0"], "old")
    a_box(sib.previous, releases["1.0.0"], "stale")  # kept by an earlier upgrade
    a_box(sib.staging, releases["1.0.1"], "new")
    assert swap_in(sib, keep_previous=True) == sib.previous
    assert (sib.dest / "marker").read_text() == "new" and (sib.previous / "marker").read_text() == "old"
    a_box(sib.staging, releases["1.0.1"], "newer")
    assert swap_in(sib, keep_previous=False) is None
    assert (sib.dest / "marker").read_text() == "newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box"]


def test_a_dest_that_is_a_symlink_is_swapped_and_its_folder_kept(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    real = a_box(tmp_path / "real", releases["1.0.0"], "old")
    sib = Siblings(tmp_path / "box")
    sib.dest.symlink_to(real)
    for marker in ("new", "newer"):  # the second upgrade meets the first one's previous: the link
        a_box(sib.staging, releases["1.0.1"], marker)
        assert swap_in(sib, keep_previous=marker == "new") == (sib.previous if marker == "new" else None)
        assert (sib.dest / "marker").read_text() == marker and not sib.dest.is_symlink()
    assert (real / "marker").read_text() == "old"  # the folder the link named is not the upgrade's to delete
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box", "real"]


def test_a_dangling_previous_link_is_replaced_not_renamed_onto(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    """DEST was a link, kept as .previous by --keep-previous, and its folder deleted since: the next swap
    removes the dangling link (renaming DEST onto it fails with ENOTDIR, upgrade after upgrade)."""
    sib = Siblings(tmp_path / "box")
    a_box(sib.dest, releases["1.0.0"], "old")
    sib.previous.symlink_to(tmp_path / "deleted")
    a_box(sib.staging, releases["1.0.1"], "new")
    assert swap_in(sib, keep_previous=True) == sib.previous
    assert (sib.dest / "marker").read_text() == "new" and (sib.previous / "marker").read_text() == "old"
    assert not sib.previous.is_symlink()


def test_results_are_values() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Siblings(Path("box")).dest = Path("other")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Fetched(Path("a"), 1, 1, 1).frames_fetched = 0  # type: ignore[misc]


def test_a_failed_swap_leaves_the_old_install(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    sib = Siblings(tmp_path / "box")
    a_box(sib.dest, releases["1.0.0"], "old")
    with pytest.raises(BuildError, match=r"cannot swap .*No such file") as raised:
        swap_in(sib, keep_previous=False)  # no staging tree to swap in
    assert "the old install is in place" in (raised.value.fix or "")
    assert (sib.dest / "marker").read_text() == "old" and not sib.previous.exists()


def test_clear_staging_removes_what_a_killed_upgrade_left(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    sib = Siblings(tmp_path / "box")
    clear_staging(sib)  # nothing there
    a_box(sib.staging, releases["1.0.1"], "half")
    clear_staging(sib)
    assert not sib.staging.exists()
    sib.staging.symlink_to(tmp_path / "elsewhere")  # dangling
    clear_staging(sib)
    assert not sib.staging.is_symlink()
    elsewhere = a_box(tmp_path / "elsewhere", releases["1.0.1"], "not ours")
    sib.staging.symlink_to(elsewhere)
    clear_staging(sib)
    assert not sib.staging.is_symlink() and (elsewhere / "marker").read_text() == "not ours"  # only the link


def test_a_staging_path_that_cannot_be_removed_says_so(tmp_path: Path) -> None:
    sib = Siblings(tmp_path / "box")
    sib.staging.write_text("not a folder")
    with pytest.raises(ScrollcaseError, match="left by an interrupted upgrade: Not a directory"):
        clear_staging(sib)


def relocatable_release(work: Path) -> SyntheticRelease:
    """A framed release whose box has a text file holding the placeholder prefix, listed in box.json."""
    draft = make_manifest(box_id="reuse-box", version="1.0.2", cuda=None, size=0, sha256="0" * 64)
    tree = make_framed_box(work / "tree", version="1.0.2", payload=10_000, packages=2)
    (tree / "venv" / "etc").mkdir()
    (tree / "venv" / "etc" / "prefix.txt").write_text(f"prefix={BOX_PREFIX_PLACEHOLDER}/venv\n")
    relocation = RelocationInfo(
        placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path="venv/etc/prefix.txt", mode="text")]
    )
    box = box_json_for(draft).model_copy(update={"relocation": relocation})
    (tree / "box.json").write_bytes(dump_box_json(box))
    packed = pack_tree(tree, work / "dist" / draft.archive.name, level=1)
    archive = draft.archive.model_copy(
        update={"size": packed.size, "sha256": packed.sha256, "frames": frame_table(packed.frames)}
    )
    return SyntheticRelease(draft.model_copy(update={"archive": archive}), work / "unused.json", packed.path)


def test_the_upgraded_tree_is_relocated_to_dest_not_to_where_it_is_unpacked(tmp_path: Path) -> None:
    """The new tree is unpacked into ``.DEST.upgrade`` and renamed to DEST: its files must name DEST, the
    path they will live at, never the staging folder that is gone after the swap."""
    release = relocatable_release(tmp_path / "work")
    cache = cache_holding(tmp_path / "frames", release)
    staging, dest = tmp_path / ".box.upgrade", tmp_path / "box"
    result = unpack_from_frames(cache, release.manifest, staging, dest, "SRC")
    assert result.relocated_files == 1
    text = (staging / "venv" / "etc" / "prefix.txt").read_text()
    assert text == f"prefix={prefix_text(dest.absolute())}/venv\n"
    assert str(staging) not in text and BOX_PREFIX_PLACEHOLDER not in text
