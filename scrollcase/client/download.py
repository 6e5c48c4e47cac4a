"""A release archive into the download cache: resumable, and checked as the bytes arrive.

The cache (``<user cache dir>/downloads``) is keyed by the archive's sha256 from the release manifest:
``<sha256>.tar.zst.part`` grows while the bytes arrive and becomes ``<sha256>.tar.zst`` only when all
``size`` bytes are there and their sha256 matched.  An interrupted download (a dead server, a lost
connection, Ctrl-C) keeps the partial file; the next try asks the store for the missing bytes only
(HTTP ``Range``, S3 ranged GET, a seek in a local file), after hashing what the partial file holds.
More bytes than the manifest's size, an object of another size or a wrong sha256 are an IntegrityError
and the partial file is deleted: it can never become right.  A lock file (``<sha256>.lock``, holding the
pid) keeps two installs from writing the same partial file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scrollcase.errors import BuildError, IntegrityError, Problem, ScrollcaseError, StoreError
from scrollcase.io.cache import DOWNLOAD_CACHE
from scrollcase.io.digest import new_hash
from scrollcase.io.files import (
    CACHE_ENV,
    GuardedWriter,
    finish_resumed,
    lock_owner,
    pid_alive,
    resume_path,
    try_lock,
    user_cache_dir,
)
from scrollcase.progress import MeterFactory, silent_meter
from scrollcase.store.base import CHUNK, RangeNotSupportedError, ReadableStore

if TYPE_CHECKING:
    from scrollcase.io.digest import Hasher

ATTEMPTS = 3  # tries within one run; each that got bytes earns the next
DOWNLOADS = DOWNLOAD_CACHE.name


class Cancelled(Exception):  # noqa: N818 - the caller's own stop, not a failure of the store
    """The download was stopped by its caller (the partial file is kept for a rerun)."""


@dataclass(frozen=True)
class CachePaths:
    complete: Path
    partial: Path
    lock: Path


@dataclass(frozen=True)
class Download:
    path: Path  # the complete archive, its size and sha256 checked
    downloaded: int  # bytes fetched from the store by this run
    resumed_from: int  # bytes the partial file already held
    cached: bool  # the complete archive was already in the cache (nothing fetched)


def cache_paths(sha256: str, cache_dir: Path | None = None) -> CachePaths:
    complete = DOWNLOAD_CACHE.entry(DOWNLOAD_CACHE.folder(cache_dir or user_cache_dir()), sha256)
    return CachePaths(complete, resume_path(complete), complete.with_name(f"{complete.name}.lock"))


def download_archive(
    store: ReadableStore,
    key: str,
    *,
    size: int,
    sha256: str,
    cache_dir: Path | None = None,
    meter: MeterFactory = silent_meter,
    progress: Callable[[str], None] = lambda _: None,
    attempts: int = ATTEMPTS,
    cancel: threading.Event | None = None,
) -> Download:
    """The archive at ``key`` as a checked file in the cache (fetched, resumed or already there).
    ``cancel``: set by another thread to stop between chunks (:class:`Cancelled`; the partial file is kept)."""
    paths = cache_paths(sha256, cache_dir)
    if _complete(paths.complete, size):
        return Download(paths.complete, 0, 0, cached=True)
    make_cache_dir(paths.partial.parent)
    with locked(paths.lock, f"is downloading this archive into {paths.lock.parent}"):
        start = _partial_size(paths.partial, size)
        if start:
            progress(f"resuming the download at {start} of {size} bytes ({paths.partial})")
        fetched = _fetch(store, key, paths.partial, size, sha256, meter, progress, attempts, cancel)
        finish_resumed(paths.partial, paths.complete)
    return Download(paths.complete, fetched, start, cached=False)


def _fetch(
    store: ReadableStore,
    key: str,
    partial: Path,
    size: int,
    sha256: str,
    meter: MeterFactory,
    progress: Callable[[str], None],
    attempts: int,
    cancel: threading.Event | None = None,
) -> int:
    """Append the missing bytes to ``partial`` until it holds ``size``, retrying while tries make progress."""
    digest, have = _hash_partial(partial)
    fetched, tries = 0, 0
    while have < size:
        tries += 1
        before = have
        try:
            have = _append(store, key, partial, have, size, digest, meter, cancel)
        except RangeNotSupportedError as exc:
            if not have:
                raise
            progress(f"warning: {exc.message}; starting over")
            partial.unlink(missing_ok=True)
            digest, have, before = new_hash(), 0, 0
        except StoreError as exc:
            have = partial.stat().st_size if partial.exists() else 0
            fetched += have - before
            if have > before and tries < attempts:
                progress(f"{exc.message}; resuming at {have} of {size} bytes")
                continue
            raise _kept(exc, partial, have, size) from None
        fetched += have - before
    partial.touch()  # a 0-byte archive got no chunk that created it
    _check_digest(partial, digest.hexdigest(), sha256, store.url_for(key))
    return fetched


def _append(
    store: ReadableStore,
    key: str,
    partial: Path,
    have: int,
    size: int,
    digest: Hasher,
    meter: MeterFactory,
    cancel: threading.Event | None = None,
) -> int:
    """One ranged read from ``have`` on, each chunk hashed, size-checked and written; the new length."""
    url = store.url_for(key)
    bar = meter("downloading", size - have)
    with store.read_from(key, have) as stream, _appending(partial, size) as out:
        if stream.total is not None and stream.total != size:
            partial.unlink(missing_ok=True)
            raise _size_mismatch(url, stream.total, size)
        for chunk in stream.chunks:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"the download of {url} was stopped at {have} of {size} bytes (kept)")
            if have + len(chunk) > size:
                partial.unlink(missing_ok=True)
                raise _size_mismatch(url, f"more than {size}", size)
            out.write(chunk)
            digest.update(chunk)
            have += len(chunk)
            bar(len(chunk))
    bar.finish()
    if have < size:
        raise StoreError(f"{url} ended after {have} of {size} bytes", fix="rerun: the download resumes")
    return have


@contextlib.contextmanager
def _appending(partial: Path, size: int) -> Iterator[GuardedWriter]:
    """``partial`` opened for appending; the disk's refusal to take its bytes (opening, writing, flushing the
    last ones) is :func:`disk_refused`, never a bare OSError."""

    def refuse(exc: OSError) -> BuildError:
        return disk_refused(exc, partial, "the download cache", size)

    try:
        raw = partial.open("ab")
    except OSError as exc:
        raise refuse(exc) from None
    try:
        out = GuardedWriter(raw, refuse)
        yield out
        out.flush()
    finally:
        with contextlib.suppress(OSError):  # flushed, or failing already: the first error is the one to tell
            raw.close()


def _hash_partial(partial: Path) -> tuple[Hasher, int]:
    digest = new_hash()
    have = 0
    with contextlib.suppress(FileNotFoundError), partial.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            have += len(chunk)
    return digest, have


def _partial_size(partial: Path, size: int) -> int:
    """Bytes a partial file holds; one longer than the archive cannot be a prefix of it and is deleted."""
    try:
        have = partial.stat().st_size
    except FileNotFoundError:
        return 0
    if have > size:
        partial.unlink()
        return 0
    return have


def _complete(path: Path, size: int) -> bool:
    # The sha256 was checked before it got this name; unpack checks it again while extracting.
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def _check_digest(partial: Path, actual: str, expected: str, url: str) -> None:
    if actual != expected:
        partial.unlink(missing_ok=True)
        raise IntegrityError(
            f"refusing {url}: its sha256 is {actual}, the release manifest says {expected}; the download "
            "was deleted and nothing was installed",
            fix="the archive in the store is corrupt or was tampered with: republish it (or use another store)",
        )


def _size_mismatch(url: str, got: object, size: int) -> IntegrityError:
    return IntegrityError(
        f"refusing {url}: the store holds {got} bytes, the release manifest says {size}; nothing was installed",
        fix="the store's archive and release manifest disagree: republish the release (or use another store)",
    )


def _kept(exc: StoreError, partial: Path, have: int, size: int) -> StoreError:
    if not have:
        return exc  # nothing to resume: the store's own error says it all
    return StoreError(
        f"{exc.message}; {have} of {size} bytes are kept in {partial}",
        problems=exc.problems,
        fix=f"{exc.fix or 'rerun'} (a rerun resumes the download)",
    )


def make_cache_dir(folder: Path, what: str = "download cache") -> None:
    """Create a cache folder, or say which one cannot be created and how to move the cache (BuildError,
    exit 5, as every refusal of the disk: docs/install.md#exit-codes)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(
            f"cannot create the {what} {folder}: {exc.strerror}",
            problems=(_disk_problem(exc, folder),),
            fix=f"set {CACHE_ENV} to a writable folder",
        ) from None


