"""Installed boxes share identical files: each file stored once per machine, every box linking to it.

Boxes for one machine mostly carry the same runtime (the same Python, the same CUDA torch wheels).  After
an install's or upgrade's checks passed, every regular file of the new tree that box.json lists, that
relocation does not rewrite and whose bytes another box already installed is replaced by a link to the one
copy in the user cache's ``files/`` store (:data:`~scrollcase.io.cache.SHARED_FILES_CACHE`, keyed by
sha256): a copy-on-write clone where the file system has them, else a hard link
(:func:`~scrollcase.io.links.link_chain`).  A file the store does not hold yet is added to it, by the same
link, so the next box finds it.

What stays safe:

- relocated files (box.json ``relocation.files``) are never shared: their bytes depend on DEST;
- every file is checked against the sha256 box.json records before it enters the store, and every store
  entry against it again before a box links to it: a store entry changed since (a shared file edited in a
  box) is not spread further;
- a hard link shares the file's mode too, so a file is linked only to an entry with its own mode (the
  mode the unpack made, which the install receipt records);
- every file is replaced by its link through a temp beside it and one rename: a box's file is whole at
  every moment, and a sharing step that fails or is interrupted leaves unshared files, never missing ones;
- the store keeps which installed folders use each entry (pins, as the frame cache does); ``cache prune``,
  and each sharing step before it plans, removes only the entries no existing box pins or hard-links.

:func:`plan_share` is pure (which files to share, from what the tree, box.json and the store hold);
:func:`execute_share` does it; :func:`share_tree` is both, for a tree and the DEST it is installed as.
"""

from __future__ import annotations

import contextlib
import stat
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from scrollcase.errors import ScrollcaseError
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.filedigests import HASH_THREADS
from scrollcase.format.layout import BOX_JSON
from scrollcase.io.cache import SHARED_FILES_CACHE
from scrollcase.io.digest import sha256_file
from scrollcase.io.files import remove_stale_temps, temp_path, user_cache_dir
from scrollcase.io.links import SYSTEM_OPS, LinkOps, Method, link_chain, place


@dataclass(frozen=True)
class FileFacts:
    """What ``lstat`` says of a file: in the tree, or a store entry."""

    mode: int  # permission bits
    size: int
    device: int


@dataclass(frozen=True)
class ShareStep:
    """``adopt``: the tree's file becomes the store's entry for ``sha256``; ``link``: the tree's file is
    replaced by a link to that entry."""

    path: str
    sha256: str
    kind: Literal["adopt", "link"]
    size: int


@dataclass(frozen=True)
class Shared:
    """What one sharing step did: files linked to the store, their bytes (no longer stored twice), files
    added to the store, files left alone because the check failed, and the method of each link."""

    linked: int = 0
    linked_bytes: int = 0
    adopted: int = 0
    refused: int = 0
    methods: Mapping[str, int] = field(default_factory=dict)
    pruned: int = 0  # store entries no installed box used any more, removed first

    def summary(self) -> str:
        how = ", ".join(f"{n} by {m}" for m, n in self.methods.items()) or "none"
        return (
            f"shared with the boxes installed before: {self.linked} file(s), {self.linked_bytes} bytes not stored"
            f" again; {self.adopted} file(s) stored for the next ones ({how})"
            + (f"; {self.refused} left unshared (not the bytes box.json records)" if self.refused else "")
        )

    def to_json(self) -> dict[str, object]:
        return {
            "linked": self.linked,
            "linkedBytes": self.linked_bytes,
            "adopted": self.adopted,
            "refused": self.refused,
            "methods": dict(self.methods),
            "pruned": self.pruned,
        }


NOTHING_SHARED = Shared()


def shareable_files(box: BoxJson) -> list[tuple[str, str, int]]:
    """(path, sha256, size) of each non-empty file box.json lists that relocation leaves as packed."""
    relocated = {item.path for item in box.relocation.files}
    return [(f.path, f.sha256, f.size) for f in box.files if f.path not in relocated and f.size > 0]


def plan_share(
    files: Sequence[tuple[str, str, int]],
    tree: Mapping[str, FileFacts],
    store: Mapping[str, FileFacts],
    store_device: int,
) -> list[ShareStep]:
    """Which files to share (pure): each listed file whose tree copy is a regular file of the listed size,
    on the store's device; linked where the store holds an entry of that size and mode, adopted where it
    holds none (a second copy inside the same tree is linked to the first).  Adoptions come first."""
    adopted: dict[str, int] = {}  # sha256 -> the mode of the file adopted for it in this plan
    adopts: list[ShareStep] = []
    links: list[ShareStep] = []
    for path, sha256, size in files:
        have = tree.get(path)
        if have is None or have.size != size or have.device != store_device:
            continue
        entry = store.get(sha256)
        if entry is not None:
            if entry.mode == have.mode and entry.size == size:
                links.append(ShareStep(path, sha256, "link", size))
        elif sha256 in adopted:
            if adopted[sha256] == have.mode:
                links.append(ShareStep(path, sha256, "link", size))
        else:
            adopted[sha256] = have.mode
            adopts.append(ShareStep(path, sha256, "adopt", size))
    return adopts + links


def _facts(path: Path) -> FileFacts | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return FileFacts(stat.S_IMODE(st.st_mode), st.st_size, st.st_dev) if stat.S_ISREG(st.st_mode) else None


