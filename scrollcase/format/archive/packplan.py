"""The packer's plan: the box tree walked once and cut into units, each measured just before it is packed.

The walk only lists; the units (:mod:`~scrollcase.format.archive.units`) reorder members across
directories, using every conda-meta record and wheel RECORD to tell which package a file belongs to.
A unit's files are measured (``lstat``) when :mod:`~scrollcase.format.archive.pack` reaches it, and a
member that stopped being a regular file is refused before anything of it is read.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from scrollcase.errors import BuildError
from scrollcase.format.archive.tar import BLOCK, header_size
from scrollcase.format.archive.treewalk import Entry, PathTree, TreeFiles, iter_entries, make_tree
from scrollcase.format.archive.units import CONDA, WHEEL, Member, Unit, conda_claims, group_units, record_claims


@dataclass
class Plan:
    """The walked tree: every member with its unit (files not measured yet: see :func:`measure_unit`)."""

    units: list[Unit]
    links: list[Entry]


def plan_pack(root: Path) -> Plan:
    """Walk ``root`` and cut it into units (:mod:`scrollcase.format.archive.units`).

    The walk only lists (where the platform has them, by directory descriptors: :func:`make_tree`); the
    units reorder members across directories, so a file is found again later by its member name
    (:class:`TreeFiles`).  Files are measured unit by unit as they are packed (:func:`measure_unit`),
    while the units before them are compressed, or hashed and copied from the pack cache: the walk before
    the first frame is half as long."""
    tree = make_tree(root)
    members: list[Member] = []
    links: list[Entry] = []
    with _cyclic_gc_paused(), contextlib.closing(iter_entries(root, tree)) as walk:
        for entry in walk:
            members.append(Member(entry.name, entry.kind, 0, entry.link))
            if entry.kind == "symlink":
                links.append(entry)
        claims = list(_claims(root, members))
        units = group_units(members, claims, _asset_dir(root))
    return Plan(units, links)


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The walk makes ~30,000 objects a box and no reference cycles, so the collections its allocations set off
    find nothing; each would only traverse the whole heap of the process (a build's: up to 0.18 s a rebuild)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def measure_unit(unit: Unit, files: TreeFiles, tree: PathTree) -> tuple[Unit, dict[str, os.stat_result]]:
    """The unit with each file's size from ``lstat``, and those ``lstat`` results (the pack cache's keys).

    A member that is no longer a regular file (swapped for a symlink, a FIFO, a folder) is refused here,
    before anything of it is read."""
    stats: dict[str, os.stat_result] = {}
    members: list[Member] = []
    lstat = files.lstat
    for member in unit.members:
        if member.kind != "file":
            members.append(member)
            continue
        name = member.name
        try:
            stats[name] = st = lstat(name)
        except OSError as exc:
            raise tree.read_error(name, exc) from None
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(tree, name)
        members.append(Member(name, "file", st.st_size))
    return Unit(unit.name, tuple(members)), stats


def not_regular(tree: PathTree, name: str) -> BuildError:
    return BuildError(
        f"cannot pack {tree.shown(name)}: it stopped being a regular file while the tree was being packed",
        fix="do not modify the box tree while packing it",
    )


def _claims(root: Path, members: Iterable[Member]) -> Iterable[tuple[str, list[str]]]:
    """(unit, members) from every conda-meta record, then every wheel RECORD, in name order."""
    files = [m.name for m in members if m.kind == "file"]
    for name in files:
        folder, _, base = name.rpartition("/")
        if folder.endswith("conda-meta") and base.endswith(".json") and folder.count("/") == name.count("/") - 1:
            env_dir = folder.removesuffix("conda-meta").rstrip("/")
            yield CONDA + base.removesuffix(".json"), conda_claims(name, env_dir, _read(root, name))
    for name in files:
        if name.endswith(".dist-info/RECORD"):
            yield WHEEL + name.split("/")[-2].removesuffix(".dist-info"), record_claims(name, _read(root, name))


def _read(root: Path, name: str) -> bytes:
    try:
        return (root / name).read_bytes()
    except OSError:
        return b""  # unreadable here: packing reports it with the member's name


def _asset_dir(root: Path) -> str:
    """box.json's ``modelCacheSubdir``, when the tree has a box.json that says it."""
    try:
        value = json.loads((root / "box.json").read_bytes()).get("modelCacheSubdir", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return value.strip("/") if isinstance(value, str) else ""


def unit_tar_size(unit: Unit) -> int:
    """The tar bytes of a unit, from its planned members (each header measured by header_size)."""
    total = 0
    for m in unit.members:
        total += header_size(m.name, kind=m.kind, size=m.size, link=m.link)
        total += m.size + (-m.size % BLOCK)
    return total
