"""The packer's frame cache: a rebuild reuses unchanged units' frames and writes the bytes a fresh pack writes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from scrollcase.box.archive import pack_tree
from scrollcase.box.packcache import PackCache
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
