"""The packer's frame cache: a rebuild reuses unchanged units' frames and writes the bytes a fresh pack writes."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import threading
import time
from pathlib import Path
from typing import BinaryIO

import pytest
import zstandard

from scrollcase.errors import BuildError
from scrollcase.format.archive import frames, packcache
from scrollcase.format.archive import pack as archive
from scrollcase.format.archive.frames import FrameSink
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.packcache import PackCache
from scrollcase.format.archive.units import Unit
from scrollcase.io.files import DIGEST_NAME
from tests.support.framedbox import SITE, make_framed_box


def _linked_copy(src: Path, dest: Path) -> Path:
    """``src`` with every regular file hard-linked, as a box tree links wheels from the wheel cache."""
    shutil.copytree(src, dest, symlinks=True, copy_function=os.link)
    return dest


def test_a_rebuild_reuses_unchanged_frames_and_gives_the_fresh_bytes(tmp_path: Path) -> None:
    # pkg1..pkg5 hold 5 MB each: units over 4 MiB are streamed (their frames teed into the cache)
    base = make_framed_box(tmp_path / "base", version="1.0.0", payload=5_000_000, packages=6)
    first_tree = _linked_copy(base, tmp_path / "build1")
    cache = PackCache.open(tmp_path / "cache")
    cold = pack_tree(first_tree, tmp_path / "1.tar.zst", cache=cache)
    assert cold.sha256 == pack_tree(first_tree, tmp_path / "1-fresh.tar.zst").sha256
    assert (cache.hits, cache.misses) == (0, len(cold.frames) - 1)  # every unit but the end-of-archive

    # The next build: a new tree linking the same cached files, one package (pkg0) changed.
    second_tree = _linked_copy(base, tmp_path / "build2")
    changed = second_tree / SITE / "pkg0" / "__init__.py"
    changed.unlink()
    changed.write_text("VERSION = '1.0.1'\n")
    (second_tree / "box.json").unlink()
    (second_tree / "box.json").write_text('{"boxId": "framed", "version": "1.0.1", "modelCacheSubdir": "model-cache"}')
    warm = PackCache.open(tmp_path / "cache")
    rebuilt = pack_tree(second_tree, tmp_path / "2.tar.zst", cache=warm)
    fresh = pack_tree(second_tree, tmp_path / "2-fresh.tar.zst")
    assert rebuilt.sha256 == fresh.sha256 and rebuilt.frames == fresh.frames
    assert warm.misses == 2  # pkg0's unit and box.json; every other unit (dirs too) came from the cache
    assert warm.hits == len(rebuilt.frames) - 1 - warm.misses


def test_file_digests_are_remembered_only_for_hard_linked_files(tmp_path: Path) -> None:
    single = tmp_path / "single"
    single.write_bytes(b"a")
    linked = tmp_path / "linked"
    linked.write_bytes(b"b")
    os.link(linked, tmp_path / "other")
    cache = PackCache.open(tmp_path / "cache")
    cache.file_digest(str(single), single.stat())
    cache.file_digest(str(linked), linked.stat())
    assert len(cache.inodes) == 1
    cache.save()
    assert PackCache.open(tmp_path / "cache").inodes == cache.inodes


def test_frames_unused_for_the_max_age_are_pruned_and_a_reused_one_is_kept(tmp_path: Path) -> None:
    tree = make_framed_box(tmp_path / "box", version="1.0.0", payload=5_000, packages=3)
    cache = PackCache.open(tmp_path / "cache")
    packed = pack_tree(tree, tmp_path / "1.tar.zst", cache=cache)
    entries = sorted(p for p in (tmp_path / "cache").glob("??/*") if len(p.name) == 64)
    assert len(entries) == len(packed.frames) - 1  # every unit but the end-of-archive
    stale = time.time() - (packcache.FRAME_MAX_AGE_DAYS + 1) * 86400
    for path in entries:
        os.utime(path, (stale, stale))
    orphan = tmp_path / "cache" / "ab" / ("ab" + "0" * 62)  # a frame of a box nobody packs any more
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"old frame")
    os.utime(orphan, (stale, stale))
    again = PackCache.open(tmp_path / "cache")
    assert again.digests.get(orphan.name) is None
    again.digests[orphan.name] = "f" * 64
    assert pack_tree(tree, tmp_path / "2.tar.zst", cache=again).sha256 == packed.sha256
    assert again.hits == len(entries)  # each reused, so each touched: none is pruned
    assert not orphan.exists() and orphan.name not in PackCache.open(tmp_path / "cache").digests
    assert sorted(p for p in (tmp_path / "cache").glob("??/*") if len(p.name) == 64) == entries


def test_remembered_digests_keep_those_looked_up_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_INODES the digests a pack did not look up go first, oldest first (a full index used to stop
    remembering: every later box hashed all its files on every build)."""
    monkeypatch.setattr(packcache, "MAX_INODES", 3)
    cache = PackCache.open(tmp_path / "cache")
    cache.inodes = {f"old:{i}": "0" * 64 for i in range(3)}
    files = []
    for i in range(2):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"%d" % i)
        os.link(path, tmp_path / f"link{i}")
        files.append(path)
    for path in files:
        cache.file_digest(str(path), path.stat())
    cache.save()
    kept = list(PackCache.open(tmp_path / "cache").inodes)
    assert kept == ["old:2", *(packcache._inode(p.stat()) for p in files)]


