"""Safe, fast unpacking of a box archive into DEST: complete and verified, or absent.

Order of events:

1. the archive's size is compared with the expected size before anything is read;
2. one thread reads the archive, feeds every byte to sha256 and to the zstd decompressor; the
   calling thread parses the tar stream and extracts into a fresh temp directory *beside* DEST
   (same filesystem, so the final rename is atomic);
3. every member is checked in memory before it touches the disk (:mod:`~scrollcase.format.archive.extract`):
   no absolute names, ``..``, backslashes or drive letters, no devices/FIFOs, no duplicates, no
   case-insensitive collisions (Windows, macOS), hardlinks only to earlier regular files, nothing
   written through a symlink, every symlink resolving inside the root, and limits on member count,
   total bytes and compression ratio checked against the *declared* size before the data is written;
4. when the stream ends the digest is compared; on any failure the temp directory is deleted;
5. the box is relocated (box.json ``"relocation"``) to DEST's absolute path *as given* (a
   symlinked parent is kept, not resolved: :func:`absolute_as_given`) and only then renamed to DEST.

So DEST never holds anything half-written or unverified: the sha256 is checked while extracting
into the hidden temp sibling, and DEST appears by one rename after it matched.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, cast

import zstandard

from scrollcase.errors import (
    BuildError,
    IntegrityError,
    Problem,
    ScrollcaseError,
    UsageError,
    describe_path,
)
from scrollcase.format import paths, relocate
from scrollcase.format import receipt as installed
from scrollcase.format.archive.extract import DEFAULT_LIMITS, Extractor, Limits, Reject, extract_all
from scrollcase.format.archive.tar import (
    ChunkReader,
    TarFormatError,
)
from scrollcase.format.archive.zstdframes import FrameError, FrameWalker
from scrollcase.io import files
from scrollcase.io.digest import HashingReader

READ_CHUNK = 1 << 20
OUT_CHUNK = 4 << 20  # most decompressed bytes per call (and per queued chunk)
_QUEUE_DEPTH = 16  # decompressed chunks in flight: bounds memory (16 x OUT_CHUNK)
_END = None


@dataclass(frozen=True)
class UnpackResult:
    dest: Path
    size: int
    sha256: str
    files: int
    entries: int
    uncompressed_bytes: int
    relocated_files: int


# ---------------------------------------------------------------- reading + hashing thread


class _Source(HashingReader):
    """What the decompressor reads from: the archive file, hashed and frame-walked on the way."""

    def __init__(self, raw: BinaryIO, on_bytes: Callable[[int], None] | None = None) -> None:
        super().__init__(raw, on_bytes)
        self.frames = FrameWalker()
        self.error: str | None = None

    def read(self, n: int = -1) -> bytes:
        data = super().read(n)
        if self.error is None:
            try:
                self.frames.feed(data)
            except FrameError as exc:
                self.error = str(exc)
        return data

    def finish(self, abandoned: threading.Event | None = None) -> None:
        """Read (and hash) whatever the decompressor left, then check the frames ended cleanly; nothing more
        once the unpack was ``abandoned`` (Ctrl-C: a stream still arriving would be read to its end)."""
        while not (abandoned and abandoned.is_set()) and self.read(READ_CHUNK):
            pass
        if self.error is None:
            try:
                self.frames.finish()
            except FrameError as exc:
                self.error = str(exc)


@dataclass(frozen=True)
class _Opened:
    """What the feed reads: the archive file (opened in the feed's thread), or a stream of its bytes."""

    path: Path
    stream: BinaryIO | None = None

    def open(self) -> contextlib.AbstractContextManager[BinaryIO]:
        return self.path.open("rb") if self.stream is None else contextlib.nullcontext(self.stream)


@dataclass
class _Feed:
    """Runs in its own thread: archive bytes -> sha256 + zstd -> queue of tar chunks.

    The decompressor is read through ``stream_reader.read(OUT_CHUNK)``, so one call never yields
    more than OUT_CHUNK bytes however extreme the compression ratio (no memory bomb).
    """

    opened: _Opened
    chunks: queue.Queue[bytes | None] = field(default_factory=lambda: queue.Queue(_QUEUE_DEPTH))
    stop: threading.Event = field(default_factory=threading.Event)
    abandoned: threading.Event = field(default_factory=threading.Event)  # no digest wanted: the caller quit
    sha256: str = ""
    size: int = 0
    error: str | None = None
    on_bytes: Callable[[int], None] | None = None  # told each chunk of archive bytes read (progress)

    def run(self) -> None:
        try:
            with self.opened.open() as f:
                source = _Source(f, self.on_bytes)
                try:
                    self._decompress(source)
                finally:
                    source.finish(self.abandoned)
                    self.sha256, self.size = source.sha.hexdigest(), source.size
                    self.error = source.error or self.error  # the walker says precisely what is wrong
        except OSError as exc:
            self.error = f"cannot read the archive: {exc.strerror}"
        finally:
            self._put(_END)

    def _decompress(self, source: _Source) -> None:
        reader = zstandard.ZstdDecompressor().stream_reader(
            cast("IO[bytes]", source), read_size=READ_CHUNK, read_across_frames=True, closefd=False
        )
        try:
            while not self.stop.is_set() and source.error is None:
                out = reader.read(OUT_CHUNK)
                if not out:
                    return
                self._put(out)
        except zstandard.ZstdError as exc:
            self.error = f"not a valid zstd stream: {exc}"

    def _put(self, item: bytes | None) -> None:
        while not self.stop.is_set():
            try:
                self.chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next_chunk(self) -> bytes | None:
        return self.chunks.get()


# ---------------------------------------------------------------- the public entry point


def unpack_archive(
    archive: Path,
    dest: Path,
    *,
    expected_size: int,
    expected_sha256: str | None,
    limits: Limits = DEFAULT_LIMITS,
    on_bytes: Callable[[int], None] | None = None,
    relocate_to: Path | None = None,
    before_publish: Callable[[], None] | None = None,
    stream: BinaryIO | None = None,
) -> UnpackResult:
    """Verify and extract ``archive`` into ``dest`` (which must not exist, or be an empty folder).
    ``on_bytes`` is told each chunk of the archive as it is read (for a progress meter).  ``relocate_to``:
    the path the box will finally live at, when that is not ``dest`` (an upgrade unpacks beside DEST,
    then swaps).  ``before_publish``: a last check, run once the tree is complete and before it becomes
    ``dest``; what it raises leaves ``dest`` as it was.  ``stream``: the archive's bytes as they arrive,
    read instead of the file ``archive`` (still being written: its size is known only at the end, and the
    sha256 over what was read decides).  ``expected_sha256`` None: only the build's own archive, packed
    without its digest (:func:`~scrollcase.format.archive.pack.pack_tree_unhashed`): the sha256 over what was read
    is the result's, and becomes the release manifest's."""
    label = describe_path(archive)
    if stream is None:
        _check_size(archive, label, expected_size)
    final = _prepare_dest(dest)
    remove_stale_temps(final)
    tmp = _make_temp(final)
    try:
        source = _Opened(archive, stream)
        expected = expected_sha256.lower() if expected_sha256 is not None else None
        result = _extract_verified(source, expected_size, label, tmp, expected, limits, on_bytes)
        where = relocate_to.absolute() if relocate_to else final
        relocated = _relocate(tmp, where, label)
        installed.write_receipt(tmp, relocate.prefix_text(where))  # for verify --installed
        tmp.chmod(0o755)
        if before_publish is not None:
            before_publish()
        _publish(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return UnpackResult(final, *result, relocated)


# The temp folder beside DEST: ".<DEST name, cut to fit>.<pid>-<random>.unpacking" (io.files' temp
# names).  The pid says which process made it, so the next unpack into the same DEST removes the folders
# of processes that are gone (killed with SIGKILL, or a machine that lost power) and leaves those of a
# live concurrent unpack alone.
TEMP_SUFFIX = ".unpacking"
NAME_MAX = 255


def temp_pattern(final: Path) -> re.Pattern[str]:
    """The names of the temp folders an unpack into ``final`` makes (group 1: the pid that made it)."""
    return files.temp_pattern(final, TEMP_SUFFIX)


def _make_temp(final: Path) -> Path:
    try:
        return files.make_temp_dir(final, TEMP_SUFFIX)
    except OSError as exc:
        raise BuildError(
            f"cannot create a temp folder in {describe_path(final.parent)}: {exc.strerror}",
            fix="check free disk space and the folder's permissions",
        ) from None


def remove_stale_temps(final: Path) -> list[Path]:
    """Delete the temp folders left beside ``final`` by unpacks whose process no longer runs."""
    return files.remove_stale_temps(final, TEMP_SUFFIX)


def _check_size(archive: Path, label: str, expected: int) -> None:
    try:
        size = archive.stat().st_size
    except OSError as exc:
        raise IntegrityError(
            f"cannot read archive {label}: {exc.strerror}", fix="check the path, or download the archive again"
        ) from None
    if size != expected:
        raise IntegrityError(
            f"archive {label} is {size} bytes, expected {expected}",
            fix="the download is incomplete or not this release: download it again",
        )


def prepare_dest(dest: Path) -> Path:
    """Check DEST as :func:`unpack_archive` will, before an installer downloads anything for it."""
    return _prepare_dest(dest)


def _prepare_dest(dest: Path) -> Path:
    """DEST's absolute path with its parent folder created; UsageError for a DEST that cannot be one."""
    shown = describe_path(dest)
    fix = "pass a new folder path (it is created), e.g. ~/boxes/my-model"
    if dest.name in ("", ".", ".."):
        raise UsageError(f"cannot unpack into {str(dest)!r}: DEST must name a new folder", fix=fix)
    if len(os.fsencode(dest.name)) > NAME_MAX:
        raise UsageError(f"cannot unpack into {shown}: the name is longer than {NAME_MAX} bytes", fix=fix)
    if dest.is_symlink():
        raise UsageError(
            f"cannot unpack into {shown}: it is a symlink (DEST is created as a real folder)",
            fix="pass the folder the link points to, or a new folder path",
        )
    try:
        final = absolute_as_given(dest)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise UsageError(f"cannot unpack into {shown}: its parent folder cannot be resolved ({exc})", fix=fix) from None
    try:
        if final.exists() and (not final.is_dir() or any(final.iterdir())):
            raise UsageError(
                f"cannot unpack into {describe_path(final)}: it exists and is not an empty folder",
                fix="choose a new folder (it is created), or remove the existing one",
            )
        final.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise UsageError(
            f"cannot unpack into {shown}: {describe_path(exc.filename)} is a file, not a folder", fix=fix
        ) from None
    except OSError as exc:
        raise BuildError(
            f"cannot create {describe_path(final.parent)}: {exc.strerror}",
            fix="check the folder's permissions and free disk space",
        ) from None
    return final


def absolute_as_given(dest: Path) -> Path:
    """DEST's absolute path as the caller spelled it, symlinked folders kept (conda relocates to the
    prefix as given, not resolved): the box names the path the host app uses, and ``sys.prefix``
    (computed from that path) agrees with the relocated ``sysconfig`` prefix.  ``.`` and ``..`` are
    removed lexically, unless a symlink before a ``..`` makes that another folder: then the parent
    is resolved, so the relocated path always names the folder the box is unpacked into."""
    given = Path(os.path.abspath(dest))  # noqa: PTH100 - lexical, unlike resolve()
    real_parent = dest.parent.resolve()  # raises on a symlink loop
    return given if given.parent.resolve() == real_parent else real_parent / dest.name


def _extract_verified(
    source: _Opened,
    size: int,
    label: str,
    tmp: Path,
    expected_sha256: str | None,
    limits: Limits,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[int, str, int, int, int]:
    feed = _Feed(source, on_bytes=on_bytes)
    thread = threading.Thread(target=feed.run, name="scrollcase-unpack-feed", daemon=True)
    budget = min(limits.max_total_bytes, max(limits.ratio_floor, int(limits.max_ratio * max(size, 1))))
    ex = Extractor(str(tmp) + os.sep, limits, budget)
    reader = ChunkReader(feed.next_chunk)
    failure: ScrollcaseError | None = None
    thread.start()
    quitting = False
    try:
        extract_all(reader, ex)
        bad = paths.escaping_link(ex.links)
        if bad is not None:
            raise Reject(bad[0], bad[1])
    except Reject as exc:
        failure = _unsafe(label, exc)
    except TarFormatError as exc:
        failure = IntegrityError(f"archive {label}: {exc}", fix="download the archive again")
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename is not None else ""
        failure = BuildError(
            f"cannot unpack {label} into {describe_path(tmp)}: {exc.strerror or exc}{where}",
            fix="check free disk space and permissions",
        )
    except BaseException:
        # Ctrl-C or SystemExit: the user wants out, not the digest; the feed may be following a download
        # that is still arriving, so it is not waited for (a daemon thread, it ends with its stream).
        quitting = True
        feed.abandoned.set()
        raise
    finally:
        feed.stop.set()
        _drain(feed.chunks)
        if not quitting:
            thread.join()
    return _verdict(feed, label, expected_sha256, failure, ex, reader.consumed)


def _unsafe(label: str, reject: Reject) -> IntegrityError:
    fix = "do not use this archive: it was not made by scrollcase, or it was tampered with"
    return IntegrityError(
        f"archive {label} is unsafe: member {reject.member!r}: {reject.rule}",
        problems=[Problem(message=reject.rule, file=label, key="member", value=repr(reject.member))],
        fix=fix,
    )


def _drain(chunks: queue.Queue[bytes | None]) -> None:
    while True:
        try:
            chunks.get_nowait()
        except queue.Empty:
            return


def _verdict(
    feed: _Feed,
    label: str,
    expected_sha256: str | None,
    failure: ScrollcaseError | None,
    ex: Extractor,
    consumed: int,
) -> tuple[int, str, int, int, int]:
    """A wrong digest outranks every other finding: the bytes are simply not the promised archive."""
    if not feed.sha256:  # the archive could not be read through (a folder, a read error): there is no digest
        raise IntegrityError(f"archive {label}: {feed.error}", fix="check the path, or download the archive again")
    if expected_sha256 is not None and feed.sha256 != expected_sha256:
        raise IntegrityError(
            f"archive {label}: sha256 is {feed.sha256}, expected {expected_sha256}",
            fix="the archive is corrupt or not this release: download it again",
        )
    if feed.error is not None:  # outranks the tar parser's "truncated" that it causes
        raise IntegrityError(f"archive {label}: {feed.error}", fix="download the archive again")
    if failure is not None:
        raise failure
    return feed.size, feed.sha256, ex.files, ex.entries, consumed


def _relocate(tmp: Path, final: Path, label: str) -> int:
    box_json = tmp / "box.json"
    if not box_json.is_file() or box_json.is_symlink():
        return 0
    info = relocate.read_relocation(box_json.read_bytes(), file=f"{label}!box.json")
    if info is None:
        return 0
    return relocate.relocate(tmp, info, relocate.prefix_text(final))


def _publish(tmp: Path, final: Path) -> None:
    try:
        files.swap_dir(tmp, final)  # an empty DEST (checked before) is replaced by the complete tree
    except OSError as exc:
        if final.exists() or final.is_symlink():
            raise UsageError(
                f"cannot unpack into {describe_path(final)}: it appeared while this unpack ran "
                "(another unpack into the same folder?); nothing of this run was kept",
                fix="unpack into a new folder, or remove the existing one and rerun",
            ) from None
        raise BuildError(
            f"cannot rename {describe_path(tmp)} to {describe_path(final)}: {exc.strerror}",
            fix="check the folder's permissions",
        ) from None