def disk_refused(exc: OSError, path: Path, cache: str, need: int | None = None) -> BuildError:
    """The disk refused to take a cache file's bytes (full, a quota, permissions): BuildError (exit 5)
    naming the file, the reason, and how to make room (``need``: the bytes the file needs in all)."""
    full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    room = "free disk space there, or" if full else "make it writable, or"
    disk = f"a disk with {need} bytes free" if need is not None else "a disk with room for the release"
    return BuildError(
        f"cannot write {path} ({cache}): {exc.strerror or exc}; nothing was installed",
        problems=(_disk_problem(exc, path),),
        fix=f"{room} set {CACHE_ENV} to a folder on {disk}; a rerun resumes from what was kept "
        "(`scrollcase cache clean` removes it)",
    )


def _disk_problem(exc: OSError, path: Path) -> Problem:
    return Problem(message=exc.strerror or str(exc), file=str(path), value=errno.errorcode.get(exc.errno or 0))


@contextlib.contextmanager
def locked(lock: Path, doing: str) -> Iterator[None]:
    """One holder of ``lock`` at a time (one writer per partial file, one upgrade per DEST); a lock whose
    process is gone (killed) is taken over.  ``doing``: what the holder does, for the refusal."""
    for _ in range(2):
        if try_lock(lock):
            break
        owner = lock_owner(lock)
        if owner is not None and pid_alive(owner):
            raise ScrollcaseError(
                f"another scrollcase (pid {owner}) {doing} now: it holds the lock {lock}",
                fix=f"wait for it to finish, then rerun (or delete {lock} if no such process runs)",
            )
        lock.unlink(missing_ok=True)
    else:
        raise ScrollcaseError(f"cannot take {lock}", fix=f"delete {lock} and rerun")
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


