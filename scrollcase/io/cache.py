"""The one content-cache type: every cache scrollcase keeps between runs is a :class:`ContentCache`.

A cache is a folder of entries named by a key (a sha256): ``entry`` says where one lives, ``put`` makes
one (temp, then rename: :func:`~scrollcase.io.files.cache_entry`, so an entry is whole or absent),
``touch`` marks one used, ``prune`` removes what its :class:`Keep` rule lets go, ``usage`` measures the
folder and ``clean`` removes it whole.  What differs between caches is data on the instance: the folder
name, the entries' layout, and the rule for what stays.  The user cache's caches are listed once, in
:data:`CACHES` (what ``scrollcase cache`` shows, prunes and cleans, with no code of its own per cache);
the rooms that fill them (wheels, the packer, the bytecode stage, the installer) use these instances.

A folder is removed by renaming it aside first: a build or install that starts meanwhile finds it
absent (and fills a new one), never half-deleted.  A prune only ever costs disk: what cannot be listed
or removed stays.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from scrollcase.io.digest import sha256_bytes
from scrollcase.io.files import (
    DIGEST_NAME,
    cache_entry,
    digest_entries,
    move_aside,
    remove_older_than,
    remove_stale_temps,
    temp_path,
    touch_unlinked,
    write_atomic,
)

WHEELS = "wheels"
UNPACKED = "unpacked"
METADATA = "metadata"
PACK_FRAMES = "packframes"
PYC = "pyc"
FRAMES = "frames"
DOWNLOADS = "downloads"
ASSETS = "assets"
FILES = "files"
PINS = "pins"  # below a pinned cache: which entries the folders that use them are made of
REMOVING = ".removing"  # the suffix of a folder renamed aside to be deleted
DAY = 86400.0
FRAME_GRACE_SECONDS = 3600.0  # a frame this young may be about to be pinned by an install running beside

# How entries lie below the folder: a folder per key (``<sha256>/``), a file per key below the key's
# first two characters (``<key[:2]>/<key>``), or a file per key (``<sha256>``).
Layout = Literal["folders", "fanout", "files"]


@dataclass(frozen=True)
class Keep:
    """A cache's rule for what a prune keeps.

    ``by="age"``: the entries modified within the prune's days (an entry ``touched`` when used is kept
    while it is used; one never touched, while it is young).  ``by="pins"``: the entries named by a pin
    whose folder still exists, and any younger than ``grace_seconds`` (another run may be about to pin
    it); the prune's days do not apply.
    """

    by: Literal["age", "pins"]
    touched_on_use: bool = True
    grace_seconds: float = 0.0
    linked: bool = False  # by pins: also keep every entry a box still hard-links (link count > 1)


@dataclass(frozen=True)
class Freed:
    """What a prune removed: how many entries, and their bytes."""

    entries: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, removed: Sequence[tuple[Path, int]]) -> Freed:
        return cls(len(removed), sum(size for _, size in removed))


@dataclass(frozen=True)
class Usage:
    """What a folder holds: its files, their bytes (a hard-linked file once), and of those bytes the ones
    also linked from outside the folder (from a box), which removing the folder does not free."""

    section: ContentCache
    files: int
    bytes: int
    shared_bytes: int

    @property
    def freeable_bytes(self) -> int:
        return self.bytes - self.shared_bytes


class Pin(BaseModel):
    """The entries the folder ``dest`` is made of (what a prune by pins keeps)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    version: Literal[1] = 1
    dest: str
    frames: tuple[str, ...]


