"""Deterministic, fast ``.tar.zst`` packing of a box tree.

Determinism rules (the same content gives the same bytes, wherever it lies on disk):
entries sorted by name at every level; mtime 0; uid/gid 0; empty uname/gname; mode 0o755 for
directories and executables, 0o644 otherwise; symlinks kept as relative links; zstd at a pinned
level in multi-threaded mode (zstd's multi-threaded output does not depend on the worker count, so
``threads=1`` and ``threads=16`` give the same bytes — ``threads=0``, single-threaded mode, would not,
so it is mapped to 1).

Speed: stdlib ``tarfile`` spends its time building TarInfo objects and copying 16 KiB at a time.
This writer builds ustar headers itself (pax records only for long or non-ASCII names), reads files
straight into one reused multi-MiB buffer (``os.readv``), and hands zstd whole buffers, whose worker
threads compress while Python reads the next files.  Memory stays constant whatever the tree size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, cast

import zstandard

from scrollcase.box import paths
from scrollcase.errors import BuildError, describe_path

BLOCK = 512
CHUNK = 8 << 20  # bytes handed to zstd per call; large so its workers get whole jobs
FIXED_MTIME = 0
DEFAULT_LEVEL = 3
_USTAR_MAX_SIZE = 0o77777777777  # 11 octal digits
_ZEROS = bytes(BLOCK)


@dataclass(frozen=True)
class PackResult:
    path: Path
    size: int
    sha256: str
    files: int  # regular files (directories and symlinks are counted in ``entries``)
    entries: int
    uncompressed_bytes: int  # length of the tar stream


@dataclass(frozen=True)
class Entry:
    """One member to write: its archive name, kind and (for files) where to read it."""

    name: str
    kind: str  # "dir" | "file" | "symlink"
    source: str  # absolute path on disk
    mode: int = 0o644
    link: str = ""
    size: int = 0


# ---------------------------------------------------------------- headers (pure)


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\x00" % (width - 1, value)


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body)
    while len(str(length).encode()) + len(body) != length:
        length = len(str(length).encode()) + len(body)
    return str(length).encode() + body


def _split_ustar(name: str) -> tuple[bytes, bytes] | None:
    """(name, prefix) fields for ``name`` if it fits ustar as ASCII, else None (pax needed)."""
    if not name.isascii():
        return None
    raw = name.encode("ascii")
    if len(raw) <= 100:
        return raw, b""
    cut = raw.rfind(b"/", 0, 156)
    while cut > 0:
        if len(raw) - cut - 1 <= 100:
            return raw[cut + 1:], raw[:cut]
        cut = raw.rfind(b"/", 0, cut)
    return None


# Fields that never vary (uid, gid, mtime; magic, uname, gname, devices) are built once, and so is
# their share of the header checksum (plus 256: the checksum field itself counts as 8 spaces).
_OWNER = _octal(0, 8) + _octal(0, 8)
_MTIME = _octal(FIXED_MTIME, 12)
_MAGIC_TO_DEVICES = b"ustar\x0000" + b"\x00" * 64 + _octal(0, 8) + _octal(0, 8)
_TRAILER = b"\x00" * 12
_FIXED_SUM = sum(_OWNER) + sum(_MTIME) + sum(_MAGIC_TO_DEVICES) + 256


def _ustar(name: bytes, prefix: bytes, *, mode: int, size: int, typeflag: bytes,
           link: bytes = b"") -> bytes:
    mode_field, size_field = _octal(mode, 8), _octal(size, 12)
    checksum = (_FIXED_SUM + sum(name) + sum(prefix) + sum(link) + sum(mode_field) + sum(size_field)
                + typeflag[0])  # NUL padding adds nothing
    return b"".join((name.ljust(100, b"\x00"), mode_field, _OWNER, size_field, _MTIME,
                     b"%06o\x00 " % checksum, typeflag, link.ljust(100, b"\x00"), _MAGIC_TO_DEVICES,
                     prefix.ljust(155, b"\x00"), _TRAILER))


def build_header(name: str, *, kind: str, mode: int = 0o644, size: int = 0, link: str = "") -> bytes:
    """The header block(s) for one member: a plain ustar header, or a pax header plus ustar."""
    typeflag = {"file": b"0", "dir": b"5", "symlink": b"2"}[kind]
    tar_name = name + "/" if kind == "dir" else name
    records: list[bytes] = []
    fields = _split_ustar(tar_name)
    if fields is None:
        records.append(_pax_record("path", tar_name))
        fields = (tar_name.encode("ascii", "replace")[:100], b"")
    link_raw = link.encode("utf-8")
    if not link.isascii() or len(link_raw) > 100:
        records.append(_pax_record("linkpath", link))
        link_raw = link.encode("ascii", "replace")[:100]
    if size > _USTAR_MAX_SIZE:
        records.append(_pax_record("size", str(size)))
    field_size = 0 if size > _USTAR_MAX_SIZE else size  # the pax "size" record rules then
    main = _ustar(*fields, mode=mode, size=field_size, typeflag=typeflag, link=link_raw)
    if not records:
        return main
    pax = b"".join(records)
    pax_header = _ustar(b"././@PaxHeader", b"", mode=0o644, size=len(pax), typeflag=b"x")
    return pax_header + pax + _ZEROS[: -len(pax) % BLOCK] + main


def normalised_mode(kind: str, st_mode: int) -> int:
    if kind == "dir" or (kind == "file" and st_mode & 0o111):
        return 0o755
    return 0o777 if kind == "symlink" else 0o644


# ---------------------------------------------------------------- planning (reads the tree, writes nothing)


def iter_entries(root: Path) -> Iterator[Entry]:
    """The members of ``root`` in archive order, read lazily so packing overlaps the walk."""
    if not root.is_dir():
        raise BuildError(f"cannot pack {describe_path(root)}: not a directory",
                         fix="pass the folder of the box tree to pack")
    yield from _walk(str(root), "")


def check_links(root: Path, entries: Iterable[Entry]) -> None:
    """Refuse symlinks that escape the tree, also through chains of links."""
    links = {e.name: e.link for e in entries if e.kind == "symlink"}
    bad = paths.escaping_link(links)
    if bad is not None:
        raise BuildError(f"cannot pack {describe_path(root)}: symlink {bad[0]} -> {links[bad[0]]}: {bad[1]}",
                         fix="make the link relative and pointing inside the box, or remove it")


def _walk(directory: str, prefix: str) -> Iterator[Entry]:
    try:
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise BuildError(f"cannot read {directory}: {exc.strerror}", fix="check permissions") from None
    for child in children:
        name = prefix + child.name
        if child.is_symlink():
            yield _symlink_entry(child.path, name)
        elif child.is_dir(follow_symlinks=False):
            yield Entry(name, "dir", child.path, 0o755)
            yield from _walk(child.path, name + "/")
        elif child.is_file(follow_symlinks=False):
            st = child.stat(follow_symlinks=False)
            yield Entry(name, "file", child.path, normalised_mode("file", st.st_mode), size=st.st_size)
        else:
            raise BuildError(f"cannot pack {child.path}: not a regular file, directory or symlink "
                             "(device, FIFO or socket)", fix="remove it from the box tree")


def _symlink_entry(path: str, name: str) -> Entry:
    target = Path(path).readlink().as_posix()
    try:
        paths.check_link_target(target)
    except paths.UnsafePath as exc:
        raise BuildError(f"cannot pack symlink {path} -> {target}: {exc.rule}",
                         fix="make the link relative and pointing inside the box, or remove it") from None
    return Entry(name, "symlink", path, 0o777, target)


# ---------------------------------------------------------------- writing


class _HashingWriter:
    """The file zstd writes into: hashes and counts every compressed byte on its way to disk."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


