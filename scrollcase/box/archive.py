"""Deterministic, fast ``.tar.zst`` packing of a box tree.

Determinism rules (the same content gives the same bytes, wherever it lies on disk):
entries sorted by name at every level; mtime 0; uid/gid 0; empty uname/gname; mode 0o755 for
directories and executables, 0o644 otherwise; symlinks kept as relative links; zstd at a pinned
level in multi-threaded mode (zstd's multi-threaded output does not depend on the worker count, so
``threads=1`` and ``threads=16`` give the same bytes — ``threads=0``, single-threaded mode, would not,
so it is mapped to 1).

Speed: stdlib ``tarfile`` spends its time building TarInfo objects and copying 16 KiB at a time.
This writer builds ustar headers itself (pax records only for long or non-ASCII names), walks the
tree with directory descriptors (each file is opened relative to its directory and measured with
``fstat`` on the open file: no ``stat`` call and no lookup from the root per file), reads files
straight into one reused multi-MiB buffer (``os.readv``), and hands zstd whole buffers, whose worker
threads compress while Python reads the next files.  Memory stays constant whatever the tree size.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, NamedTuple, TypeVar, cast

import zstandard

from scrollcase.box import paths
from scrollcase.errors import BuildError, describe_path

BLOCK = 512
CHUNK = 8 << 20  # bytes handed to zstd per call; large so its workers get whole jobs
FIXED_MTIME = 0
DEFAULT_LEVEL = 3
_USTAR_MAX_SIZE = 0o77777777777  # 11 octal digits
_ZEROS = bytes(BLOCK)
T = TypeVar("T")


@dataclass(frozen=True)
class PackResult:
    path: Path
    size: int
    sha256: str
    files: int  # regular files (directories and symlinks are counted in ``entries``)
    entries: int
    uncompressed_bytes: int  # length of the tar stream


class Entry(NamedTuple):
    """One member to write: its archive name, kind, and the directory handle + base name to open.

    ``where`` is an open directory descriptor where the platform can open relative to one
    (:class:`_FdTree`), else the directory's path (:class:`_PathTree`); it is only valid while the
    walk is inside that directory.  A file's size and mode are read with ``fstat`` on the opened
    file when it is written, so the walk itself costs no ``stat`` call per file.
    """

    name: str
    kind: str  # "dir" | "file" | "symlink"
    where: int | str
    base: str
    link: str = ""


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
            return raw[cut + 1 :], raw[:cut]
        cut = raw.rfind(b"/", 0, cut)
    return None


# Fields that never vary (uid, gid, mtime; magic, uname, gname, devices) are built once, and so is
# their share of the header checksum (plus 256: the checksum field itself counts as 8 spaces).
_OWNER = _octal(0, 8) + _octal(0, 8)
_MTIME = _octal(FIXED_MTIME, 12)
_MAGIC_TO_DEVICES = b"ustar\x0000" + b"\x00" * 64 + _octal(0, 8) + _octal(0, 8)
_TRAILER = b"\x00" * 12
_FIXED_SUM = sum(_OWNER) + sum(_MTIME) + sum(_MAGIC_TO_DEVICES) + 256


def _ustar(name: bytes, prefix: bytes, *, mode: int, size: int, typeflag: bytes, link: bytes = b"") -> bytes:
    mode_field, size_field = _octal(mode, 8), _octal(size, 12)
    checksum = (
        _FIXED_SUM + sum(name) + sum(prefix) + sum(link) + sum(mode_field) + sum(size_field) + typeflag[0]
    )  # NUL padding adds nothing
    return b"".join(
        (
            name.ljust(100, b"\x00"),
            mode_field,
            _OWNER,
            size_field,
            _MTIME,
            b"%06o\x00 " % checksum,
            typeflag,
            link.ljust(100, b"\x00"),
            _MAGIC_TO_DEVICES,
            prefix.ljust(155, b"\x00"),
            _TRAILER,
        )
    )


def build_header(name: str, *, kind: str, mode: int = 0o644, size: int = 0, link: str = "") -> bytes:
    """The header block(s) for one member: a plain ustar header, or a pax header plus ustar."""
    if kind == "file" and len(name) <= 100 and size <= _USTAR_MAX_SIZE and name.isascii():
        return _ustar(name.encode("ascii"), b"", mode=mode, size=size, typeflag=b"0")  # most members
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


# ---------------------------------------------------------------- walking (reads the tree, writes nothing)


class _FdTree:
    """Opens relative to directory descriptors: no path lookup from the root for each of the
    30,000+ files of an env, and a directory swapped for a symlink mid-walk is not followed."""

    def __init__(self, root: str) -> None:
        self.root = root

    def shown(self, name: str) -> str:
        """A member's path on disk, for messages."""
        return f"{self.root}{os.sep}{name}"

    def open_root(self) -> int | str:
        # Followed if the root itself is a symlink (as before), unlike anything below it.
        return os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))

    def open_dir(self, where: int | str, base: str) -> int | str:
        return _open_dir(base, where)

    def close_dir(self, handle: int | str) -> None:
        os.close(cast("int", handle))

    def scan(self, handle: int | str) -> list[os.DirEntry[str]]:
        with os.scandir(cast("int", handle)) as it:
            return sorted(it, key=_by_name)

    def readlink(self, where: int | str, base: str) -> str:
        return os.readlink(base, dir_fd=cast("int", where))

    def open_file(self, where: int | str, base: str) -> int:
        return os.open(base, _FILE_FLAGS, dir_fd=cast("int", where))


