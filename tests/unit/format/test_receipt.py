from __future__ import annotations

from pathlib import Path

from scrollcase.format.filedigests import BoxFile, BoxLink, TreeDigests
from scrollcase.format.receipt import (
    RECEIPT,
    FileChange,
    InstalledModes,
    InstallReceipt,
    expected_digests,
    installed_modes,
    known_paths,
    mode_changes,
    shared_changes,
    tree_changes,
    tree_modes,
)
from scrollcase.io.cache import SHARED_FILES_CACHE
from tests.support.releases import box_json_for, make_manifest

A, B, C, D = "a" * 64, "b" * 64, "c" * 64, "d" * 64


def _box() -> object:
    box = box_json_for(make_manifest(size=1, sha256=A))
    return box.model_copy(
        update={
            "files": [BoxFile(path="venv/bin/tool", size=1, sha256=A), BoxFile(path="payload", size=1, sha256=B)],
            "links": [BoxLink(path="venv/lib/link", target="../bin/tool")],
        }
    )


def test_relocated_files_and_box_json_are_expected_as_the_receipt_records() -> None:
    receipt = InstallReceipt(
        dest="/apps/box",
        boxJson=BoxFile(path="box.json", size=9, sha256=D),
        relocated=[BoxFile(path="venv/bin/tool", size=2, sha256=C)],
    )
    expected = expected_digests(_box(), receipt)  # type: ignore[arg-type]
    assert expected == {"venv/bin/tool": C, "payload": B, "box.json": D, "venv/lib/link": "-> ../bin/tool"}


def test_changes_are_added_removed_and_changed_sorted_by_path() -> None:
    expected = {"payload": B, "venv/bin/tool": C, "venv/lib/link": "-> ../bin/tool", "box.json": D}
    found = TreeDigests(
        files=(
            BoxFile(path="box.json", size=9, sha256=D),
            BoxFile(path="payload", size=1, sha256=A),
            BoxFile(path="venv/evil.pth", size=1, sha256=A),
        ),
        links=(BoxLink(path="venv/lib/link", target="/etc/passwd"),),
    )
    changes = [(c.path, c.change, c.expected, c.found) for c in tree_changes(expected, found)]
    assert changes == [
        ("payload", "changed", B, A),
        ("venv/bin/tool", "removed", C, None),
        ("venv/evil.pth", "added", None, A),
        ("venv/lib/link", "changed", "-> ../bin/tool", "-> /etc/passwd"),
    ]


def test_an_unchanged_tree_has_no_changes() -> None:
    expected = {"payload": B, "box.json": D}
    found = TreeDigests(
        files=(BoxFile(path="box.json", size=9, sha256=D), BoxFile(path="payload", size=1, sha256=B)), links=()
    )
    assert tree_changes(expected, found) == ()


# --- modes (box.json records none: the receipt does) ----------------------------------------------------------


def test_the_receipt_records_the_common_modes_and_each_other_one() -> None:
    files = {"box.json": 0o644, "payload": 0o644, "venv/bin/tool": 0o755}
    modes = installed_modes(files, {"venv": 0o755, "venv/bin": 0o755, "venv/tmp": 0o1777})
    assert modes == InstalledModes(file="0644", dir="0755", other={"venv/bin/tool": "0755", "venv/tmp": "1777"})
    tie = installed_modes({"a": 0o600, "b": 0o644}, {})
    assert (tie.file, tie.dir, tie.other) == ("0600", "0755", {"b": "0644"})  # the lower wins a tie; no folders


def test_mode_changes_report_exec_bits_and_setuid_setgid_sticky() -> None:
    modes = InstalledModes(file="0644", dir="0755", other={"venv/bin/tool": "0755"})
    files = {"venv/bin/tool": 0o4755, "payload": 0o755, "box.json": 0o644, "venv/new": 0o6755}
    dirs = {"venv": 0o1755, "venv/bin": 0o755}
    known = known_paths({"venv/bin/tool": C, "payload": B, "box.json": D})
    assert known == {"venv", "venv/bin", "venv/bin/tool", "payload", "box.json"}
    changes = sorted((c.path, c.change, c.expected, c.found) for c in mode_changes(modes, files, dirs, known))
    assert changes == [  # venv/new was not there at install: it is reported as added, not here
        ("payload", "mode", "0644", "0755"),
        ("venv", "mode", "0755", "1755"),
        ("venv/bin/tool", "mode", "0755", "4755"),
    ]
    untouched = {"venv/bin/tool": 0o755, "payload": 0o644, "box.json": 0o644}
    assert mode_changes(modes, untouched, {"venv": 0o755}, known) == ()


def test_tree_modes_reads_files_and_folders_not_links_nor_the_receipt(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir(mode=0o755)
    (tmp_path / "bin" / "tool").write_text("x")
    (tmp_path / "bin" / "tool").chmod(0o2755)
    (tmp_path / RECEIPT).write_text("{}")
    (tmp_path / "link").symlink_to("bin/tool")
    files, dirs = tree_modes(tmp_path)
    assert files == {"bin/tool": 0o2755} and dirs == {"bin": (tmp_path / "bin").stat().st_mode & 0o7777}


def test_a_changed_file_that_is_the_stores_shared_copy_names_every_box_pinning_it(tmp_path: Path) -> None:
    store, one, two, other = tmp_path / "files", tmp_path / "one", tmp_path / "two", tmp_path / "other"
    for box in (one, two, other):
        box.mkdir()
    key, unshared_key = "a" * 64, "b" * 64
    entry = SHARED_FILES_CACHE.entry(store, key)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"edited in place")
    (one / "lib.so").hardlink_to(entry)
    (one / "own.so").write_bytes(b"its own copy")
    SHARED_FILES_CACHE.pin(store, one, [key])
    SHARED_FILES_CACHE.pin(store, two, [key, unshared_key])
    SHARED_FILES_CACHE.pin(store, other, [unshared_key])
    changes = [
        FileChange(path="lib.so", change="changed", expected=key, found="c" * 64),
        FileChange(path="own.so", change="changed", expected=unshared_key, found="d" * 64),
        FileChange(path="new.so", change="added", found="e" * 64),
    ]

    marked = shared_changes(one, changes, {"lib.so": key, "own.so": unshared_key}, store)

    assert [c.sharedWith for c in marked] == [(str(one), str(two)), None, None]
