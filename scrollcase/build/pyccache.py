"""The build's bytecode cache: a module whose source, box path and interpreter are unchanged gets the
``.pyc`` an earlier build compiled, hard-linked, instead of being compiled again.

A rebuild of the 64-package torch box compiled 10,931 modules in 12.4 s, every build, and its pack then
hashed every one of those new files again (one link each, so the pack cache cannot remember them by
inode).  The key is the sha256 of the interpreter's identity (its ``sys.version``, magic number and
cache tag), the module's box-relative path (the file name its code objects carry) and the sha256 of the
source: the bytecode compiled from them is the same bytes on every build (:mod:`scrollcase.build.bytecode`),
and an ``unchecked-hash`` ``.pyc`` is never checked against its source again, so nothing it depends on
may stay out of the key.  ``<cache>/pyc/<key[:2]>/<key>`` holds one ``.pyc``; an entry is made by a link
to a temp name and a rename (:func:`~scrollcase.io.files.cache_entry_from`) and never changed in place
(``compileall`` too replaces a ``.pyc`` by a rename).  Linked into the box, a ``.pyc`` has two links, so
the pack cache remembers its digest.

Bounded: after each build the entries made more than MAX_AGE_DAYS ago are removed (an entry is not
touched when it is used: that would change the mtime of the box's own link, which the pack cache's
inode key holds), so a module is compiled again at most once a month.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scrollcase.format import paths
from scrollcase.io import proc
from scrollcase.io.cache import PYC_CACHE
from scrollcase.io.digest import sha256_file, sha256_text
from scrollcase.io.files import cache_entry_from, link_or_copy

MAX_AGE_DAYS = 30
_IDENTITY = (
    "import sys, importlib.util as u; "
    "print(sys.version.replace(chr(10), ' ')); print(u.MAGIC_NUMBER.hex()); print(sys.implementation.cache_tag)"
)


@dataclass(frozen=True)
class PycCache:
    root: Path
    identity: str  # the interpreter's version, magic number and cache tag
    cache_tag: str

    def key(self, rel: str, source_sha256: str) -> str:
        return sha256_text(f"{self.identity}\0{rel}\0{source_sha256}")

    def entry(self, key: str) -> Path:
        return PYC_CACHE.entry(self.root, key)

    def pyc_for(self, rel: str) -> str:
        """Where the interpreter looks for the bytecode of source ``rel`` (importlib's cache_from_source)."""
        folder, _, name = rel.rpartition("/")  # strings, not pathlib: 11,000 calls per build
        base, dot, rest = name.rpartition(".")
        pyc = f"__pycache__/{base or rest}{dot}{self.cache_tag}.pyc"
        return f"{folder}/{pyc}" if folder else pyc


def open_pyc_cache(root: Path, box_root: Path, python: PurePosixPath) -> PycCache | None:
    """The cache in ``root`` for the box's interpreter; None when the interpreter cannot say who it is."""
    run = proc.run_python(box_root.absolute() / python, ["-S", "-c", _IDENTITY], cwd=box_root, timeout=60)
    lines = run.stdout.splitlines()
    if not run.ok or len(lines) != 3 or not all(lines):
        return None
    return PycCache(root, "\0".join(lines), lines[2])


def link_cached(
    box_root: Path, cache: PycCache, sources: Iterable[str], sha256s: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """Link the cached ``.pyc`` of every source that has one; (the sources still to compile, their keys).
    ``sha256s``: the sources' digests where the caller has them (read once for another reason)."""
    keys = {
        rel: cache.key(rel, sha256s[rel] if sha256s and rel in sha256s else sha256_file(box_root / rel)[0])
        for rel in sources
    }
    base = f"{box_root}{os.sep}"
    targets = {rel: paths.native_path(base, cache.pyc_for(rel)) for rel in keys}  # strings: 11,000 of them
    _make_dirs({target.rpartition(os.sep)[0] for target in targets.values()})
    missing: list[str] = []
    for rel, key in keys.items():
        try:
            link_or_copy(cache.entry(key), targets[rel])
        except OSError:  # not cached (or not placeable): compiled as on a first build
            missing.append(rel)
    return missing, keys


def _make_dirs(folders: Iterable[str]) -> None:
    """Make the ``__pycache__`` folders, side by side (a ``mkdir`` costs ~0.15 ms here, 1,500 per torch box);
    one that cannot be made leaves its modules to be compiled."""

    def make(folder: str) -> None:
        with contextlib.suppress(OSError):
            os.mkdir(folder)  # noqa: PTH102 - a string path, as the link loop uses

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="scrollcase-pycdirs") as pool:
        list(pool.map(make, sorted(folders)))


def store_compiled(box_root: Path, cache: PycCache, keys: dict[str, str], compiled: Sequence[str]) -> int:
    """Put the ``.pyc`` of each compiled source into the cache; how many were stored.  A cache that cannot
    be written costs only the next build's compile time."""
    stored = 0
    for rel in compiled:
        with contextlib.suppress(OSError):
            cache_entry_from(box_root / cache.pyc_for(rel), cache.entry(keys[rel]))
            stored += 1
    return stored


def prune(root: Path, now: float | None = None, max_age_days: float = MAX_AGE_DAYS) -> list[tuple[Path, int]]:
    """Remove the entries below ``root`` made more than ``max_age_days`` ago; (path, bytes) of each removed
    (what cannot be listed or removed stays)."""
    return PYC_CACHE.prune(root, max_age_days, now)
