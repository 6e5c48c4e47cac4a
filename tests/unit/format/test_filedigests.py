from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from scrollcase.format.archive.packcache import PackCache
from scrollcase.format.filedigests import BoxLink, digest_tree

POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")


@POSIX_ONLY
def test_every_file_is_hashed_and_every_symlink_recorded(tmp_path: Path) -> None:
    (tmp_path / "venv" / "lib").mkdir(parents=True)
    (tmp_path / "venv" / "lib" / "libx.so.1").write_bytes(b"\x7fELF")
    os.symlink("libx.so.1", tmp_path / "venv" / "lib" / "libx.so")
    os.symlink("lib", tmp_path / "venv" / "lib64")  # a symlinked folder is a link, not walked into
    (tmp_path / "box.json").write_text("{}")
    digests = digest_tree(tmp_path, skip=["box.json"])
    assert [(f.path, f.size, f.sha256) for f in digests.files] == [
        ("venv/lib/libx.so.1", 4, hashlib.sha256(b"\x7fELF").hexdigest())
    ]
    assert digests.links == (
        BoxLink(path="venv/lib/libx.so", target="libx.so.1"),
        BoxLink(path="venv/lib64", target="lib"),
    )


def test_many_files_come_back_sorted_with_their_own_digests(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"f{i:03}").write_bytes(str(i).encode() * 1000)
    digests = digest_tree(tmp_path)
    assert [f.path for f in digests.files] == sorted(f"f{i:03}" for i in range(300))
    assert all(f.sha256 == hashlib.sha256((tmp_path / f.path).read_bytes()).hexdigest() for f in digests.files)


def test_the_pack_caches_inode_digests_give_the_same_list_and_spare_rehashing_linked_files(tmp_path: Path) -> None:
    cache_files = tmp_path / "unpacked"  # a wheel cache entry the box links from
    cache_files.mkdir()
    (cache_files / "lib.so").write_bytes(b"library" * 1000)
    box = tmp_path / "box"
    box.mkdir()
    os.link(cache_files / "lib.so", box / "lib.so")
    (box / "new.pyc").write_bytes(b"compiled anew")  # one link: hashed every build
    reuse = PackCache.open(tmp_path / "packframes")

    assert digest_tree(box, known=reuse.file_digest) == digest_tree(box)  # the same entries as hashing all

    st = (box / "lib.so").stat()
    reuse.inodes[next(iter(reuse.inodes))] = "0" * 64  # what the memory says is what is used: not hashed again
    assert [f.sha256 for f in digest_tree(box, known=reuse.file_digest).files] == [
        "0" * 64,
        hashlib.sha256(b"compiled anew").hexdigest(),
    ]
    assert len(reuse.inodes) == 1 and st.st_nlink == 2