class _TarStream:
    """Fills one reused buffer with tar bytes and hands it to zstd when full."""

    def __init__(self, sink: zstandard.ZstdCompressionWriter) -> None:
        self.sink = sink
        self.buf = bytearray(CHUNK)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.total = 0

    def put(self, data: bytes) -> None:
        while data:
            n = min(len(data), CHUNK - self.pos)
            self.buf[self.pos:self.pos + n] = data[:n]
            self.pos += n
            data = data[n:]
            if self.pos == CHUNK:
                self.drain()

    def put_file(self, path: str, size: int) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            left = size
            while left:
                if self.pos == CHUNK:
                    self.drain()
                want = min(left, CHUNK - self.pos)
                got = _read_into(fd, self.view[self.pos:self.pos + want])
                if got == 0:
                    raise BuildError(f"{path} shrank while it was being packed",
                                     fix="do not modify the box tree while packing it")
                self.pos += got
                left -= got
        finally:
            os.close(fd)
        self.put(_ZEROS[: -size % BLOCK])

    def drain(self) -> None:
        if self.pos:
            self.sink.write(self.view[:self.pos])
            self.total += self.pos
            self.pos = 0


def _read_into(fd: int, view: memoryview) -> int:
    return os.readv(fd, [view])


def _read_into_copy(fd: int, view: memoryview) -> int:
    """Windows has no readv: read, then copy into the buffer (one extra copy)."""
    data = os.read(fd, len(view))
    view[:len(data)] = data
    return len(data)


