from __future__ import annotations

from scrollcase.format.filedigests import BoxFile, BoxLink, TreeDigests
from scrollcase.format.receipt import InstallReceipt, expected_digests, tree_changes
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
