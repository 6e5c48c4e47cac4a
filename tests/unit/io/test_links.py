"""The link chooser: each OS's chain (Linux reflink, macOS clone, Windows NTFS hard link), walked with
injected operations that play each file system; the real operations on this machine's disk."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from scrollcase.io.links import LinkOps, link_chain, place


def test_each_os_tries_its_clone_first_then_a_hard_link_then_a_copy() -> None:
    assert link_chain("linux") == ("reflink", "hardlink", "copy")
    assert link_chain("darwin") == ("clone", "hardlink", "copy")
    assert link_chain("win32") == ("hardlink", "copy")  # NTFS: hard links, no reflinks
    assert link_chain("freebsd14") == ("hardlink", "copy")


def _unsupported(source: Path, target: Path) -> None:
    target.write_bytes(b"")  # a clone that made its file before the ioctl failed
    raise OSError(errno.EOPNOTSUPP, "not supported", str(target))


def _made_by(name: str, tried: list[str]) -> Callable[[Path, Path], None]:
    def op(source: Path, target: Path) -> None:
        tried.append(name)
        target.write_bytes(source.read_bytes())

    return op


@pytest.mark.parametrize(
    ("platform", "works", "expected", "tried"),
    [
        ("linux", {"reflink", "hardlink"}, "reflink", ["reflink"]),  # Btrfs, XFS
        ("linux", {"hardlink"}, "hardlink", ["hardlink"]),  # ext4: no reflinks
        ("linux", set(), "copy", ["copy"]),  # across file systems
        ("darwin", {"clone", "hardlink"}, "clone", ["clone"]),  # APFS
        ("darwin", {"hardlink"}, "hardlink", ["hardlink"]),  # HFS+
        ("win32", {"hardlink"}, "hardlink", ["hardlink"]),  # NTFS
        ("win32", set(), "copy", ["copy"]),  # FAT32: no links at all
    ],
)
def test_the_first_method_that_works_wins_and_a_failed_one_leaves_no_file(
    tmp_path: Path, platform: str, works: set[str], expected: str, tried: list[str]
) -> None:
    source = tmp_path / "source"
    source.write_bytes(b"content")
    done: list[str] = []
    ops = LinkOps(
        **{
            m: _made_by(m, done) if m in works or m == "copy" else _unsupported
            for m in ("reflink", "clone", "hardlink", "copy")
        }
    )
    assert place(source, tmp_path / "target", link_chain(platform), ops) == expected
    assert done == tried and (tmp_path / "target").read_bytes() == b"content"


def test_when_no_method_works_the_last_error_is_raised_and_nothing_is_left(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.write_bytes(b"content")
    ops = LinkOps(reflink=_unsupported, clone=_unsupported, hardlink=_unsupported, copy=_unsupported)
    with pytest.raises(OSError, match="not supported"):
        place(source, tmp_path / "target", ("reflink", "hardlink"), ops)
    assert not (tmp_path / "target").exists()


def test_the_real_operations_on_this_disk_give_the_same_bytes(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.write_bytes(b"content")
    method = place(source, tmp_path / "linked", ("reflink", "hardlink"))
    assert (tmp_path / "linked").read_bytes() == b"content"
    if method == "hardlink":
        assert os.stat(tmp_path / "linked").st_ino == source.stat().st_ino
    else:  # a clone is its own file: writing it leaves the source as it was
        (tmp_path / "linked").write_bytes(b"other")
        assert source.read_bytes() == b"content"
    assert place(source, tmp_path / "copied", ("copy",)) == "copy"
    assert os.stat(tmp_path / "copied").st_ino != source.stat().st_ino


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS has clonefile()")
def test_clonefile_where_the_os_has_none_is_an_error_and_the_chain_goes_on(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.write_bytes(b"content")
    with pytest.raises(OSError):
        place(source, tmp_path / "cloned", ("clone",))
    assert not (tmp_path / "cloned").exists()
    assert place(source, tmp_path / "linked", ("clone", "hardlink")) == "hardlink"
