"""The packer's frame cache: a rebuild reuses the compressed frame of every unit whose content is unchanged.

A unit's key is the sha256 of what its tar bytes are made of — the packer's format version, the zstd
level, and per member its name, kind, normalised mode, size, link target and the sha256 of its content —
so two units with different content cannot share a key, and a cached frame is exactly the frame a fresh
pack would write (the packer's output depends only on the unit's content: :mod:`scrollcase.format.archive.pack`).

Hashing every file of a 5 GB box on each build would cost a good part of a pack, so a file's content
digest is remembered by its inode: ``(device, inode, size, mtime_ns)`` of a file with more than one
hard link.  That is what a box tree mostly is — wheels are hard-linked from the unpacked-wheel cache
(:mod:`scrollcase.wheels.cache`) and conda files from rattler's package cache, and those caches never
change a file in place — so their digests are looked up, not computed.  Files with one link (generated
bytecode, prefix-rewritten conda files, box.json) are new on every build and are hashed: cheap, they are
small.  ``<cache>/packframes/<key[:2]>/<key>`` holds the frames; ``inodes.json`` the remembered digests.

The cache is bounded, so a build machine that packs for years does not fill its disk: a frame a pack
reuses is touched, and after each pack the frames no pack has used for FRAME_MAX_AGE_DAYS are removed;
``inodes.json`` keeps at most MAX_INODES digests, the ones this pack looked up last (the least recently
seen go first).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from scrollcase.format.archive.units import Unit
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER
from scrollcase.io.cache import PACK_FRAME_CACHE
from scrollcase.io.digest import sha256_file, sha256_text
from scrollcase.io.files import write_atomic

FORMAT = "scrollcase-frame-1"  # bump when the packer's bytes for the same content change
_INODES = "inodes.json"
_FRAMES = "frames.json"  # key -> sha256 of the cached frame (a reused frame is not hashed again)
# content sha256s known not to embed the box prefix placeholder (box.json's scan skips them); named by
# the placeholder, so another placeholder starts another list
_CLEAN = f"noprefix-{sha256_text(BOX_PREFIX_PLACEHOLDER)[:12]}.json"
MAX_INODES = 1_000_000  # ~100 MB of JSON at most: 40 boxes of 25,000 files
FRAME_MAX_AGE_DAYS = 30


@dataclass
class PackCache:
    root: Path
    inodes: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    _dirty: bool = False
    _seen: dict[str, None] = field(default_factory=dict)  # the inode keys this pack looked up, in order
    clean: set[str] = field(default_factory=set)  # content sha256s without the placeholder
    _clean_now: set[str] = field(default_factory=set)  # those of this build

    @classmethod
    def open(cls, root: Path) -> PackCache:
        return cls(root, _load(root / _INODES), _load(root / _FRAMES), clean=set(_load_list(root / _CLEAN)))

    def remember_clean(self, digests: Iterable[str]) -> None:
        """Content that does not embed the placeholder: a later build's scan need not read it again."""
        self._clean_now.update(digests)

    def remember(self, key: str, frame_sha256: str) -> None:
        if self.digests.get(key) != frame_sha256:
            self.digests[key] = frame_sha256
            self._dirty = True

    def path_for(self, key: str) -> Path:
        return PACK_FRAME_CACHE.entry(self.root, key)

    def file_digest(self, path: str, st: os.stat_result) -> str:
        """The sha256 of a file's content, remembered by inode for files with more than one link."""
        memo = _inode(st) if st.st_nlink > 1 else None
        if memo is not None:
            self._seen[memo] = None
            if memo in self.inodes:
                return self.inodes[memo]
        digest, _ = sha256_file(path)  # str paths from the walk
        if memo is not None:
            self.inodes[memo] = digest
            self._dirty = True
        return digest

    def unit_key(
        self, unit: Unit, level: int, path_of: Callable[[str], str], stats: Mapping[str, os.stat_result]
    ) -> str:
        lines = [f"{FORMAT}\0{level}\0"]
        for m in unit.members:
            digest = ""
            mode = 0
            if m.kind == "file":
                st = stats[m.name]
                digest = self.file_digest(path_of(m.name), st)
                mode = 0o755 if st.st_mode & 0o111 else 0o644
            lines.append(f"{m.name}\0{m.kind}\0{mode}\0{m.size}\0{m.link}\0{digest}\n")
        return sha256_text("".join(lines))

    def get(self, key: str, size: int | None = None) -> Path | None:
        """The cached frame for ``key``, touched (see :meth:`prune`); None when there is none."""
        path = self.path_for(key)
        try:
            ok = path.stat().st_size > 0 and (size is None or path.stat().st_size == size)
        except OSError:
            return None
        if ok:
            PACK_FRAME_CACHE.touch(path)  # a read-only cache is still read
        return path if ok else None

    def put(self, key: str, frame: bytes) -> None:
        try:
            with PACK_FRAME_CACHE.put(self.root, key) as out:
                out.write(frame)
        except OSError:
            return  # a cache that cannot be written only costs the next build time

    @contextlib.contextmanager
    def writing(self, key: str) -> Iterator[BinaryIO | None]:
        """A file to copy a big frame into as it is written; it becomes the entry for ``key`` only if the
        block ends without an error (None, and nothing cached, when the cache cannot be written)."""
        with contextlib.ExitStack() as stack:
            try:
                out: BinaryIO | None = stack.enter_context(PACK_FRAME_CACHE.put(self.root, key))
            except OSError:
                out = None
            yield out
        if out is not None:
            self.misses += 1

    def save(self) -> None:
        """Write the indexes back (when anything changed), after pruning what is past the bounds."""
        self.prune()
        self._trim_inodes()
        self._save_clean()
        if self._dirty:
            try:
                write_atomic(self.root / _INODES, json.dumps(self.inodes, separators=(",", ":")).encode())
                write_atomic(self.root / _FRAMES, json.dumps(self.digests, separators=(",", ":")).encode())
            except OSError:
                return
            self._dirty = False

    def prune(self, now: float | None = None, max_age_days: float = FRAME_MAX_AGE_DAYS) -> list[tuple[Path, int]]:
        """Remove the frames no pack has used (touched) for ``max_age_days``; (path, bytes) of each removed.
        The index forgets them, and the frames a ``scrollcase cache prune`` removed since it was saved."""
        removed = PACK_FRAME_CACHE.prune(self.root, max_age_days, now)
        present = {entry.name for entry in PACK_FRAME_CACHE.entries(self.root)}
        if not present.issuperset(self.digests):
            self.digests = {key: sha for key, sha in self.digests.items() if key in present}
            self._dirty = True
        return removed

    def _save_clean(self) -> None:
        """This build's clean digests first, then earlier ones, at most MAX_INODES in all."""
        if not self._clean_now or self._clean_now <= self.clean:
            return
        kept = self._clean_now | set(sorted(self.clean - self._clean_now)[: max(0, MAX_INODES - len(self._clean_now))])
        with contextlib.suppress(OSError):
            write_atomic(self.root / _CLEAN, json.dumps(sorted(kept)).encode())
            self.clean = kept

    def _trim_inodes(self) -> None:
        """At most MAX_INODES remembered digests: the ones this pack looked up last, then the newest others."""
        if len(self.inodes) <= MAX_INODES:
            return
        seen = [k for k in self._seen if k in self.inodes]
        others = [k for k in self.inodes if k not in self._seen]
        order = (others + seen)[-MAX_INODES:]
        self.inodes = {k: self.inodes[k] for k in order}
        self._dirty = True


def _inode(st: os.stat_result) -> str:
    """What a file's remembered digest is keyed by: its device, inode, size and mtime."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _load_list(path: Path) -> list[str]:
    try:
        loaded = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    return [d for d in loaded if isinstance(d, str)] if isinstance(loaded, list) else []


def _load(path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}