class _PathTree(_FdTree):
    """The portable fallback (Windows has no ``dir_fd``): directories are handled by path."""

    def open_root(self) -> str:
        return self.root

    def open_dir(self, where: int | str, base: str) -> str:
        return f"{where}{os.sep}{base}"

    def close_dir(self, handle: int | str) -> None:
        pass

    def scan(self, handle: int | str) -> list[os.DirEntry[str]]:
        with os.scandir(cast("str", handle)) as it:
            return sorted(it, key=_by_name)

    def readlink(self, where: int | str, base: str) -> str:
        return os.readlink(f"{where}{os.sep}{base}")  # noqa: PTH115 - str in, str out, 30,000 times

    def open_file(self, where: int | str, base: str) -> int:
        return os.open(f"{where}{os.sep}{base}", _FILE_FLAGS)


# O_NONBLOCK: a FIFO swapped in after the walk must not hang the open; O_NOFOLLOW: nor a symlink.
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
_FD_WALK = (
    os.open in os.supports_dir_fd
    and os.scandir in os.supports_fd
    and os.readlink in os.supports_dir_fd
    and hasattr(os, "O_DIRECTORY")
)


def _by_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _open_dir(name: str, dir_fd: int | str) -> int:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    return os.open(name, flags, dir_fd=cast("int", dir_fd))


def make_tree(root: Path) -> _FdTree:
    return _FdTree(str(root)) if _FD_WALK else _PathTree(str(root))


def iter_entries(root: Path, tree: _FdTree) -> Generator[Entry, None, None]:
    """The members of ``root`` (opened through ``tree``) in archive order, read lazily so packing
    overlaps the walk."""
    if not root.is_dir():
        raise BuildError(
            f"cannot pack {describe_path(root)}: not a directory", fix="pass the folder of the box tree to pack"
        )
    handle = _tree_call(tree, "", tree.open_root)
    try:
        yield from _walk(tree, handle)
    finally:
        tree.close_dir(handle)


def check_links(root: Path, entries: Iterable[Entry]) -> None:
    """Refuse symlinks that escape the tree, also through chains of links."""
    links = {e.name: e.link for e in entries if e.kind == "symlink"}
    bad = paths.escaping_link(links)
    if bad is not None:
        raise BuildError(
            f"cannot pack {describe_path(root)}: symlink {bad[0]} -> {links[bad[0]]}: {bad[1]}",
            fix="make the link relative and pointing inside the box, or remove it",
        )


def _walk(tree: _FdTree, root: int | str) -> Iterator[Entry]:
    """Depth first, sorted by name at every level.  A stack instead of recursion: nested generators
    would pass each of the 30,000+ entries up through every level of the tree."""
    stack = [(root, iter(_tree_call(tree, "", tree.scan, root)), "")]
    try:
        while stack:
            handle, children, prefix = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                if stack:  # the caller opened the root and closes it
                    tree.close_dir(handle)
                continue
            name = prefix + child.name
            if child.is_file(follow_symlinks=False):  # most members: one check
                yield Entry(name, "file", handle, child.name)
            elif child.is_dir(follow_symlinks=False):
                yield Entry(name, "dir", handle, child.name)
                sub = _tree_call(tree, name, tree.open_dir, handle, child.name)
                stack.append((sub, iter(_scan_or_close(tree, name, sub)), name + "/"))
            elif child.is_symlink():
                target = _tree_call(tree, name, tree.readlink, handle, child.name)
                yield _symlink_entry(tree, name, handle, child.name, target)
            else:
                raise BuildError(
                    f"cannot pack {tree.shown(name)}: not a regular file, directory or "
                    "symlink (device, FIFO or socket)",
                    fix="remove it from the box tree",
                )
    finally:
        for handle, _, _ in stack[1:]:
            tree.close_dir(handle)