@dataclass(frozen=True)
class ContentCache:
    """One cache: its folder below the cache root, who fills it, what it holds, its layout and its rule.
    Methods take the cache's folder (``folder(root)``): the root differs per run and per test."""

    name: str
    used_by: Literal["build", "install"]
    holds: str
    layout: Layout
    keep: Keep | None = None  # None: never pruned, only cleaned
    suffix: str = ""  # after the key in an entry's name (``files`` layout)

    def folder(self, root: Path) -> Path:
        return root / self.name

    def entry(self, folder: Path, key: str) -> Path:
        return folder / key[:2] / key if self.layout == "fanout" else folder / f"{key}{self.suffix}"

    def entries(self, folder: Path) -> list[Path]:
        """The entries below ``folder``, sorted (temps, indexes and other names left out)."""
        if self.layout == "fanout":
            return digest_entries(folder)
        try:
            return sorted(p for p in folder.iterdir() if self._is_key(p.name) and self._is_entry(p))
        except OSError:
            return []

    def _is_key(self, name: str) -> bool:
        return name.endswith(self.suffix) and DIGEST_NAME.fullmatch(name.removesuffix(self.suffix)) is not None

    def _is_entry(self, path: Path) -> bool:
        return path.is_dir() if self.layout == "folders" else path.is_file()

    @contextlib.contextmanager
    def put(self, folder: Path, key: str) -> Iterator[BinaryIO]:
        """A temp file that becomes the entry for ``key`` only if the block ends without an error."""
        with cache_entry(self.entry(folder, key)) as out:
            yield out

    def touch(self, entry: Path) -> None:
        """Mark an entry used now (its mtime), so an age prune keeps it; a read-only cache stays as it is.
        A link in the cache is not followed: what it names is not the cache's to change."""
        if self.keep is None or self.keep.touched_on_use:
            with contextlib.suppress(OSError):
                touch_unlinked(entry)

    def prune(self, folder: Path, max_age_days: float, now: float | None = None) -> list[tuple[Path, int]]:
        """Remove what this cache's rule lets go (``max_age_days`` where the rule is an age); (path, bytes)
        of each entry removed.  A cache without a rule keeps everything."""
        now = time.time() if now is None else now
        if self.keep is None:
            return []
        if self.keep.by == "pins":
            try:
                kept = self.pinned_entries(folder) | (self.linked_entries(folder) if self.keep.linked else set())
            except OSError:
                return []
            return self._remove_older(folder, now - self.keep.grace_seconds, kept)
        return self._remove_older(folder, now - max_age_days * DAY, ())

    def _remove_older(self, folder: Path, cutoff: float, keep: Container[str]) -> list[tuple[Path, int]]:
        if self.layout != "folders":
            return remove_older_than(self.entries(folder), cutoff, keep)
        removed = []
        for entry in self.entries(folder):
            with contextlib.suppress(OSError):
                if entry.name not in keep and entry.stat().st_mtime < cutoff:
                    _, size, _ = measure(entry)
                    remove_tree(entry)
                    removed.append((entry, size))
        return removed

    def usage(self, folder: Path) -> Usage:
        """What ``folder`` holds (absent or unreadable: nothing)."""
        return Usage(self, *measure(folder))

    def clean(self, folder: Path) -> Usage:
        """Remove ``folder`` whole; what it held.  OSError when it cannot be renamed aside."""
        held = self.usage(folder)
        remove_tree(folder)
        return held

    # --- pins: what a prune by pins keeps ------------------------------------------------------------

    def pin(self, folder: Path, dest: Path, keys: Iterable[str]) -> None:
        """Record that the folder ``dest`` is made of the entries ``keys`` (OSError when it cannot)."""
        pin = Pin(dest=str(_absolute(dest)), frames=tuple(sorted(set(keys))))
        write_atomic(self.pin_path(folder, dest), pin.model_dump_json().encode())

    def pinned(self, folder: Path, dest: Path) -> tuple[str, ...]:
        """The entries pinned for ``dest`` (none when it has no pin, or one that cannot be read)."""
        pin = _read_pin(self.pin_path(folder, dest))
        return pin.frames if pin is not None else ()

    def pinned_entries(self, folder: Path) -> set[str]:
        """The entries named by pins whose folder still exists (the pins of folders that are gone removed)."""
        keep: set[str] = set()
        for path in sorted((folder / PINS).glob("*.json")):
            pin = _read_pin(path)
            if pin is None or not Path(pin.dest).is_dir():
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
                continue
            keep.update(pin.frames)
        return keep

    def linked_entries(self, folder: Path) -> set[str]:
        """The entries some other file is hard-linked to (an installed box that shares them)."""
        linked = set()
        for entry in self.entries(folder):
            with contextlib.suppress(OSError):
                if entry.lstat().st_nlink > 1:
                    linked.add(entry.name.removesuffix(self.suffix))
        return linked

    def pins(self, folder: Path) -> list[Pin]:
        """Every readable pin whose folder still exists."""
        found = (_read_pin(path) for path in sorted((folder / PINS).glob("*.json")))
        return [pin for pin in found if pin is not None and Path(pin.dest).is_dir()]

    def pin_path(self, folder: Path, dest: Path) -> Path:
        return folder / PINS / f"{sha256_bytes(os.fsencode(_absolute(dest)))[:32]}.json"


