"""File I/O helpers, the one home for them: atomic writes through temp files beside their target,
content-addressed cache entries, folders swapped into place, reading a file or raising the caller's
error, and the user cache.

A reader never sees a half-written file: the bytes go to a temp file in the same folder (same
filesystem, so the rename is atomic), which is removed again if anything fails.  Temp names say which
process made them (``.<name>.<pid>-<random><suffix>``), so the leftovers of a killed process can be
recognised and removed (:func:`remove_stale_temps`) while those of a live one are left alone.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from scrollcase.errors import Problem, ScrollcaseError

CACHE_ENV = "SCROLLCASE_CACHE_DIR"
TEMP_SUFFIX = ".part"
_NAME_KEEP = 100  # bytes of the target's name kept in a temp name: it must stay under NAME_MAX (255)


# --- cache entries read and touched without following a link, written where the disk may refuse ---------


def open_unlinked(path: Path) -> BinaryIO:
    """``path`` opened for reading; OSError (ELOOP) when it is a symlink: a cache entry is a file the
    cache wrote, never what a link in it names (an lstat first where the OS has no O_NOFOLLOW)."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not nofollow and path.is_symlink():
        raise OSError(errno.ELOOP, "a symlink where a file is expected", str(path))
    return os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | nofollow), "rb")


def touch_unlinked(path: Path) -> None:
    """Set ``path``'s times to now, never following a link (the link's own times where the OS can)."""
    if os.utime in os.supports_follow_symlinks:
        os.utime(path, follow_symlinks=False)
    elif not path.is_symlink():
        os.utime(path)


class GuardedWriter:
    """A binary file whose write failures (a full disk, a quota, a lost permission) become the error
    ``refuse`` makes of the OSError: only the writes pass here, so no read error passes for the disk's."""

    def __init__(self, out: BinaryIO, refuse: Callable[[OSError], Exception]) -> None:
        self.out, self.refuse = out, refuse

    def write(self, data: bytes | memoryview) -> int:
        try:
            return self.out.write(data)
        except OSError as exc:
            raise self.refuse(exc) from None

    def flush(self) -> None:
        """Write what is buffered (so closing the file has nothing left that could fail)."""
        try:
            self.out.flush()
        except OSError as exc:
            raise self.refuse(exc) from None


# --- copying a range of one file into another ------------------------------------------------------

_COPY_READ = 8 << 20  # the plain copy's read size


def copy_range(source: BinaryIO, out: BinaryIO, offset: int, length: int) -> int:
    """Append ``length`` bytes of ``source`` from ``offset`` to ``out`` (unbuffered files); the count copied.

    ``os.copy_file_range`` where the OS has it (Linux: the kernel copies, and btrfs or XFS share the
    blocks — a reflink), else, or where the file systems refuse it, a plain read and write."""
    done = 0
    if hasattr(os, "copy_file_range"):
        with suppress(OSError):  # another file system, no support: the plain copy goes on from done
            while done < length:
                moved = os.copy_file_range(source.fileno(), out.fileno(), length - done, offset + done)
                if moved == 0:
                    return done
                done += moved
    source.seek(offset + done)
    while done < length:
        chunk = source.read(min(_COPY_READ, length - done))
        if not chunk:
            break
        out.write(chunk)
        done += len(chunk)
    return done


# --- temp names beside a target ---------------------------------------------------------------------


def _stem(target: Path) -> str:
    return os.fsencode(target.name)[:_NAME_KEEP].decode("utf-8", "ignore")


def temp_path(target: Path, suffix: str = TEMP_SUFFIX) -> Path:
    """A fresh temp name beside ``target`` (not created): ``.<name>.<pid>-<random><suffix>``."""
    return target.with_name(f".{_stem(target)}.{os.getpid()}-{secrets.token_hex(8)}{suffix}")


def make_temp_dir(target: Path, suffix: str = TEMP_SUFFIX) -> Path:
    """A new empty folder beside ``target``, named like :func:`temp_path`."""
    return Path(tempfile.mkdtemp(prefix=f".{_stem(target)}.{os.getpid()}-", suffix=suffix, dir=target.parent))


