"""Deterministic, fast ``.tar.zst`` packing of a box tree: the packer over its three parts.

Determinism rules (the same content gives the same bytes, wherever it lies on disk):
entries sorted by name at every level; mtime 0; uid/gid 0; empty uname/gname; mode 0o755 for
directories and executables, 0o644 otherwise; symlinks kept as relative links; zstd at a pinned
level in multi-threaded mode (zstd's multi-threaded output does not depend on the worker count, so
``threads=1`` and ``threads=16`` give the same bytes — ``threads=0``, single-threaded mode, would not,
so it is mapped to 1).

Speed: stdlib ``tarfile`` spends its time building TarInfo objects and copying 16 KiB at a time.
Here the headers are built directly (:mod:`~scrollcase.box.tarformat`), the tree is walked with
directory descriptors and each file measured with ``fstat`` on the open file
(:mod:`~scrollcase.box.treewalk`), and file bytes go straight into one reused multi-MiB buffer that
zstd compresses on its worker threads (:mod:`~scrollcase.box.tarbuffer`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

import zstandard

from scrollcase.box.tarbuffer import HashingWriter, TarBuffer
from scrollcase.box.tarformat import END_OF_ARCHIVE, build_header
from scrollcase.box.treewalk import Entry, FdTree, PathTree, check_links, iter_entries, make_tree, open_file
from scrollcase.errors import BuildError

DEFAULT_LEVEL = 3


@dataclass(frozen=True)
class PackResult:
    path: Path
    size: int
    sha256: str
    files: int  # regular files (directories and symlinks are counted in ``entries``)
    entries: int
    uncompressed_bytes: int  # length of the tar stream


def normalised_mode(kind: str, st_mode: int) -> int:
    """The one mode a member gets in a box, whatever its mode on disk (only the executable bit counts)."""
    if kind == "dir" or (kind == "file" and st_mode & 0o111):
        return 0o755
    return 0o777 if kind == "symlink" else 0o644


@dataclass
class _Written:
    files: int = 0  # regular files
    entries: int = 0  # all members
    links: list[Entry] = field(default_factory=list)  # the symlinks, checked once all are known


def _write_entries(entries: Iterable[Entry], stream: TarBuffer, tree: FdTree | PathTree) -> _Written:
    """Write every member, then the end-of-archive blocks."""
    written = _Written()
    for entry in entries:
        written.entries += 1
        if entry.kind == "file":
            _write_file(entry, stream, tree)
            written.files += 1
        else:
            stream.put(build_header(entry.name, kind=entry.kind, mode=normalised_mode(entry.kind, 0), link=entry.link))
            if entry.kind == "symlink":
                written.links.append(entry)
    stream.put(END_OF_ARCHIVE)
    stream.drain()
    return written


def _write_file(entry: Entry, stream: TarBuffer, tree: FdTree | PathTree) -> None:
    """Header from ``fstat`` of the opened file, then its bytes (the hot loop: 30,000+ calls per env)."""
    try:
        fd = open_file(entry)
    except OSError as exc:
        raise tree.read_error(entry.name, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BuildError(
                f"cannot pack {tree.shown(entry.name)}: it stopped being a regular "
                "file while the tree was being packed",
                fix="do not modify the box tree while packing it",
            )
        stream.put(build_header(entry.name, kind="file", mode=normalised_mode("file", st.st_mode), size=st.st_size))
        stream.put_file(fd, st.st_size, lambda: tree.shown(entry.name))
    finally:
        os.close(fd)


# zstd's stock level-3 tables.  Half-size match tables (hash 2^16, chain 2^15) saved ~10% compression CPU
# for +1.0-1.2% size on Python envs, but on the real CUDA torch box (89% of its 5.6 GB in 19 CUDA
# libraries) they cost +3.6% against `tar | zstd -T0 -3`, outside the 1% the target allows; the stock
# tables give -0.39% there at ~1.3-1.4x the pipeline's speed (benchmarks/bench_torch.py).  Also measured
# and rejected: hash 16/chain 14, the "fast" strategy (+2.5-3.3% on real files), larger windows.
_TABLES: dict[int, dict[str, int]] = {}


def compression_parameters(level: int, threads: int) -> zstandard.ZstdCompressionParameters:
    """zstd parameters for ``level`` in multi-threaded mode: part of the reproducibility contract.

    Stock zstd tables (see ``_TABLES``).  No zstd content
    checksum: every reader checks the archive's sha256 against the release manifest and keeps
    nothing unless it matches (SPEC §4-6), so an XXH64 over the same bytes would only cost CPU on
    both ends (1.5-3% of packing, measured).
    """
    return zstandard.ZstdCompressionParameters.from_level(
        level, threads=threads or 1, write_checksum=0, **_TABLES.get(level, {})
    )


def pack_tree(
    root: Path,
    out: Path,
    *,
    level: int = DEFAULT_LEVEL,
    threads: int = -1,
    on_bytes: Callable[[int], None] | None = None,
) -> PackResult:
    """Pack ``root`` into ``out`` (``.tar.zst``), byte-for-byte reproducible.

    Written to a temp file beside ``out`` and renamed, so ``out`` is either complete or untouched.
    The tree is walked while zstd compresses (reading every directory of a big env takes a while,
    which would otherwise leave the compression workers idle); links are checked before the rename.
    ``on_bytes`` is told each megabyte of tar data packed (for a progress meter).
    """
    tree = make_tree(root)
    entries = iter_entries(root, tree)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    compressor = zstandard.ZstdCompressor(compression_params=compression_parameters(level, threads))
    try:
        with tmp.open("wb") as raw:
            hashing = HashingWriter(raw)
            target = cast("IO[bytes]", hashing)  # duck-typed: zstd only calls write/flush
            with compressor.stream_writer(target, closefd=False, write_size=1 << 20) as sink:
                stream = TarBuffer(sink, on_bytes)
                with contextlib.closing(entries):
                    written = _write_entries(entries, stream, tree)
        check_links(root, written.links)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return PackResult(out, hashing.size, hashing.sha.hexdigest(), written.files, written.entries, stream.total)