if not hasattr(os, "readv"):
    _read_into = _read_into_copy  # the portable fallback


def _write_entries(entries: Iterable[Entry], stream: _TarStream) -> tuple[int, list[Entry]]:
    """Write every member; return the count of regular files and all members written."""
    files = 0
    written: list[Entry] = []
    for entry in entries:
        written.append(entry)
        if entry.kind == "file":
            stream.put(build_header(entry.name, kind="file", mode=entry.mode, size=entry.size))
            stream.put_file(entry.source, entry.size)
            files += 1
        else:
            stream.put(build_header(entry.name, kind=entry.kind, mode=entry.mode, link=entry.link))
    stream.put(bytes(2 * BLOCK))
    stream.drain()
    return files, written


# Level 3 with half-size match tables (hash 2^16, chain 2^15 entries instead of 2^17 and 2^16).
# Measured side by side against `tar | zstd -T0 -3` (benchmarks/bench_archive.py): about 10% less
# compression CPU for +1.0% size on a real 800 MB Python env and +1.2% on the synthetic 1 GB env,
# within the 2% the pipeline comparison allows; pack speed went from 1.05-1.11x to 1.12-1.23x.
# Other trades measured and rejected: hash 16/chain 14 (+1.6-2.3% size), the "fast" strategy
# (+2.5-3.3% on real files), larger windows (no gain on real files; the synthetic env rewards them
# only because its text is cut from one 24 MB corpus).
_TABLES = {DEFAULT_LEVEL: {"hash_log": 16, "chain_log": 15}}


def compression_parameters(level: int, threads: int) -> zstandard.ZstdCompressionParameters:
    """zstd parameters for ``level`` in multi-threaded mode: part of the reproducibility contract.

    Stock zstd tables for every level but the default one (see ``_TABLES``).
    """
    return zstandard.ZstdCompressionParameters.from_level(level, threads=threads or 1, write_checksum=1,
                                                           **_TABLES.get(level, {}))


def pack_tree(root: Path, out: Path, *, level: int = DEFAULT_LEVEL, threads: int = -1) -> PackResult:
    """Pack ``root`` into ``out`` (``.tar.zst``), byte-for-byte reproducible.

    Written to a temp file beside ``out`` and renamed, so ``out`` is either complete or untouched.
    The tree is walked while zstd compresses (the walk is a second of stat calls on a big env, which
    would otherwise leave the compression workers idle); links are checked before the rename.
    """
    entries = iter_entries(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    compressor = zstandard.ZstdCompressor(compression_params=compression_parameters(level, threads))
    try:
        with tmp.open("wb") as raw:
            hashing = _HashingWriter(raw)
            target = cast("IO[bytes]", hashing)  # duck-typed: zstd only calls write/flush
            with compressor.stream_writer(target, closefd=False, write_size=1 << 20) as sink:
                stream = _TarStream(sink)
                files, written = _write_entries(entries, stream)
        check_links(root, written)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return PackResult(out, hashing.size, hashing.sha.hexdigest(), files, len(written), stream.total)
