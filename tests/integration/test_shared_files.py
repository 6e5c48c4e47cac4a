"""Installed boxes share identical files (#33): two boxes with different boxIds and the same runtime,
published to a real directory store and installed with the library call; the second adds little to the
disk, both verify clean, a shared file changed in one is reported for both naming both, and `cache prune`
keeps what an installed box uses."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from scrollcase import cli
from scrollcase.client.install import install_box
from scrollcase.client.upgrade import upgrade_box
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.filedigests import digest_tree
from scrollcase.format.receipt import verify_installed
from scrollcase.format.release import dump_release
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files
from scrollcase.io import cache as usercache
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.framedbox import SITE, make_framed_box
from tests.support.releases import box_json_for, make_manifest

POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="st_blocks and hard link counts as POSIX has them")
SHARED = f"{SITE}/pkg1/data.bin"  # a runtime file both boxes hold


def publish_box(work: Path, store: Path, box_id: str, version: str = "1.0.0") -> None:
    """A demo-like box: the same runtime (python, four packages) as every other, a relocated script, and
    its own weights; published as `scrollcase build` and `publish` would."""
    draft = make_manifest(box_id=box_id, version=version, cuda=None, size=0, sha256="0" * 64)
    tree = make_framed_box(work / f"tree-{box_id}-{version}", version=version, payload=400_000)
    (tree / "model-cache" / "org" / "model" / "weights.bin").write_bytes(random.Random(box_id).randbytes(20_000))
    (tree / "venv" / "bin" / "tool").write_text(f"#!{BOX_PREFIX_PLACEHOLDER}/venv/bin/python\n")
    (tree / "box.json").unlink()
    digests = digest_tree(tree)
    relocation = RelocationInfo(
        placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(tree, BOX_PREFIX_PLACEHOLDER)
    )
    update = {"relocation": relocation, "files": list(digests.files), "links": list(digests.links)}
    (tree / "box.json").write_bytes(dump_box_json(box_json_for(draft).model_copy(update=update)))
    packed = pack_tree(tree, work / f"dist-{box_id}-{version}" / draft.archive.name, level=1)
    manifest = draft.model_copy(
        update={"archive": draft.archive.model_copy(update={"size": packed.size, "sha256": packed.sha256})}
    )
    packed.path.with_name("release.json").write_bytes(dump_release(manifest))
    publish(LocalStore(store), manifest, packed.path)


def blocks(tree: Path, seen: set[tuple[int, int]]) -> int:
    """512-byte blocks of the files below ``tree`` whose inode is not in ``seen`` (which it extends)."""
    total = 0
    for folder, _, names in os.walk(tree):
        for name in names:
            st = os.lstat(Path(folder, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks
    return total


@pytest.fixture
def two_boxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(cache))
    store = tmp_path / "store"
    for box_id in ("box-a", "box-b"):
        publish_box(tmp_path / "work", store, box_id)
    first = install_box(str(store), "box-a", tmp_path / "a")
    second = install_box(str(store), "box-b", tmp_path / "b")
    assert (first.shared.linked, second.shared.adopted) == (0, 1)  # b stores only its own weights
    assert second.shared.linked > 0 and second.to_json()["shared"] == second.shared.to_json()
    return tmp_path / "a", tmp_path / "b", cache


@POSIX_ONLY
def test_the_second_box_adds_at_most_a_tenth_of_its_tree_and_both_verify(two_boxes: tuple[Path, Path, Path]) -> None:
    a, b, cache = two_boxes
    seen: set[tuple[int, int]] = set()
    before = blocks(a, seen) + blocks(cache, seen)
    added = blocks(b, seen)
    whole = blocks(b, set())
    assert before > 0 and added <= whole // 10, (added, whole)
    assert (a / SHARED).samefile(b / SHARED)
    assert not (a / "venv" / "bin" / "tool").samefile(b / "venv" / "bin" / "tool")  # relocated: never shared
    assert (a / "venv" / "bin" / "tool").read_text() == f"#!{a.absolute()}/venv/bin/python\n"
    for dest in (a, b):
        report = verify_installed(dest)
        assert report.passed, report.changes


@POSIX_ONLY
def test_a_shared_file_changed_in_one_box_is_reported_for_both_naming_both(
    two_boxes: tuple[Path, Path, Path],
) -> None:
    a, b, _ = two_boxes
    with (a / SHARED).open("r+b") as edited:  # edited in place, as an editor or a pip install --force may
        edited.write(b"changed")
    for dest in (a, b):
        report = verify_installed(dest)
        (change,) = report.changes
        assert (change.path, change.change) == (SHARED, "changed")
        assert change.sharedWith == (str(a.absolute()), str(b.absolute()))
    (a / "new").write_bytes(b"replaced")
    (a / "new").replace(a / SHARED)  # saved anew (an editor's save, pip): only a's copy changes
    assert verify_installed(a).changes[0].sharedWith is None
    (b / f"{SITE}/pkg2/data.bin").chmod(0o600)  # a mode is the shared file's too
    for dest in (a, b):
        (change,) = [c for c in verify_installed(dest).changes if c.change == "mode"]
        assert change.path == f"{SITE}/pkg2/data.bin" and change.sharedWith == (str(a), str(b))


@POSIX_ONLY
def test_cache_prune_and_deleting_a_box_keep_what_another_box_uses(two_boxes: tuple[Path, Path, Path]) -> None:
    a, b, cache = two_boxes
    files = usercache.SHARED_FILES_CACHE
    held = files.entries(files.folder(cache))
    assert held, "the first install stores its files"
    usercache.prune(cache, usercache.CACHES, 0)
    assert files.entries(files.folder(cache)) == held
    for root, _, names in os.walk(a, topdown=False):  # the box deleted, as a user would
        for name in names:
            Path(root, name).unlink()
        Path(root).rmdir()
    usercache.prune(cache, usercache.CACHES, 0)
    assert (b / SHARED).is_file() and verify_installed(b).passed
    kept = files.entries(files.folder(cache))
    assert any(entry.samefile(b / SHARED) for entry in kept)  # b's files stay stored for the next box


@POSIX_ONLY
def test_no_share_keeps_every_file_of_the_box_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`install --no-share` for users who prefer isolation: nothing linked, nothing stored, nothing pinned."""
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    store = tmp_path / "store"
    for box_id in ("box-a", "box-b"):
        publish_box(tmp_path / "work", store, box_id)
    assert cli.main(["install", "--store", str(store), "--box", "box-a", str(tmp_path / "a")]) == 0
    assert cli.main(["install", "--no-share", "--store", str(store), "--box", "box-b", str(tmp_path / "b")]) == 0
    assert "files not shared (--no-share)" in capsys.readouterr().err
    assert not (tmp_path / "a" / SHARED).samefile(tmp_path / "b" / SHARED)
    assert os.stat(tmp_path / "b" / SHARED).st_nlink == 1
    files = usercache.SHARED_FILES_CACHE
    assert [pin.dest for pin in files.pins(files.folder(tmp_path / "cache"))] == [str(tmp_path / "a")]
    assert verify_installed(tmp_path / "b").passed


@POSIX_ONLY
def test_an_upgraded_box_shares_its_new_tree_before_the_swap(two_boxes: tuple[Path, Path, Path]) -> None:
    a, b, _ = two_boxes
    publish_box(a.parent / "work", a.parent / "store", "box-a", "1.0.1")
    upgraded = upgrade_box(str(a.parent / "store"), a)
    assert upgraded.upgraded and upgraded.shared.linked > 0 and upgraded.to_json()["shared"]["linked"] > 0
    assert (a / SHARED).samefile(b / SHARED)
    assert (a / f"{SITE}/pkg0/data.bin").read_bytes() != (b / f"{SITE}/pkg0/data.bin").read_bytes()  # its own
    assert verify_installed(a).passed and verify_installed(b).passed