class Follower:
    """Reads a file another thread is still appending to (a download's partial file): each read waits for
    bytes until ``size`` were read, or until ``done`` is set and nothing more came.  An unpack reading it
    runs beside the download, as ``curl | zstd -dc | tar -x`` does.  Whether what it read is the download
    is told by :meth:`read_the_file` once the download is complete (a download that started over wrote
    another file)."""

    POLL_SECONDS = 0.005

    def __init__(self, path: Path, size: int, done: threading.Event) -> None:
        self.path = path
        self.size = size
        self.done = done
        self.consumed = 0
        self._fd: int | None = None
        self._closed = False
        self._lock = threading.Lock()

    def read(self, n: int = -1) -> bytes:
        while self.consumed < self.size:
            finished = self.done.is_set()  # before the read: bytes written before it was set are seen
            with self._lock:  # close() waits: never a read of a closed (or reused) descriptor
                if self._closed:
                    return b""
                if self._fd is None and not self._open():
                    if finished:
                        return b""  # the download failed before its first byte
                    data = None
                else:
                    assert self._fd is not None
                    want = self.size - self.consumed if n < 0 else min(n, self.size - self.consumed)
                    data = os.read(self._fd, want)
            if data:
                self.consumed += len(data)
                return data
            if finished and data is not None:
                return b""
            self.done.wait(self.POLL_SECONDS)
        return b""

    def read_the_file(self, path: Path) -> bool:
        """Whether every byte read came from the file now at ``path`` (the complete download)."""
        if self._fd is None or self.consumed != self.size:
            return False
        try:
            return os.path.samestat(os.fstat(self._fd), path.stat())
        except OSError:
            return False

    def close(self) -> None:
        """Stop following: a read still waiting (an unpack abandoned by Ctrl-C) ends, and none reopens the file."""
        with self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _open(self) -> bool:
        try:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            return False
        return True
