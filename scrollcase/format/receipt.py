"""An installed box against what it was installed as: ``scrollcase verify --installed DEST``.

``box.json`` lists every file of the box with its size and sha256 *as packed*, and every symlink.  The
files that relocation rewrites (box.json's ``relocation.files``) no longer have those bytes once
installed, and their relocated bytes depend on DEST; so unpacking writes a receipt,
``box.installed.json``, beside box.json: DEST, box.json's own digest, and the digest of each relocated
file *after* relocation, and the mode of every file and folder as unpacked (box.json, inside the archive,
records none, and what the unpack made depends on the archive's executable bits and the umask): the most
common file mode and folder mode, and each entry with another one (the executables).  Verifying
compares every other file with box.json and the relocated ones with the receipt, every mode with the
receipt's, and DEST with the receipt's ``dest`` (a box moved with ``mv`` still names its old folder in its
relocated files), so what it reports is exactly what changed since install — the "repair" list a host app
offers.  (Re-applying the relocation rule instead would need each file's placeholder form, which is only
in the archive.)  The receipt is written inside the temp folder before the one rename that makes DEST,
so it is part of the installed tree from its first moment; it is the one file box.json does not list.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from scrollcase.errors import IntegrityError, UsageError, describe_path
from scrollcase.format import relocate
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.filedigests import BoxFile, BoxLink, TreeDigests, digest_files, digest_tree
from scrollcase.format.layout import BOX_JSON
from scrollcase.io.cache import SHARED_FILES_CACHE
from scrollcase.io.documents import (
    MAX_BOX_JSON_BYTES,
    MAX_DOCUMENT_BYTES,
    canonical_json,
    parse_json_model,
    read_document,
)
from scrollcase.io.files import ReadErrors, user_cache_dir, write_atomic

RECEIPT = "box.installed.json"
DEFAULT_DIR_MODE = 0o755  # a box without folders still states one
Mode = Annotated[str, Field(pattern=r"^[0-7]{4}$")]  # permission bits as 4 octal digits: "0755", "4755"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstalledModes(_Model):
    """The permission bits of every file and folder below DEST as unpacked (symlinks have none of their own)."""

    file: Mode  # every regular file not in ``other``: the most common file mode (a tie: the lower)
    dir: Mode  # every folder not in ``other``: the most common folder mode (none: 0755)
    other: dict[str, Mode] = Field(default_factory=dict)  # path -> mode, for each entry with another one


class InstallReceipt(_Model):
    schemaVersion: Literal[1] = 1
    dest: str  # the path relocation wrote into the files (DEST's absolute path at install)
    boxJson: BoxFile
    relocated: list[BoxFile]  # relocation's files, as relocated for ``dest``
    modes: InstalledModes | None = None  # absent: written by an older scrollcase or host, modes not checked


class FileChange(_Model):
    path: str
    change: Literal["added", "removed", "changed", "mode"]
    expected: str | None = None  # sha256 (a file), "-> target" (a symlink) or a mode; None when added
    found: str | None = None  # likewise; None when removed
    # A changed file that is one stored copy hard-linked into several boxes (client/share.py): every
    # installed box (DEST) that shares it, this one included; the change is theirs too.
    sharedWith: tuple[str, ...] | None = None


@dataclass(frozen=True)
class InstalledReport:
    dest: Path
    box: BoxJson
    checked: int  # files and links compared
    changes: tuple[FileChange, ...]
    installed_at: str = ""  # the receipt's dest: where relocation pointed the box's files
    moved: bool = False  # DEST is not the folder the box was installed in (its files name ``installed_at``)
    modes_checked: bool = True  # False: the receipt records no modes (an older scrollcase wrote it)

    @property
    def passed(self) -> bool:
        return not self.changes and not self.moved

    def to_json(self) -> dict[str, object]:
        return {
            "dest": str(self.dest),
            "boxId": self.box.boxId,
            "version": self.box.version,
            "targetId": self.box.targetId,
            "passed": self.passed,
            "checked": self.checked,
            "changes": [c.model_dump(mode="json", exclude_none=True) for c in self.changes],
            "installedAt": self.installed_at,
            "moved": self.moved,
            "modesChecked": self.modes_checked,
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
    modes = installed_modes(*tree_modes(tmp))
    receipt = InstallReceipt(dest=dest, boxJson=box_file, relocated=list(digest_files(tmp, rewritten)), modes=modes)
    write_atomic(tmp / RECEIPT, canonical_json(receipt.model_dump(mode="json")))


def tree_modes(root: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(files, folders): the permission bits of every regular file and folder below ``root`` by relative
    POSIX path, symlinks not followed; ``root`` itself (the temp folder, then DEST) and the receipt left out."""
    files: dict[str, int] = {}
    dirs: dict[str, int] = {}
    for folder, subdirs, names in os.walk(root):
        base = Path(folder).relative_to(root)
        for name in [*subdirs, *names]:
            st = os.lstat(Path(folder, name))
            rel = (base / name).as_posix()
            if stat.S_ISDIR(st.st_mode):
                dirs[rel] = stat.S_IMODE(st.st_mode)
            elif stat.S_ISREG(st.st_mode) and rel != RECEIPT:
                files[rel] = stat.S_IMODE(st.st_mode)
    return files, dirs


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


