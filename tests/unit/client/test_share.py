"""client/share.py: the pure plan (which files to share) and its executor against a real store folder,
with the link operations of each OS injected."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from scrollcase.client.share import FileFacts, ShareStep, execute_share, plan_share, share_tree, shareable_files
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.filedigests import BoxFile, digest_tree
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, PrefixFile, RelocationInfo
from scrollcase.io.cache import SHARED_FILES_CACHE
from scrollcase.io.links import LinkOps
from tests.support.releases import box_json_for, make_manifest

A, B, C = "a" * 64, "b" * 64, "c" * 64


def facts(mode: int = 0o644, size: int = 10, device: int = 1) -> FileFacts:
    return FileFacts(mode, size, device)


def test_the_plan_adopts_what_the_store_lacks_first_and_links_what_it_holds_with_the_same_mode() -> None:
    files = [("lib/a.so", A, 10), ("lib/b.so", B, 10), ("lib/copy-of-a.so", A, 10), ("bin/c", C, 10)]
    tree = {"lib/a.so": facts(), "lib/b.so": facts(), "lib/copy-of-a.so": facts(), "bin/c": facts(0o755)}
    store = {B: facts(), C: facts(0o644)}  # c is stored with another mode: a hard link would change it

    plan = plan_share(files, tree, store, store_device=1)

    assert plan == [
        ShareStep("lib/a.so", A, "adopt", 10),
        ShareStep("lib/b.so", B, "link", 10),
        ShareStep("lib/copy-of-a.so", A, "link", 10),  # a second copy inside the box: linked to the first
    ]


def test_the_plan_leaves_files_of_another_size_another_device_or_missing() -> None:
    files = [("x", A, 10), ("y", B, 10), ("z", C, 10)]
    tree = {"x": facts(size=11), "y": facts(device=2)}
    assert plan_share(files, tree, {A: facts(), B: facts()}, store_device=1) == []


TOOL = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path="bin/tool", mode="text")])


def test_relocated_and_empty_files_are_never_shareable() -> None:
    listed = [
        BoxFile(path="bin/tool", size=9, sha256=A),
        BoxFile(path="e", size=0, sha256=B),
        BoxFile(path="x", size=3, sha256=C),
    ]
    box = box_json_for(make_manifest(cuda=None, size=0, sha256="0" * 64)).model_copy(
        update={"relocation": TOOL, "files": listed}
    )
    assert shareable_files(box) == [("x", C, 3)]


def _tree(root: Path, data: bytes = b"shared runtime bytes", relocated: bytes = b"#!/old/prefix\n") -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "lib" / "runtime.so").write_bytes(data)
    (root / "lib" / "empty").write_bytes(b"")
    (root / "bin" / "tool").write_bytes(relocated)
    draft = make_manifest(cuda=None, size=0, sha256="0" * 64)
    digests = digest_tree(root)
    box = box_json_for(draft).model_copy(
        update={
            "relocation": RelocationInfo(
                placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path="bin/tool", mode="text")]
            ),
            "files": list(digests.files),
        }
    )
    (root / "box.json").write_bytes(dump_box_json(box))
    return root


def test_two_trees_share_their_identical_file_and_keep_relocated_and_empty_ones(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one, two = _tree(tmp_path / "one"), _tree(tmp_path / "two")

    first = share_tree(one, one, cache_dir=cache, platform="win32")  # NTFS: hard links only
    second = share_tree(two, two, cache_dir=cache, platform="win32")

    assert (first.adopted, first.linked) == (1, 0) and (second.adopted, second.linked) == (0, 1)
    assert second.methods == {"hardlink": 1} and second.linked_bytes == len(b"shared runtime bytes")
    assert (one / "lib" / "runtime.so").samefile(two / "lib" / "runtime.so")
    assert not (one / "bin" / "tool").samefile(two / "bin" / "tool")
    assert not (one / "lib" / "empty").samefile(two / "lib" / "empty")
    store = SHARED_FILES_CACHE.folder(cache)
    assert sorted(pin.dest for pin in SHARED_FILES_CACHE.pins(store)) == sorted([str(one), str(two)])
    assert not [p for p in (two / "lib").iterdir() if p.name.startswith(".")]  # no temp left behind


def test_a_store_entry_changed_since_it_was_stored_is_not_spread(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one = _tree(tmp_path / "one")
    share_tree(one, one, cache_dir=cache)
    with (one / "lib" / "runtime.so").open("r+b") as edited:  # edited in place: the store's copy too
        edited.write(b"EVIL")
    two = _tree(tmp_path / "two")

    shared = share_tree(two, two, cache_dir=cache)

    assert (shared.linked, shared.refused) == (0, 1)
    assert (two / "lib" / "runtime.so").read_bytes() == b"shared runtime bytes"


def test_a_file_that_is_not_what_box_json_says_never_enters_the_store(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one = _tree(tmp_path / "one")
    (one / "lib" / "runtime.so").write_bytes(b"shared runtime BYTES")  # same size, other bytes

    shared = share_tree(one, one, cache_dir=cache)

    assert (shared.adopted, shared.refused) == (0, 1)
    assert SHARED_FILES_CACHE.entries(SHARED_FILES_CACHE.folder(cache)) == []


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_a_clone_keeps_the_files_own_mode_and_is_its_own_file(tmp_path: Path) -> None:
    """macOS: clonefile() makes a new file (APFS); played here by a copy, as the clone is, byte for byte."""
    cache = tmp_path / "cache"
    clone = LinkOps(clone=lambda s, t: shutil.copyfile(s, t))
    one, two = _tree(tmp_path / "one"), _tree(tmp_path / "two")
    share_tree(one, one, cache_dir=cache, platform="darwin", ops=clone)
    (two / "lib" / "runtime.so").chmod(0o600)
    assert share_tree(two, two, cache_dir=cache, platform="darwin", ops=clone).linked == 0  # another mode
    (two / "lib" / "runtime.so").chmod(0o644)
    shared = share_tree(two, two, cache_dir=cache, platform="darwin", ops=clone)
    assert shared.methods == {"clone": 1}
    assert not (one / "lib" / "runtime.so").samefile(two / "lib" / "runtime.so")
    assert (two / "lib" / "runtime.so").stat().st_mode & 0o777 == 0o644


def test_the_executor_leaves_a_file_as_it_was_when_no_link_can_be_made(tmp_path: Path) -> None:
    tree, store = tmp_path / "tree", tmp_path / "store"
    tree.mkdir()
    (tree / "f").write_bytes(b"data")
    key = hashlib.sha256(b"data").hexdigest()
    entry = SHARED_FILES_CACHE.entry(store, key)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"data")

    def refuse(source: Path, target: Path) -> None:
        raise OSError(1, "not permitted")

    shared = execute_share([ShareStep("f", key, "link", 4)], tree, store, ("hardlink",), LinkOps(hardlink=refuse))

    assert shared.linked == 0 and (tree / "f").read_bytes() == b"data"
    assert not (tree / "f").samefile(entry)


def test_what_a_deleted_box_alone_used_is_removed_by_the_next_sharing_step(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one = _tree(tmp_path / "one", data=b"only box one has these bytes")
    share_tree(one, one, cache_dir=cache)
    store = SHARED_FILES_CACHE.folder(cache)
    (orphan,) = SHARED_FILES_CACHE.entries(store)
    shutil.rmtree(one)  # the box deleted: the store's copy is the last link, its pin names a folder gone
    two = _tree(tmp_path / "two")

    shared = share_tree(two, two, cache_dir=cache)

    assert shared.pruned == 1 and not orphan.exists()
    assert [pin.dest for pin in SHARED_FILES_CACHE.pins(store)] == [str(two)]