def test_content_known_not_to_embed_the_placeholder_is_remembered_across_builds(tmp_path: Path) -> None:
    cache = PackCache.open(tmp_path / "packframes")
    assert cache.clean == set()
    cache.remember_clean(["a" * 64, "b" * 64])
    cache.save()
    again = PackCache.open(tmp_path / "packframes")
    assert again.clean == {"a" * 64, "b" * 64}
    again.save()  # nothing new: not written again
    (tmp_path / "packframes" / packcache._CLEAN).write_text("{not json")
    assert PackCache.open(tmp_path / "packframes").clean == set()  # a damaged list is an empty one


def test_the_clean_list_keeps_this_builds_content_first_within_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packcache, "MAX_INODES", 3)
    cache = PackCache.open(tmp_path / "packframes")
    cache.remember_clean(["1" * 64, "2" * 64, "3" * 64])
    cache.save()
    later = PackCache.open(tmp_path / "packframes")
    later.remember_clean(["4" * 64, "5" * 64])
    later.save()
    assert PackCache.open(tmp_path / "packframes").clean == {"1" * 64, "4" * 64, "5" * 64}


def _two_builds(tmp_path: Path) -> tuple[Path, Path]:
    """A first build's tree and the next one's, in which pkg0 (a 5 MB unit: streamed, not pooled) changed."""
    base = make_framed_box(tmp_path / "base", version="1.0.0", payload=5_000_000, packages=4)
    first = _linked_copy(base, tmp_path / "build1")
    second = make_framed_box(tmp_path / "next", version="1.0.1", payload=5_000_000, packages=4)
    return first, second


