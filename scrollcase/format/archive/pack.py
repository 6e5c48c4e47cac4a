"""Deterministic, fast ``.tar.zst`` packing of a box tree, one independent zstd frame per unit.

Determinism rules (the same content gives the same bytes, wherever it lies on disk): members cut
into units (one per package, :mod:`~scrollcase.format.archive.units`) in a fixed order, sorted by name within a
unit, each unit one zstd frame (the end-of-archive blocks a last one); mtime 0; uid/gid 0; empty
uname/gname; mode 0o755 for directories and executables, 0o644 otherwise; symlinks kept as relative
links; zstd at a pinned level in multi-threaded mode (zstd's multi-threaded output does not depend on
the worker count, so ``threads=1`` and ``threads=16`` give the same bytes — ``threads=0``,
single-threaded mode, would not, so it is mapped to 1).

Speed: stdlib ``tarfile`` spends its time building TarInfo objects and copying 16 KiB at a time.
Here the headers are built directly (:mod:`~scrollcase.format.archive.tar`), the tree is walked once
(:mod:`~scrollcase.format.archive.treewalk`), and file bytes go straight into one reused multi-MiB buffer
(:mod:`~scrollcase.format.archive.tarbuffer`).  Small units are compressed whole, many at once on a thread pool;
a big unit is streamed through zstd's own worker threads.  Either way the bytes depend only on the
unit's content, so the frame of an unchanged package is the same in every release.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, cast

import zstandard

from scrollcase.errors import BuildError
from scrollcase.format.archive.frames import FrameRecord, FrameSink
from scrollcase.format.archive.packcache import PackCache
from scrollcase.format.archive.packplan import Plan, measure_unit, not_regular, plan_pack, unit_tar_size
from scrollcase.format.archive.tar import END_OF_ARCHIVE, build_header
from scrollcase.format.archive.tarbuffer import TarBuffer
from scrollcase.format.archive.treewalk import PathTree, TreeFiles, check_links
from scrollcase.format.archive.units import Unit
from scrollcase.io.files import replacing

DEFAULT_LEVEL = 3


@dataclass(frozen=True)
class PackResult:
    path: Path
    size: int
    sha256: str
    files: int  # regular files (directories and symlinks are counted in ``entries``)
    entries: int
    uncompressed_bytes: int  # length of the tar stream
    frames: tuple[FrameRecord, ...] = ()  # the archive's frames, in order (see format/archive/frames.py)


@dataclass(frozen=True)
class UnhashedPack:
    """What :func:`pack_tree_unhashed` wrote: a :class:`PackResult` but for the archive's sha256, which
    whoever reads the archive back computes (:meth:`hashed` then completes it)."""

    path: Path
    size: int
    files: int
    entries: int
    uncompressed_bytes: int
    frames: tuple[FrameRecord, ...]

    def hashed(self, sha256: str) -> PackResult:
        return PackResult(self.path, self.size, sha256, self.files, self.entries, self.uncompressed_bytes, self.frames)


def normalised_mode(kind: str, st_mode: int) -> int:
    """The one mode a member gets in a box, whatever its mode on disk (only the executable bit counts)."""
    if kind == "dir" or (kind == "file" and st_mode & 0o111):
        return 0o755
    return 0o777 if kind == "symlink" else 0o644


def _write_file(name: str, files: TreeFiles, stream: TarBuffer, tree: PathTree, planned: int) -> None:
    """Header from ``fstat`` of the opened file, then its bytes (the hot loop: 30,000+ calls per env)."""
    try:
        fd = files.open(name)
    except OSError as exc:
        raise tree.read_error(name, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(tree, name)
        if st.st_size != planned:
            raise BuildError(
                f"cannot pack {tree.shown(name)}: its size changed while the tree was being packed",
                fix="do not modify the box tree while packing it",
            )
        stream.put(build_header(name, kind="file", mode=normalised_mode("file", st.st_mode), size=st.st_size))
        stream.put_file(fd, st.st_size, lambda: tree.shown(name))
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


# Units up to SMALL_UNIT tar bytes are compressed whole, one per pool thread, while the packer reads the next:
# both cores stay busy.  IN_FLIGHT bounds the tar bytes read ahead for the pool.  Memory decides the bounds:
# a pool thread's compressor holds buffers sized to its largest unit, beside the streaming compressor's
# ~120 MiB, so at 16 MiB (32 in flight) the packer peaked at 240 MiB on the 40-package env and the build of a
# 64-package torch box at 319 MiB in its pack stage; at 4 MiB, 125 and 277 MiB.  The bigger units stream
# through zstd's workers, a few percent slower on that env (per-round median 1.036x, 8 alternating rounds),
# same bytes.
SMALL_UNIT = 4 << 20
IN_FLIGHT = 16 << 20
_BUFFER_STEP = 1 << 20  # a unit of at least this much reuses a buffer (capacity in steps of it) of an earlier one


class _Buffers:
    """The buffers the units compressed whole are read into, reused: a fresh one per unit would be zeroed and
    page-faulted in again (~0.5 s of CPU over a 1 GB env)."""

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        if size < _BUFFER_STEP:
            return bytearray(size)
        with self._lock:
            fits = [b for b in self._free if len(b) >= size]
            if fits:
                best = min(fits, key=len)
                self._free.remove(best)
                return best
        return bytearray(-(-size // _BUFFER_STEP) * _BUFFER_STEP)

    def give_back(self, buffer: bytearray) -> None:
        if len(buffer) >= _BUFFER_STEP:
            with self._lock:
                self._free.append(buffer)


_LOCAL = threading.local()


def _compress_small(data: bytes | memoryview, level: int) -> bytes:
    """One unit as one frame, on a pool thread.  Multi-threaded mode with one worker: the same bytes as
    with any worker count (see compression_parameters), and the frame header records the content size."""
    compressor = getattr(_LOCAL, "compressor", None)
    if compressor is None or _LOCAL.level != level:
        compressor = zstandard.ZstdCompressor(compression_params=compression_parameters(level, 1))
        _LOCAL.compressor, _LOCAL.level = compressor, level
    return cast("bytes", compressor.compress(data))


@dataclass
class _Writer:
    """Writes the units' frames in order: small units compressed ahead in a pool, big ones streamed."""

    plan: Plan
    tree: PathTree
    tree_files: TreeFiles
    sink: FrameSink
    stream: TarBuffer
    level: int
    threads: int
    pool: ThreadPoolExecutor
    cache: PackCache | None = None
    files: int = 0
    streaming: zstandard.ZstdCompressor | None = None
    pending: deque[tuple[Future[bytes], int]] = field(default_factory=deque)  # submitted, with their buffers' sizes
    pending_bytes: int = 0
    buffers: _Buffers = field(default_factory=_Buffers)
    aside: _Aside | None = None

    def unit(self, planned: Unit) -> None:
        unit, stats = measure_unit(planned, self.tree_files, self.tree)
        size = unit_tar_size(unit)
        self.files += len(stats)
        key = self.cache.unit_key(unit, self.level, self.tree_files.path, stats) if self.cache else None
        cached = self.cache.get(key) if self.cache and key else None
        if cached is not None and key is not None:
            self._reuse(unit.name, size, cached, key)
        elif size > SMALL_UNIT and key is not None and self.sink.copying():
            self._compress_aside(unit, size, key)
        elif size <= SMALL_UNIT:
            self._make_room(size)
            buffer = self.buffers.take(size)
            compressed = self.pool.submit(_compress_small, self._tar_bytes(unit, buffer, size), self.level)
            buffers = self.buffers  # not ``self``: a future's callback must not keep the writer in a cycle
            compressed.add_done_callback(lambda _: buffers.give_back(buffer))
            self.pending.append((compressed, len(buffer)))
            self.pending_bytes += len(buffer)
            self.sink.frame(compressed, unit.name, size, self._keep(key))
        else:
            self._stream(unit, size, key)

    def _make_room(self, size: int) -> None:
        """Wait for the oldest units in the pool until ``size`` more tar bytes fit in IN_FLIGHT."""
        while self.pending and (self.pending[0][0].done() or self.pending_bytes + size > IN_FLIGHT):
            done, done_size = self.pending.popleft()
            wait([done])
            self.pending_bytes -= done_size

    def _reuse(self, name: str, size: int, path: Path, key: str) -> None:
        """A frame from the cache: the bytes a fresh pack of this unit would write, copied by the sink (not
        hashed again when its sha256 was recorded as it was cached; the archive's own sha256 covers it)."""
        assert self.cache is not None
        self.cache.hits += 1
        known = self.cache.digests.get(key)
        self.sink.copy_frame(path, name, size, known=known, on_record=None if known else self._remember(key))
        self._packed(size)

    def _compress_aside(self, unit: Unit, size: int, key: str) -> None:
        """A changed unit met while the sink is still copying the cached frames before it (a rebuild): it is
        compressed on a thread of its own into its pack cache entry, which the sink copies in its place once
        it gets there.  The packer goes on to the units after it meanwhile, and the compression overlaps the
        sink's hashing, which is a rebuild's critical path; streamed to the sink, its bytes waited for every
        frame before them to be hashed (0.3 s of the torch box's 2.5 s rebuild)."""
        assert self.cache is not None
        entry = contextlib.ExitStack()
        tee = entry.enter_context(self.cache.writing(key))
        if tee is None:  # a cache that cannot be written: streamed as in a fresh pack
            entry.close()
            self._stream(unit, size, key)
            return
        if self.aside is None:
            self.aside = _Aside(self.tree_files, self.tree, self.level, self.threads)
        frame = self.aside.submit(entry, tee, unit, size, self.cache.path_for(key))
        self.sink.copy_frame(frame, unit.name, size, on_record=self._remember(key))
        self._packed(size)

    def _packed(self, size: int) -> None:
        """Progress for a unit's tar bytes the packer's buffer never held (a reused or aside frame)."""
        if self.stream.on_bytes is not None:
            self.stream.on_bytes(size)

    def _stream(self, unit: Unit, size: int, key: str | None) -> None:
        """A big unit through zstd's own worker threads, the frame copied into the cache on its way.  The
        frames of the small units before it are still being compressed: the sink writes them first."""
        with self.cache.writing(key) if self.cache and key else contextlib.nullcontext() as tee:
            self.sink.begin_frame(tee=tee)
            with self._compressor().stream_writer(
                cast("IO[bytes]", self.sink), size=size, closefd=False, write_size=1 << 20
            ) as writer:
                self.stream.sink = writer
                _members(unit, self.tree_files, self.stream, self.tree)
                self.stream.drain()
            self.sink.end_frame(unit.name, size, self._remember(key))
            if tee is not None:
                self.sink.wait()  # every byte of the frame in the tee before the cache entry is closed

    def _compressor(self) -> zstandard.ZstdCompressor:
        """One multi-threaded compressor for every big unit (its workers and buffers are kept between frames)."""
        if self.streaming is None:
            self.streaming = _streaming_compressor(self.level, self.threads)
        return self.streaming

    def _remember(self, key: str | None) -> Callable[[FrameRecord], None] | None:
        """What records a frame's digest in the pack cache once the sink has hashed it."""
        cache = self.cache
        if cache is None or key is None:
            return None
        return lambda record: cache.remember(key, record.sha256)

    def _keep(self, key: str | None) -> Callable[[FrameRecord, bytes], None]:
        """What puts a small unit's frame into the pack cache once the sink has written it."""
        cache = self.cache

        def keep(record: FrameRecord, frame: bytes) -> None:
            if cache is not None and key is not None:
                cache.misses += 1
                cache.put(key, frame)
                cache.remember(key, record.sha256)

        return keep

    def close_aside(self) -> None:
        if self.aside is not None:
            self.aside.close()

    def end(self) -> None:
        """The end-of-archive blocks, a frame of their own (every unit's frame stays position-free)."""
        end = self.pool.submit(_compress_small, END_OF_ARCHIVE, self.level)
        self.sink.frame(end, "end", len(END_OF_ARCHIVE), self._keep(None))

    def _tar_bytes(self, unit: Unit, buffer: bytearray, size: int) -> memoryview:
        data = memoryview(buffer)[:size]
        with self.stream.filling(data):
            _members(unit, self.tree_files, self.stream, self.tree)
            filled = self.stream.pos
        if filled != size:  # only a file that changed since the walk measured it
            raise BuildError(
                f"cannot pack {self.tree.root}: unit {unit.name} changed while the tree was being packed",
                fix="do not modify the box tree while packing it",
            )
        return data