def _scan_or_close(tree: _FdTree, name: str, handle: int | str) -> list[os.DirEntry[str]]:
    try:
        return _tree_call(tree, name, tree.scan, handle)
    except BuildError:
        tree.close_dir(handle)
        raise


def _tree_call(tree: _FdTree, name: str, call: Callable[..., T], *args: object) -> T:
    """``call(*args)``, with an OSError turned into a BuildError naming the member ``name``."""
    try:
        return call(*args)
    except OSError as exc:
        raise _read_error(tree, name, exc) from None


def _read_error(tree: _FdTree, name: str, exc: OSError) -> BuildError:
    where = tree.shown(name) if name else describe_path(tree.root)
    return BuildError(
        f"cannot read {where}: {exc.strerror}", fix="check permissions, and do not modify the box tree while packing it"
    )


def _symlink_entry(tree: _FdTree, name: str, where: int | str, base: str, target: str) -> Entry:
    target = target.replace(os.sep, "/") if os.sep != "/" else target
    try:
        paths.check_link_target(target)
    except paths.UnsafePath as exc:
        raise BuildError(
            f"cannot pack symlink {tree.shown(name)} -> {target}: {exc.rule}",
            fix="make the link relative and pointing inside the box, or remove it",
        ) from None
    return Entry(name, "symlink", where, base, target)


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

    def __init__(self, sink: zstandard.ZstdCompressionWriter, on_bytes: Callable[[int], None] | None = None) -> None:
        self.sink = sink
        self.on_bytes = on_bytes
        self.buf = bytearray(CHUNK)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.total = 0

    def put(self, data: bytes) -> None:
        end = self.pos + len(data)
        if end < CHUNK:  # the common case: a header or padding that fits
            self.buf[self.pos : end] = data
            self.pos = end
            return
        while data:
            n = min(len(data), CHUNK - self.pos)
            self.buf[self.pos : self.pos + n] = data[:n]
            self.pos += n
            data = data[n:]
            if self.pos == CHUNK:
                self.drain()

    def put_file(self, fd: int, size: int, path: Callable[[], str]) -> None:
        """Exactly ``size`` bytes of the open file ``fd``, then the padding to a whole block."""
        left = size
        while left:
            if self.pos == CHUNK:
                self.drain()
            want = min(left, CHUNK - self.pos)
            got = _read_into(fd, self.view[self.pos : self.pos + want])
            if got == 0:
                raise BuildError(
                    f"{path()} shrank while it was being packed", fix="do not modify the box tree while packing it"
                )
            self.pos += got
            left -= got
        self.put(_ZEROS[: -size % BLOCK])

    def drain(self) -> None:
        if self.pos:
            self.sink.write(self.view[: self.pos])
            self.total += self.pos
            if self.on_bytes is not None:
                self.on_bytes(self.pos)
            self.pos = 0


def _read_into(fd: int, view: memoryview) -> int:
    return os.readv(fd, [view])


def _read_into_copy(fd: int, view: memoryview) -> int:
    """Windows has no readv: read, then copy into the buffer (one extra copy)."""
    data = os.read(fd, len(view))
    view[: len(data)] = data
    return len(data)


if not hasattr(os, "readv"):
    _read_into = _read_into_copy  # the portable fallback


@dataclass
class _Written:
    files: int = 0  # regular files
    entries: int = 0  # all members
    links: list[Entry] = field(default_factory=list)  # the symlinks, checked once all are known


def _write_entries(entries: Iterable[Entry], stream: _TarStream, tree: _FdTree) -> _Written:
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
    stream.put(bytes(2 * BLOCK))
    stream.drain()
    return written


def _write_file(entry: Entry, stream: _TarStream, tree: _FdTree) -> None:
    """Header from ``fstat`` of the opened file, then its bytes (the hot loop: 30,000+ calls per env)."""
    try:
        fd = tree.open_file(entry.where, entry.base)
    except OSError as exc:
        raise _read_error(tree, entry.name, exc) from None
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
            hashing = _HashingWriter(raw)
            target = cast("IO[bytes]", hashing)  # duck-typed: zstd only calls write/flush
            with compressor.stream_writer(target, closefd=False, write_size=1 << 20) as sink:
                stream = _TarStream(sink, on_bytes)
                with contextlib.closing(entries):
                    written = _write_entries(entries, stream, tree)
        check_links(root, written.links)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return PackResult(out, hashing.size, hashing.sha.hexdigest(), written.files, written.entries, stream.total)
