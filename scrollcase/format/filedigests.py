"""The sha256 and size of every file of a box tree, and the target of every symlink in it.

Computed once at build, before packing, for ``box.json``'s ``files`` and ``links`` (the last link of the
digest chain: index → release manifest → archive → box.json → each file), and again by
``scrollcase verify --installed`` over an installed box.  A box holds tens of thousands of files and
gigabytes: the files are hashed by a pool of threads (sha256 releases the GIL while it hashes, and small
files are bound by the file system's latency more than by the CPU).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from scrollcase.io.digest import sha256_file
from scrollcase.recipe.model import Sha256

HASH_THREADS = min(8, (os.cpu_count() or 1) + 2)
KnownDigest = Callable[[str, os.stat_result], str]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BoxFile(_Model):
    """A regular file of the box, as packed: relative POSIX path, size and sha256 of its bytes."""

    path: str
    size: Annotated[int, Field(ge=0)]
    sha256: Sha256


class BoxLink(_Model):
    """A symlink of the box: relative POSIX path and the target it names (as written, relative)."""

    path: str
    target: str


@dataclass(frozen=True)
class TreeDigests:
    files: tuple[BoxFile, ...]
    links: tuple[BoxLink, ...]


def walk_tree(root: Path, skip: Iterable[str] = ()) -> tuple[list[str], list[BoxLink]]:
    """The regular files (relative POSIX paths) and the symlinks below ``root``, sorted; ``skip`` names
    root-relative files left out (box.json cannot list itself)."""
    skipped = set(skip)
    files: list[str] = []
    links: list[BoxLink] = []
    for folder, dirs, names in os.walk(root):
        base = Path(folder).relative_to(root)
        for name, is_file_entry in [*((d, False) for d in dirs), *((n, True) for n in names)]:
            full = Path(folder, name)
            rel = (base / name).as_posix()
            if full.is_symlink():  # os.walk does not descend into a symlinked folder: it is a link
                links.append(BoxLink(path=rel, target=full.readlink().as_posix()))
            elif is_file_entry and full.is_file() and rel not in skipped:
                files.append(rel)
    return sorted(files), sorted(links, key=lambda link: link.path)


def digest_tree(root: Path, skip: Iterable[str] = (), known: KnownDigest | None = None) -> TreeDigests:
    """Every regular file's size and sha256 (hashed in parallel) and every symlink below ``root``."""
    names, links = walk_tree(root, skip)
    return TreeDigests(digest_files(root, names, known), tuple(links))


def digest_files(root: Path, names: Iterable[str], known: KnownDigest | None = None) -> tuple[BoxFile, ...]:
    """Size and sha256 of each named file below ``root``, in the order given.  ``known``: what gives a
    file's sha256 from its path and ``lstat`` (the build's pack cache, which remembers the digests of
    hard-linked files by inode: a rebuild then hashes only the files it wrote anew)."""

    def one(rel: str) -> BoxFile:
        path = root.joinpath(*rel.split("/"))
        if known is None:
            sha, size = sha256_file(path)
        else:
            st = path.lstat()
            sha, size = known(str(path), st), st.st_size
        return BoxFile(path=rel, size=size, sha256=sha)

    with ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="scrollcase-digest") as pool:
        return tuple(pool.map(one, names))