def test_a_changed_unit_compressed_aside_while_the_sink_copies_gives_the_fresh_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the sink is still copying when the packer meets a changed unit depends on timing, so the
    test says it is: every big unit not in the cache then goes aside, the rebuild's and a cold pack's."""
    first, second = _two_builds(tmp_path)
    pack_tree(first, tmp_path / "1.tar.zst", cache=PackCache.open(tmp_path / "cache"))
    went_aside: list[str] = []
    compress = archive._Aside._compress

    def noted(self: archive._Aside, entry: object, out: object, unit: Unit, *rest: object) -> Path:
        went_aside.append(unit.name)
        return compress(self, entry, out, unit, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(archive._Aside, "_compress", noted)
    monkeypatch.setattr(FrameSink, "copying", lambda self: True)
    warm = PackCache.open(tmp_path / "cache")
    rebuilt = pack_tree(second, tmp_path / "2.tar.zst", cache=warm)
    monkeypatch.undo()
    fresh = pack_tree(second, tmp_path / "2-fresh.tar.zst")
    assert rebuilt.sha256 == fresh.sha256 and rebuilt.frames == fresh.frames
    assert went_aside == ["wheel/pkg0-1.0"]  # box.json and dirs are small: compressed in the pool
    assert warm.misses == 2
    changed = next(f for f in fresh.frames if f.name == "wheel/pkg0-1.0")
    key = next(k for k, digest in warm.digests.items() if digest == changed.sha256)
    assert warm.path_for(key).stat().st_size == changed.size  # the aside frame is the cache entry
    assert PackCache.open(tmp_path / "cache").digests[key] == changed.sha256


def test_a_unit_that_fails_aside_fails_the_pack_and_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _two_builds(tmp_path)
    pack_tree(first, tmp_path / "1.tar.zst", cache=PackCache.open(tmp_path / "cache"))
    before = set((tmp_path / "cache").rglob("*"))
    members = archive._members

    def failing(unit: Unit, *rest: object) -> None:
        if threading.current_thread().name.startswith("scrollcase-pack-aside"):
            raise BuildError(f"cannot read a file of {unit.name}", fix="test")
        members(unit, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(archive, "_members", failing)
    monkeypatch.setattr(FrameSink, "copying", lambda self: True)
    with pytest.raises(BuildError, match=r"cannot read a file of wheel/pkg0-1\.0"):
        pack_tree(second, tmp_path / "2.tar.zst", cache=PackCache.open(tmp_path / "cache"))
    assert not (tmp_path / "2.tar.zst").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith("2.tar.zst")] == []  # no temp left either
    added = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p not in before]
    assert all(DIGEST_NAME.fullmatch(p.name) for p in added)  # entries only: the aside unit's temp is gone
    small = [len(zstandard.ZstdDecompressor().decompress(p.read_bytes())) for p in added]
    assert len(small) <= 2 and max(small, default=0) < 1 << 20  # dirs' and box.json's frames, not pkg0's
    assert not [t.name for t in threading.enumerate() if t.name.startswith("scrollcase-pack")]  # all joined


def test_a_pack_without_the_archives_digest_writes_the_same_bytes_and_reads_no_known_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pack_tree_unhashed (the build's: its self-test's unpack hashes the archive) writes what pack_tree writes,
    frame table included, cold and from the cache; a rebuild then never reads a frame whose digest is known."""
    first, second = _two_builds(tmp_path)
    cold = archive.pack_tree_unhashed(first, tmp_path / "1.tar.zst", cache=PackCache.open(tmp_path / "cache"))
    hashed = pack_tree(first, tmp_path / "1-hashed.tar.zst")
    assert cold.hashed(hashed.sha256) == dataclasses.replace(hashed, path=cold.path)
    assert (tmp_path / "1.tar.zst").read_bytes() == (tmp_path / "1-hashed.tar.zst").read_bytes()

    opened: list[str] = []

    class Reader(frames._PositionalReader):
        def __init__(self, raw: BinaryIO, path: Path) -> None:
            opened.append(path.name)
            super().__init__(raw, path)

    monkeypatch.setattr(frames, "_PositionalReader", Reader)
    warm = PackCache.open(tmp_path / "cache")
    known = set(warm.digests)
    rebuilt = archive.pack_tree_unhashed(second, tmp_path / "2.tar.zst", cache=warm)
    fresh = pack_tree(second, tmp_path / "2-fresh.tar.zst")
    assert rebuilt.hashed(fresh.sha256) == dataclasses.replace(fresh, path=rebuilt.path)
    assert hashlib.sha256((tmp_path / "2.tar.zst").read_bytes()).hexdigest() == fresh.sha256
    assert warm.hits == len(fresh.frames) - 1 - 2 and known
    assert not known & set(opened)  # a frame whose digest is known is not read (a changed one aside may be)