def _members(unit: Unit, files: TreeFiles, stream: TarBuffer, tree: PathTree) -> None:
    for member in unit.members:
        if member.kind == "file":
            _write_file(member.name, files, stream, tree, member.size)
        else:
            mode = normalised_mode(member.kind, 0)
            stream.put(build_header(member.name, kind=member.kind, mode=mode, link=member.link))


def _streaming_compressor(level: int, threads: int) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(compression_params=compression_parameters(level, threads))


class _Aside:
    """One thread that compresses big changed units into their pack cache entries, one after another, with
    a tar buffer and a multi-threaded compressor of its own (the packer's are in use on its thread)."""

    def __init__(self, files: TreeFiles, tree: PathTree, level: int, threads: int) -> None:
        self._files, self._tree = files, tree
        self._stream = TarBuffer(cast("zstandard.ZstdCompressionWriter", None))
        self._compressor = _streaming_compressor(level, threads)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="scrollcase-pack-aside")

    def submit(self, entry: contextlib.ExitStack, out: BinaryIO, unit: Unit, size: int, path: Path) -> Future[Path]:
        """The frame of ``unit`` written to ``out``; ``entry`` (the cache entry's context) closed after it,
        which makes ``path`` the entry; the future's result is ``path``."""
        return self._thread.submit(self._compress, entry, out, unit, size, path)

    def _compress(self, entry: contextlib.ExitStack, out: BinaryIO, unit: Unit, size: int, path: Path) -> Path:
        with entry, self._compressor.stream_writer(out, size=size, closefd=False, write_size=1 << 20) as writer:
            self._stream.sink = writer
            _members(unit, self._files, self._stream, self._tree)
            self._stream.drain()
        return path

    def close(self) -> None:
        """Wait for the unit in progress; units not started yet are dropped (the pack failed before them)."""
        self._thread.shutdown(wait=True, cancel_futures=True)