def temp_pattern(target: Path, suffix: str = TEMP_SUFFIX) -> re.Pattern[str]:
    """The names of the temps made for ``target`` with ``suffix`` (group 1: the pid that made them)."""
    return re.compile(rf"^\.{re.escape(_stem(target))}\.(\d+)-[A-Za-z0-9_]+{re.escape(suffix)}$")


def remove_stale_temps(target: Path, suffix: str = TEMP_SUFFIX) -> list[Path]:
    """Delete the temps (files or folders) beside ``target`` whose process no longer runs."""
    pattern = temp_pattern(target, suffix)
    removed: list[Path] = []
    try:
        siblings = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in siblings:
        match = pattern.match(entry.name)
        if not match or pid_alive(int(match.group(1))):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with suppress(OSError):
                os.unlink(entry.path)  # noqa: PTH108
        removed.append(Path(entry.path))
    return removed


# --- atomic writes ------------------------------------------------------------------------------------


@contextmanager
def replacing(target: Path, *, mode: int | None = None) -> Iterator[Path]:
    """A temp path beside ``target`` for the caller to create; when the block ends without an error it
    becomes ``target`` in one rename (with permission bits ``mode`` when given), otherwise it is removed.

    The caller may check the temp file (a digest, a size) inside the block: raising there keeps the
    old ``target`` and leaves nothing behind.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path(target)
    try:
        yield temp
        if mode is not None:
            os.chmod(temp, mode)  # noqa: PTH101 - exact mode bits, not masked by the umask
        temp.replace(target)
    finally:
        temp.unlink(missing_ok=True)


@contextmanager
def atomic_output(target: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A binary file to stream into; it becomes ``target`` when the block ends without an error."""
    with replacing(target, mode=mode) as temp, temp.open("xb") as out:
        yield out


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temp file and a rename; the folder is created if needed."""
    with atomic_output(path, mode=mode) as out:
        out.write(data)
    return path


def replace_with(temp: Path, target: Path) -> None:
    """Put the finished ``temp`` at ``target`` in one rename on the same file system, replacing what was
    there: a reader sees the old file or the new one, never a part."""
    temp.replace(target)


def rename_new(temp: Path, target: Path) -> None:
    """Rename ``temp`` to ``target`` where the OS refuses an existing target (Windows: FileExistsError);
    POSIX's rename replaces, so a caller that must not replace links there instead."""
    temp.rename(target)


def move_aside(source: Path, aside: Path) -> bool:
    """Rename ``source`` to ``aside`` (a name on the same file system); False when ``source`` is absent."""
    try:
        source.rename(aside)
    except FileNotFoundError:
        return False
    return True


def move_into_place(source: Path, target: Path) -> Path:
    """Move the finished file ``source`` to ``target`` in one rename; from another filesystem it is
    copied beside ``target`` first (and ``source`` is left where it is)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        source.replace(target)
    except OSError:  # another filesystem (EXDEV): copy beside the target, then rename
        with replacing(target) as temp:
            shutil.copyfile(source, temp)
    return target


@contextmanager
def replacing_dir(target: Path) -> Iterator[Path]:
    """A new empty folder beside ``target`` to fill; when the block ends without an error it replaces
    ``target`` (an existing folder there is removed first), otherwise it is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = make_temp_dir(target)
    try:
        yield temp
        if target.exists():
            shutil.rmtree(target)
        temp.replace(target)
    finally:
        if temp.exists():
            shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def creating_dir(target: Path, complete: str) -> Iterator[Path]:
    """A new empty folder beside ``target`` to fill; when the block ends without an error it becomes
    ``target`` — unless another process made ``target`` first (it holds the file ``complete``), which
    is kept: content-addressed folders never change once they are there.  Temps of killed runs for
    the same target are removed first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    temp = make_temp_dir(target)
    try:
        yield temp
        try:
            temp.rename(target)
        except OSError:
            if not (target / complete).is_file():  # not another run's complete folder: a real failure
                raise
    finally:
        if temp.exists():
            shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def cache_entry(target: Path) -> Iterator[BinaryIO]:
    """A binary file to write one content-addressed cache entry into; it becomes ``target`` when the
    block ends without an error (the caller may check what it wrote there, raising to keep nothing).

    Temps of killed runs for the same entry are removed first.  An entry is the same bytes whoever
    wrote it, so a rename over another run's entry changes nothing; where the OS refuses one (Windows,
    while the entry is open elsewhere) the existing entry is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    temp = temp_path(target)
    try:
        with temp.open("xb") as out:
            yield out
        try:
            temp.replace(target)
        except OSError:
            if not target.is_file():  # not another run's entry: a real failure
                raise
    finally:
        temp.unlink(missing_ok=True)