def known_paths(expected: dict[str, str]) -> set[str]:
    """The paths an install had: every file and link box.json or the receipt names, and each folder above one."""
    known = set(expected)
    for path in expected:
        parts = path.split("/")
        known.update("/".join(parts[:n]) for n in range(1, len(parts)))
    return known


def _most_common(modes: Iterable[int], default: int) -> int:
    counts = Counter(modes)
    return min(counts, key=lambda mode: (-counts[mode], mode)) if counts else default


def _octal(mode: int) -> str:
    return f"{mode:04o}"


def installed_modes(files: dict[str, int], dirs: dict[str, int]) -> InstalledModes:
    """The receipt's ``modes``: the most common file and folder modes, and every entry with another."""
    file_mode, dir_mode = _most_common(files.values(), 0o644), _most_common(dirs.values(), DEFAULT_DIR_MODE)
    other = {p: m for p, m in files.items() if m != file_mode} | {p: m for p, m in dirs.items() if m != dir_mode}
    return InstalledModes(
        file=_octal(file_mode), dir=_octal(dir_mode), other={p: _octal(m) for p, m in sorted(other.items())}
    )


def mode_changes(
    modes: InstalledModes, files: dict[str, int], dirs: dict[str, int], known: set[str]
) -> tuple[FileChange, ...]:
    """Each file or folder there at install (``known``: box.json's paths, and the folders holding them)
    whose mode is not the one it was unpacked with: an executable bit added or removed, a setuid, setgid or
    sticky bit, a write bit for others...  An entry added since install is reported as added already."""
    changes: list[FileChange] = []
    for found, default in ((files, modes.file), (dirs, modes.dir)):
        for path, mode in found.items():
            want = modes.other.get(path, default)
            if _octal(mode) != want and (path in known or path in modes.other):
                changes.append(FileChange(path=path, change="mode", expected=want, found=_octal(mode)))
    return tuple(changes)


# ---------------------------------------------------------------- verifying (I/O)


def verify_installed(dest: Path, cache_dir: Path | None = None) -> InstalledReport:
    """Hash the installed box at ``dest`` and compare it, modes included, with its box.json and install
    receipt, and ``dest`` with the folder it was installed in; a changed file shared with other boxes
    through the user cache's store (``cache_dir``) names them all."""
    if not dest.is_dir():
        raise UsageError(f"{describe_path(dest)} is not a folder", fix="pass the DEST the box was installed into")
    box = parse_box_json(_read(dest / BOX_JSON, MAX_BOX_JSON_BYTES), file=BOX_JSON)
    if not box.files:
        raise IntegrityError(
            f"{describe_path(dest / BOX_JSON)} records no file digests (built by an older scrollcase)",
            fix="rebuild the box with this scrollcase version and reinstall it",
        )
    receipt = parse_json_model(
        _read(dest / RECEIPT, MAX_DOCUMENT_BYTES),
        InstallReceipt,
        file=RECEIPT,
        error=IntegrityError,
        invalid="{file} is not a scrollcase install receipt",
        json_fix="reinstall the box",
        fix="reinstall the box",
    )
    expected = expected_digests(box, receipt)
    changes = tree_changes(expected, digest_tree(dest, skip=[RECEIPT]))
    if receipt.modes is not None:
        changes += mode_changes(receipt.modes, *tree_modes(dest), known_paths(expected))
    changes = shared_changes(dest, changes, expected, SHARED_FILES_CACHE.folder(cache_dir or user_cache_dir()))
    ordered = tuple(sorted(changes, key=lambda c: (c.path, c.change)))
    moved = not _same_folder(receipt.dest, dest)
    return InstalledReport(dest, box, len(expected), ordered, receipt.dest, moved, receipt.modes is not None)


def shared_changes(
    dest: Path, changes: Iterable[FileChange], expected: dict[str, str], store: Path
) -> tuple[FileChange, ...]:
    """``changes``, each changed file (its bytes or its mode) that is still the store's copy of what it
    should hold naming every installed box whose pin lists that copy: the boxes the change reached."""
    changes = tuple(changes)
    touched = [c for c in changes if c.change in ("changed", "mode") and c.path in expected]
    pins = SHARED_FILES_CACHE.pins(store) if touched else []
    marked = []
    for change in changes:
        digest = expected.get(change.path, "")
        if change in touched and _same_file(dest / change.path, SHARED_FILES_CACHE.entry(store, digest)):
            users = sorted(pin.dest for pin in pins if digest in pin.frames)
            change = change.model_copy(update={"sharedWith": tuple(users)})
        marked.append(change)
    return tuple(marked)


def _same_file(path: Path, entry: Path) -> bool:
    try:
        return path.samefile(entry) and not entry.is_symlink()
    except OSError:
        return False


def _same_folder(recorded: str, dest: Path) -> bool:
    """Whether the folder the receipt names is ``dest`` (a symlink to it counts: the files' paths still work)."""
    try:
        return Path(recorded).samefile(dest)
    except OSError:  # the recorded folder is gone (the box was moved) or unreadable
        return False


_READ = ReadErrors(
    IntegrityError,
    missing="cannot read {path}: {strerror}",
    missing_fix="install the box with `scrollcase install` or `scrollcase unpack` (they write box.json's receipt)",
    fix="install the box with `scrollcase install` or `scrollcase unpack` (they write box.json's receipt)",
)


def _read(path: Path, limit: int) -> bytes:
    return read_document(path, _READ, max_bytes=limit, shown=describe_path(path) or str(path))
