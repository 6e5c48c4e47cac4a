"""An installed box against what it was installed as: ``scrollcase verify --installed DEST``.

``box.json`` lists every file of the box with its size and sha256 *as packed*, and every symlink.  The
files that relocation rewrites (box.json's ``relocation.files``) no longer have those bytes once
installed, and their relocated bytes depend on DEST; so unpacking writes a receipt,
``box.installed.json``, beside box.json: DEST, box.json's own digest, and the digest of each relocated
file *after* relocation.  Verifying compares every other file with box.json and the relocated ones with
the receipt, so what it reports is exactly what changed since install — the "repair" list a host app
offers.  (Re-applying the relocation rule instead would need each file's placeholder form, which is only
in the archive.)  The receipt is written inside the temp folder before the one rename that makes DEST,
so it is part of the installed tree from its first moment; it is the one file box.json does not list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from scrollcase.errors import IntegrityError, UsageError, describe_path
from scrollcase.format import relocate
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.filedigests import BoxFile, BoxLink, TreeDigests, digest_files, digest_tree
from scrollcase.format.layout import BOX_JSON
from scrollcase.io.documents import canonical_json, parse_json_model
from scrollcase.io.files import write_atomic

RECEIPT = "box.installed.json"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstallReceipt(_Model):
    schemaVersion: Literal[1] = 1
    dest: str  # the path relocation wrote into the files (DEST's absolute path at install)
    boxJson: BoxFile
    relocated: list[BoxFile]  # relocation's files, as relocated for ``dest``


class FileChange(_Model):
    path: str
    change: Literal["added", "removed", "changed"]
    expected: str | None = None  # sha256 (a file) or "-> target" (a symlink); None when added
    found: str | None = None  # likewise; None when removed


@dataclass(frozen=True)
class InstalledReport:
    dest: Path
    box: BoxJson
    checked: int  # files and links compared
    changes: tuple[FileChange, ...]

    @property
    def passed(self) -> bool:
        return not self.changes

    def to_json(self) -> dict[str, object]:
        return {
            "dest": str(self.dest),
            "boxId": self.box.boxId,
            "version": self.box.version,
            "targetId": self.box.targetId,
            "passed": self.passed,
            "checked": self.checked,
            "changes": [c.model_dump(mode="json", exclude_none=True) for c in self.changes],
        }


# ---------------------------------------------------------------- at install (inside unpack's temp folder)


def write_receipt(tmp: Path, dest: str) -> None:
    """Record box.json's digest and the relocated files' digests for ``dest`` (no box.json: no receipt)."""
    box_json = tmp / BOX_JSON
    if not box_json.is_file() or box_json.is_symlink():
        return
    info = relocate.read_relocation(box_json.read_bytes())
    rewritten = [item.path for item in info.files] if info is not None else []
    (box_file,) = digest_files(tmp, [BOX_JSON])
    receipt = InstallReceipt(dest=dest, boxJson=box_file, relocated=list(digest_files(tmp, rewritten)))
    write_atomic(tmp / RECEIPT, canonical_json(receipt.model_dump(mode="json")))


# ---------------------------------------------------------------- comparing (pure)


def expected_digests(box: BoxJson, receipt: InstallReceipt) -> dict[str, str]:
    """path -> the sha256 (files) or ``-> target`` (symlinks) an unchanged install has."""
    expected = {f.path: f.sha256 for f in box.files}
    expected.update({f.path: f.sha256 for f in receipt.relocated})
    expected[BOX_JSON] = receipt.boxJson.sha256
    expected.update({link.path: _link_value(link) for link in box.links})
    return expected


def tree_changes(expected: dict[str, str], found: TreeDigests) -> tuple[FileChange, ...]:
    """Every path added, removed or changed, sorted by path."""
    actual = {f.path: f.sha256 for f in found.files} | {link.path: _link_value(link) for link in found.links}
    changes = [
        FileChange(path=path, change="removed", expected=want) for path, want in expected.items() if path not in actual
    ]
    for path, have in actual.items():
        want = expected.get(path)
        if want is None:
            changes.append(FileChange(path=path, change="added", found=have))
        elif want != have:
            changes.append(FileChange(path=path, change="changed", expected=want, found=have))
    return tuple(sorted(changes, key=lambda c: c.path))


def _link_value(link: BoxLink) -> str:
    return f"-> {link.target}"


# ---------------------------------------------------------------- verifying (I/O)


def verify_installed(dest: Path) -> InstalledReport:
    """Hash the installed box at ``dest`` and compare it with its box.json and install receipt."""
    if not dest.is_dir():
        raise UsageError(f"{describe_path(dest)} is not a folder", fix="pass the DEST the box was installed into")
    box = parse_box_json(_read(dest / BOX_JSON), file=BOX_JSON)
    if not box.files:
        raise IntegrityError(
            f"{describe_path(dest / BOX_JSON)} records no file digests (built by an older scrollcase)",
            fix="rebuild the box with this scrollcase version and reinstall it",
        )
    receipt = parse_json_model(
        _read(dest / RECEIPT),
        InstallReceipt,
        file=RECEIPT,
        error=IntegrityError,
        invalid="{file} is not a scrollcase install receipt",
        json_fix="reinstall the box",
        fix="reinstall the box",
    )
    expected = expected_digests(box, receipt)
    found = digest_tree(dest, skip=[RECEIPT])
    return InstalledReport(dest, box, len(expected), tree_changes(expected, found))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise IntegrityError(
            f"cannot read {describe_path(path)}: {exc.strerror}",
            fix="install the box with `scrollcase install` or `scrollcase unpack` (they write box.json's receipt)",
        ) from None