def gather_facts(
    tree: Path, store: Path, files: Sequence[tuple[str, str, int]]
) -> tuple[dict[str, FileFacts], dict[str, FileFacts]]:
    """``lstat`` of each listed file in ``tree`` and of each store entry they name (regular files only)."""
    found = {path: facts for path, _, _ in files if (facts := _facts(tree / path)) is not None}
    entries = {
        sha256: facts
        for sha256 in {sha256 for _, sha256, _ in files}
        if (facts := _facts(SHARED_FILES_CACHE.entry(store, sha256))) is not None
    }
    return found, entries


def _digest(path: Path) -> tuple[str, int] | None:
    try:
        return sha256_file(path)
    except OSError:
        return None


class _Executor:
    """Carries out a plan: every file checked against its sha256 before it is shared, every replacement by
    temp then rename; an OSError on one file leaves that file as it was."""

    def __init__(self, tree: Path, store: Path, chain: Sequence[Method], ops: LinkOps) -> None:
        self.tree, self.store, self.ops = tree, store, ops
        self.chain = [m for m in chain if m != "copy"]  # a copy shares nothing: the file stays as unpacked
        self.checked: dict[str, bool] = {}  # store entries this run checked (or made)
        self.digests: dict[Path, tuple[str, int] | None] = {}
        self.linked, self.linked_bytes, self.adopted, self.refused = 0, 0, 0, 0
        self.methods: dict[str, int] = {}

    def adopt(self, step: ShareStep) -> None:
        source = self.tree / step.path
        if self.digests.get(source) != (step.sha256, step.size):
            self.refused += 1  # not the bytes box.json records: verify --installed reports it
            return
        entry = SHARED_FILES_CACHE.entry(self.store, step.sha256)
        entry.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_path(entry)
        try:
            method = place(source, temp, self.chain, self.ops)
            if method != "hardlink":
                temp.chmod(stat.S_IMODE(source.lstat().st_mode))
            temp.replace(entry)
        finally:
            temp.unlink(missing_ok=True)
        self.checked[step.sha256] = True
        self.adopted += 1
        self._count(method)

    def link(self, step: ShareStep) -> None:
        entry = SHARED_FILES_CACHE.entry(self.store, step.sha256)
        if step.sha256 not in self.checked:
            self.checked[step.sha256] = self.digests.get(entry) == (step.sha256, step.size)
        if not self.checked[step.sha256]:
            self.refused += 1  # the entry changed since it was stored: not spread to another box
            return
        target = self.tree / step.path
        mode = stat.S_IMODE(target.lstat().st_mode)
        temp = temp_path(target)
        try:
            method = place(entry, temp, self.chain, self.ops)
            if method != "hardlink":
                temp.chmod(mode)
            temp.replace(target)
        finally:
            temp.unlink(missing_ok=True)
        self.linked += 1
        self.linked_bytes += step.size
        self._count(method)

    def hash_first(self, plan: Sequence[ShareStep]) -> None:
        """The sha256 of every file the plan reads (the tree's files to adopt, the store entries to link
        to), in parallel threads: a file that cannot be read has none."""
        adopted = {step.sha256 for step in plan if step.kind == "adopt"}
        paths = [self.tree / step.path for step in plan if step.kind == "adopt"]
        paths += [
            SHARED_FILES_CACHE.entry(self.store, sha256)
            for sha256 in sorted({step.sha256 for step in plan if step.kind == "link"} - adopted)
        ]
        with ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="scrollcase-share") as pool:
            self.digests = dict(zip(paths, pool.map(_digest, paths), strict=True))

    def _count(self, method: str) -> None:
        self.methods[method] = self.methods.get(method, 0) + 1

    def result(self) -> Shared:
        return Shared(self.linked, self.linked_bytes, self.adopted, self.refused, dict(sorted(self.methods.items())))


def execute_share(
    plan: Sequence[ShareStep], tree: Path, store: Path, chain: Sequence[Method], ops: LinkOps = SYSTEM_OPS
) -> Shared:
    """Carry out ``plan`` in ``tree`` against the store folder ``store`` (a file that cannot be shared, an
    OSError, stays as unpacked)."""
    run = _Executor(tree, store, chain, ops)
    run.hash_first(plan)
    for step in plan:
        with contextlib.suppress(OSError):
            run.adopt(step) if step.kind == "adopt" else run.link(step)
    return run.result()


def share_tree(
    tree: Path,
    dest: Path,
    *,
    cache_dir: Path | None = None,
    platform: str = sys.platform,
    ops: LinkOps = SYSTEM_OPS,
) -> Shared:
    """Share the files of the box unpacked in ``tree`` (which is, or becomes, ``dest``) with the boxes
    installed before it, through the store in the user cache (``cache_dir``), pinned for ``dest``.
    Sharing only saves disk: a store that cannot be made or pinned shares nothing, and no error is raised."""
    store = SHARED_FILES_CACHE.folder(cache_dir or user_cache_dir())
    try:
        box = parse_box_json((tree / BOX_JSON).read_bytes())
        files = shareable_files(box)
        store.mkdir(parents=True, exist_ok=True)
        # What deleted boxes and replaced releases left, which no pin or link holds, goes first.
        pruned = len(SHARED_FILES_CACHE.prune(store, 0.0))
        tree_facts, entries = gather_facts(tree, store, files)
        plan = plan_share(files, tree_facts, entries, store.stat().st_dev)
        SHARED_FILES_CACHE.pin(store, dest, [step.sha256 for step in plan])  # before any entry exists
    except (OSError, ScrollcaseError):
        return NOTHING_SHARED
    for step in plan:
        if step.kind == "adopt":
            with contextlib.suppress(OSError):
                remove_stale_temps(SHARED_FILES_CACHE.entry(store, step.sha256))
    return replace(execute_share(plan, tree, store, link_chain(platform), ops), pruned=pruned)
