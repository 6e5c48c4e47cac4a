"""The user cache's folders: their names, what each holds, the disk they take, and removing them whole.

Every room that keeps something between runs names its folder here (one source for the names that
``scrollcase cache`` shows and cleans); each room keeps its own rule for what stays and for how long.
Measuring and removing are the same for every folder, so they live here too.  A folder is removed by
renaming it aside first: a build or install that starts meanwhile finds it absent (and fills a new
one), never half-deleted.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scrollcase.io.files import DIGEST_NAME, remove_stale_temps, temp_path

WHEELS = "wheels"
UNPACKED = "unpacked"
METADATA = "metadata"
PACK_FRAMES = "packframes"
PYC = "pyc"
FRAMES = "frames"
DOWNLOADS = "downloads"
REMOVING = ".removing"  # the suffix of a folder renamed aside to be deleted


@dataclass(frozen=True)
class Section:
    name: str  # the folder below the user cache
    used_by: Literal["build", "install"]
    holds: str


SECTIONS: tuple[Section, ...] = (
    Section(WHEELS, "build", "wheels downloaded for locks and builds, by sha256 (checked on every use)"),
    Section(UNPACKED, "build", "wheels unpacked once and hard-linked into boxes (a build's install stage)"),
    Section(METADATA, "build", "PyPI wheel metadata `lock` fetched"),
    Section(PACK_FRAMES, "build", "compressed frames a rebuild reuses; pruned after 30 days unused"),
    Section(PYC, "build", "compiled bytecode a rebuild links; pruned 30 days after it was made"),
    Section(FRAMES, "install", "frames of the installed releases, for `upgrade`; pruned to what installs use"),
    Section(DOWNLOADS, "install", "archives being downloaded (resumed by the next run) or kept (--keep-download)"),
)
BY_NAME = {section.name: section for section in SECTIONS}


@dataclass(frozen=True)
class Usage:
    """What a folder holds: its files, their bytes (a hard-linked file once), and of those bytes the ones
    also linked from outside the folder (from a box), which removing the folder does not free."""

    section: Section
    files: int
    bytes: int
    shared_bytes: int

    @property
    def freeable_bytes(self) -> int:
        return self.bytes - self.shared_bytes


@dataclass(frozen=True)
class Freed:
    """What a prune removed: how many entries, and their bytes."""

    entries: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, removed: Sequence[tuple[Path, int]]) -> Freed:
        return cls(len(removed), sum(size for _, size in removed))


def usage(root: Path, sections: Sequence[Section] = SECTIONS) -> list[Usage]:
    """How much each folder below ``root`` holds (a folder that is absent or unreadable: nothing)."""
    return [_usage(root / s.name, s) for s in sections]


def _usage(folder: Path, section: Section) -> Usage:
    return Usage(section, *measure(folder))


def measure(folder: Path) -> tuple[int, int, int]:
    """(files, bytes, bytes also linked from outside) below ``folder``; a hard-linked file counts once."""
    links: dict[tuple[int, int], int] = {}  # (device, inode) -> links seen inside the folder
    sizes: dict[tuple[int, int], os.stat_result] = {}
    for st in _file_stats(folder):
        inode = (st.st_dev, st.st_ino)
        links[inode] = links.get(inode, 0) + 1
        sizes[inode] = st
    total = sum(st.st_size for st in sizes.values())
    shared = sum(st.st_size for inode, st in sizes.items() if st.st_nlink > links[inode])
    return len(sizes), total, shared


def _file_stats(folder: Path) -> Iterator[os.stat_result]:
    """``lstat`` of every regular file below ``folder`` (what cannot be listed or read is left out)."""
    pending = [str(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield entry.stat(follow_symlinks=False)
            except OSError:
                continue


def clean(root: Path, sections: Iterable[Section]) -> list[Usage]:
    """Remove each section's folder below ``root``; what each held before.  OSError when a folder cannot
    be renamed aside (nothing of it removed); once aside, what cannot be deleted is left there and
    removed by the next clean."""
    removed = []
    for s in sections:
        folder = root / s.name
        held = _usage(folder, s)
        remove_tree(folder)
        removed.append(held)
    return removed


def remove_unused(folder: Path, cutoff: float) -> list[tuple[Path, int]]:
    """Remove the entries ``<folder>/<sha256>/`` last used (touched: :func:`touch`) before ``cutoff``;
    (path, bytes) of each removed.  What cannot be listed or removed stays."""
    removed = []
    for entry in _digest_folders(folder):
        with suppress(OSError):
            if entry.stat().st_mtime < cutoff:
                _, size, _ = measure(entry)
                remove_tree(entry)
                removed.append((entry, size))
    return removed


def _digest_folders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if DIGEST_NAME.fullmatch(p.name) and p.is_dir())
    except OSError:
        return []


def touch(path: Path) -> None:
    """Mark a cache entry used now (its mtime), so an age prune keeps it; a read-only cache stays as it is."""
    with suppress(OSError):
        os.utime(path)


def remove_tree(folder: Path) -> None:
    """Rename ``folder`` aside, then delete it (leftovers of killed removals first); absent: nothing."""
    remove_stale_temps(folder, REMOVING)
    aside = temp_path(folder, REMOVING)
    try:
        folder.rename(aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)