_BY_AGE = Keep("age")
WHEEL_CACHE = ContentCache(
    WHEELS, "build", "wheels downloaded for locks and builds, by sha256 (checked on every use)", "folders", _BY_AGE
)
UNPACKED_CACHE = ContentCache(
    UNPACKED, "build", "wheels unpacked once and hard-linked into boxes (a build's install stage)", "folders", _BY_AGE
)
METADATA_CACHE = ContentCache(METADATA, "build", "PyPI wheel metadata `lock` fetched", "files", suffix=".METADATA")
PACK_FRAME_CACHE = ContentCache(
    PACK_FRAMES, "build", "compressed frames a rebuild reuses; pruned after 30 days unused", "fanout", _BY_AGE
)
# Not touched when used: that would change the mtime of the box's own link, which the pack cache's inode
# key holds; so a module is compiled again at most once per age.
PYC_CACHE = ContentCache(
    PYC, "build", "compiled bytecode a rebuild links; pruned 30 days after it was made", "fanout", Keep("age", False)
)
FRAME_CACHE = ContentCache(
    FRAMES,
    "install",
    "frames of the installed releases, for `upgrade`; pruned to what installs use",
    "fanout",
    Keep("pins", grace_seconds=FRAME_GRACE_SECONDS),
)
DOWNLOAD_CACHE = ContentCache(
    DOWNLOADS,
    "install",
    "archives being downloaded (resumed by the next run) or kept (--keep-download)",
    "files",
    suffix=".tar.zst",
)
# The files installed boxes share (client/share.py): hard-linked or cloned into every box that holds
# them.  Never touched (a touch would change the boxes' own files' times); kept while a pin or a link
# from a box names them.  No grace: a sharing step pins its entries before it makes them, and an entry
# it made is hard-linked from its box (or, a clone, not needed by it) the moment it exists.
SHARED_FILES_CACHE = ContentCache(
    FILES,
    "install",
    "files installed boxes share, by sha256 (hard links or clones); pruned to what installed boxes use",
    "fanout",
    Keep("pins", touched_on_use=False, linked=True),
)
# Below a build's --state-dir, not the user cache (the CI build cache keeps it): not in CACHES.
ASSET_CACHE = ContentCache(ASSETS, "build", "model assets downloaded by sha256", "files")

CACHES: tuple[ContentCache, ...] = (
    WHEEL_CACHE,
    UNPACKED_CACHE,
    METADATA_CACHE,
    PACK_FRAME_CACHE,
    PYC_CACHE,
    FRAME_CACHE,
    DOWNLOAD_CACHE,
    SHARED_FILES_CACHE,
)
BY_NAME = {cache.name: cache for cache in CACHES}


def usage(root: Path, caches: Sequence[ContentCache] = CACHES) -> list[Usage]:
    """How much each cache below ``root`` holds (a folder that is absent or unreadable: nothing)."""
    return [c.usage(c.folder(root)) for c in caches]


def clean(root: Path, caches: Iterable[ContentCache]) -> list[Usage]:
    """Remove each cache's folder below ``root``; what each held before.  OSError when a folder cannot
    be renamed aside (nothing of it removed); once aside, what cannot be deleted is left there and
    removed by the next clean."""
    return [c.clean(c.folder(root)) for c in caches]


def prune(root: Path, caches: Iterable[ContentCache], max_age_days: float) -> dict[str, Freed]:
    """Each cache's own prune below ``root`` (``max_age_days`` where its rule is an age); the caches
    without a rule are left out."""
    now = time.time()
    return {c.name: Freed.of(c.prune(c.folder(root), max_age_days, now)) for c in caches if c.keep is not None}


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


def remove_tree(folder: Path) -> None:
    """Rename ``folder`` aside, then delete it (leftovers of killed removals first); absent: nothing."""
    remove_stale_temps(folder, REMOVING)
    aside = temp_path(folder, REMOVING)
    if move_aside(folder, aside):
        shutil.rmtree(aside, ignore_errors=True)


def _absolute(dest: Path) -> Path:
    """The folder a pin names: absolute, links not followed (a DEST that is a link is pinned as the link)."""
    return Path(os.path.abspath(dest))  # noqa: PTH100 - lexical, as unpack names DEST (absolute_as_given)


def _read_pin(path: Path) -> Pin | None:
    """A pin, or None when it is missing or unreadable (it then protects nothing: only disk is at stake)."""
    try:
        return Pin.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None