def cache_entry_from(source: Path, target: Path) -> None:
    """Make ``target`` a content-addressed cache entry holding the file ``source``: hard-linked (copied
    across file systems) to a temp beside it, then renamed, as :func:`cache_entry` does."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    temp = temp_path(target)
    try:
        link_or_copy(source, temp)
        temp.replace(target)
    finally:
        temp.unlink(missing_ok=True)


def link_or_copy(source: str | Path, target: str | Path) -> None:
    """``target`` as a hard link to ``source`` where the two share a file system, else a copy of it."""
    try:
        os.link(source, target)
    except OSError:
        if not os.path.isfile(source):  # noqa: PTH113 - str or Path, as os.link takes them
            raise
        shutil.copyfile(source, target)


DIGEST_NAME = re.compile(r"[0-9a-f]{64}")  # a content-addressed cache entry: a lowercase sha256


def digest_entries(root: Path) -> list[Path]:
    """The entries of a cache laid out as ``<root>/<sha256[:2]>/<sha256>``, sorted (temps, other names and
    linked folders left out: a prune never deletes through a link); none when the cache cannot be listed."""
    try:
        return [
            entry
            for folder in sorted(root.iterdir())
            if len(folder.name) == 2 and folder.is_dir() and not folder.is_symlink()
            for entry in sorted(folder.iterdir())
            if DIGEST_NAME.fullmatch(entry.name) and entry.name.startswith(folder.name)
        ]
    except OSError:
        return []


def remove_older_than(entries: Iterable[Path], cutoff: float, keep: Container[str] = ()) -> list[tuple[Path, int]]:
    """Remove each entry last modified before ``cutoff`` (a ``time.time()``) and not named in ``keep``;
    (path, size) of those removed.  One that cannot be read or removed stays: pruning a cache only ever
    costs disk."""
    removed = []
    for entry in entries:
        with suppress(OSError):
            st = entry.stat()
            if entry.name not in keep and st.st_mtime < cutoff:
                entry.unlink()
                removed.append((entry, st.st_size))
    return removed


# --- folders swapped into place ------------------------------------------------------------------------


def swap_dir(new: Path, target: Path, previous: Path | None = None) -> None:
    """Put the complete folder ``new`` at ``target`` by renames on one file system.

    Without ``previous``, ``target`` must be absent or an empty folder (removed first).  With it, the
    folder at ``target`` is renamed to ``previous`` first and put back when the second rename fails; a
    kill between the two renames leaves only ``previous``, which :func:`recover_swap` puts back.
    OSError when a rename fails, with nothing moved."""
    if previous is None:
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
    else:
        target.replace(previous)
    try:
        new.replace(target)
    except OSError:
        if previous is not None:
            previous.replace(target)
        raise


def recover_swap(target: Path, previous: Path, complete: str) -> bool:
    """Put ``previous`` back at ``target`` when a :func:`swap_dir` was killed between its renames (no
    ``target``, and ``previous`` holds the file ``complete``); whether it did."""
    if target.exists() or not (previous / complete).is_file():
        return False
    previous.replace(target)
    return True


# --- lock files ----------------------------------------------------------------------------------------


def try_lock(lock: Path, token: str = "") -> bool:
    """Create ``lock`` exclusively, holding this process's pid (so a dead owner can be recognised) and
    ``token`` (so a holder can tell its lock from the one of a writer that broke it); False when it exists."""
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(f"{os.getpid()}\n{token}\n" if token else f"{os.getpid()}\n")
    return True


def release_lock(lock: Path, token: str) -> None:
    """Remove ``lock`` if it is still the one taken with ``token``: a lock broken as stale and taken by
    another writer since is theirs, and stays."""
    try:
        held = lock.read_text().splitlines()[1:2] == [token]
    except OSError:
        return  # gone already
    if held:
        lock.unlink(missing_ok=True)


def lock_owner(lock: Path) -> int | None:
    """The pid written into ``lock``, if it can be read."""
    try:
        lines = lock.read_text().split()
    except OSError:
        return None
    return int(lines[0]) if lines and lines[0].isdigit() else None


# --- resumable downloads -------------------------------------------------------------------------------


def resume_path(target: Path) -> Path:
    """The fixed-name partial file a resumable download of ``target`` appends to.  Unlike a temp it
    is kept when the transfer breaks, so the next run can continue from its size."""
    return target.with_name(target.name + TEMP_SUFFIX)


def finish_resumed(part: Path, target: Path) -> Path:
    """The complete (and checked) partial file becomes ``target`` in one rename."""
    part.replace(target)
    return target


# --- reading a file or raising the caller's error ---------------------------------------------------


@dataclass(frozen=True)
class ReadErrors:
    """How one caller reports a file it cannot read: its error class, and the message and fix for a
    missing file and for any other failure.  Messages are templates: ``{path}``, ``{strerror}`` (the
    OS's reason) and ``{exc}`` (the whole exception).  ``missing_problem`` puts the missing file's
    fix into a located Problem with that message instead of onto the error; ``not_utf8`` (for text)
    reports undecodable bytes with that message and a Problem naming the first bad byte."""

    error: type[ScrollcaseError]
    missing: str = "{path} does not exist"
    missing_fix: str | None = None
    missing_problem: str | None = None
    unreadable: str = "cannot read {path}: {strerror}"
    fix: str | None = None
    not_utf8: str | None = None
    not_utf8_fix: str | None = None

    def build(self, exc: OSError | UnicodeDecodeError, shown: str) -> ScrollcaseError:
        if isinstance(exc, UnicodeDecodeError) and self.not_utf8 is not None:
            bad = Problem(message=f"byte {exc.start} is not valid UTF-8", file=shown, fix=self.not_utf8_fix)
            return self.error(self.not_utf8.format(path=shown), problems=(bad,))
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if isinstance(exc, FileNotFoundError):
            message = self.missing.format(path=shown, strerror=reason, exc=exc)
            if self.missing_problem is not None:
                problem = Problem(message=self.missing_problem, file=shown, fix=self.missing_fix)
                return self.error(message, problems=(problem,))
            return self.error(message, fix=self.missing_fix)
        return self.error(self.unreadable.format(path=shown, strerror=reason, exc=exc), fix=self.fix)


def read_bytes(path: Path, errors: ReadErrors, shown: str | None = None) -> bytes:
    """The bytes of ``path``, or the caller's error (``shown``: the path as messages name it)."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise errors.build(exc, str(path) if shown is None else shown) from None


def read_text(path: Path, errors: ReadErrors, shown: str | None = None) -> str:
    """The UTF-8 text of ``path``, or the caller's error (a file that is not UTF-8 is unreadable)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.build(exc, str(path) if shown is None else shown) from None


# --- the user cache and process probes ---------------------------------------------------------------


def user_cache_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """Where downloads are kept between runs: ``$SCROLLCASE_CACHE_DIR``, else the OS's user cache folder
    (``%LOCALAPPDATA%\\scrollcase\\Cache``, ``~/Library/Caches/scrollcase``, ``$XDG_CACHE_HOME/scrollcase``)."""
    env = os.environ if env is None else env
    platform = platform or sys.platform
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
    if platform.startswith("win"):
        base = env.get("LOCALAPPDATA")
        return (Path(base) if base else home / "AppData" / "Local") / "scrollcase" / "Cache"
    if platform == "darwin":
        return home / "Library" / "Caches" / "scrollcase"
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else home / ".cache") / "scrollcase"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (True when that cannot be told: keep its files)."""
    if pid == os.getpid():
        return True
    if sys.platform == "win32":
        return True  # no cheap, safe probe: never delete what might be in use
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists, owned by someone else
    return True