def pack_tree(
    root: Path,
    out: Path,
    *,
    level: int = DEFAULT_LEVEL,
    threads: int = -1,
    on_bytes: Callable[[int], None] | None = None,
    cache: PackCache | None = None,
) -> PackResult:
    """Pack ``root`` into ``out`` (``.tar.zst``, one zstd frame per unit), byte-for-byte reproducible.

    With ``cache`` (:mod:`~scrollcase.format.archive.packcache`) the frame of a unit whose content was packed before
    is copied from it instead of compressed again: the same bytes, in a fraction of the time.

    Written to a temp file beside ``out`` and renamed, so ``out`` is either complete or untouched; links
    are checked before the rename.  ``on_bytes`` is told each chunk of tar data packed (a progress meter).
    """
    packed, sha256 = _pack(root, out, level=level, threads=threads, on_bytes=on_bytes, cache=cache, digest=True)
    assert sha256 is not None
    return packed.hashed(sha256)


def pack_tree_unhashed(
    root: Path,
    out: Path,
    *,
    level: int = DEFAULT_LEVEL,
    threads: int = -1,
    on_bytes: Callable[[int], None] | None = None,
    cache: PackCache | None = None,
) -> UnhashedPack:
    """:func:`pack_tree` without the archive's own sha256 (each frame's is still in the frame table), for a
    caller that reads the whole archive back anyway and hashes it there: the build, whose self-test
    unpacks it.  The archive is then hashed once, not twice; and a rebuild's pack, which copies the
    unchanged units' frames from the cache, no longer reads them to hash them (most of its time)."""
    packed, _ = _pack(root, out, level=level, threads=threads, on_bytes=on_bytes, cache=cache, digest=False)
    return packed


def _pack(
    root: Path,
    out: Path,
    *,
    level: int,
    threads: int,
    on_bytes: Callable[[int], None] | None,
    cache: PackCache | None,
    digest: bool,
) -> tuple[UnhashedPack, str | None]:
    plan = plan_pack(root)
    tree = PathTree(str(root))
    workers = (os.cpu_count() or 1) if threads < 0 else max(threads, 1)
    with replacing(out) as tmp:  # io.files: a pid-named temp beside ``out``, renamed only when complete
        with (
            tmp.open("xb") as raw,
            ThreadPoolExecutor(workers, thread_name_prefix="scrollcase-pack") as pool,
            tree.call("", TreeFiles, str(root)) as files,
        ):
            sink = FrameSink(raw, digest=digest)
            stream = TarBuffer(cast("zstandard.ZstdCompressionWriter", None), on_bytes)
            writer = _Writer(plan, tree, files, sink, stream, level, threads, pool, cache)
            try:
                for unit in plan.units:
                    writer.unit(unit)
                writer.end()
            except BaseException:
                writer.close_aside()  # an aside unit not begun is dropped: the sink stops waiting for it
                sink.close(quiet=True)  # the packer's own error wins over the sink's
                raise
            try:
                sink.close()  # every byte hashed and written, or the sink's error (a full disk) raised
            finally:
                writer.close_aside()
        if cache is not None:
            cache.save()
        check_links(root, plan.links)
    entries = sum(len(u.members) for u in plan.units)
    total = sum(f.uncompressed_size for f in sink.frames)
    packed = UnhashedPack(out, sink.size, writer.files, entries, total, tuple(sink.frames))
    return packed, sink.sha.hexdigest() if sink.sha is not None else None
