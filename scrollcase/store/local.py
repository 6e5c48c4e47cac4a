"""A directory as an object store: the default, for local use and for CI artifacts.

Every write goes to a temp file in the destination folder, is fsynced, then becomes visible in one
atomic step, so a reader never sees half an object:

* create-if-absent (``if_none_match``): ``os.link(temp, final)``, which fails when ``final`` exists —
  atomic on every POSIX filesystem.  On Windows ``os.rename`` has the same refuse-if-exists meaning.
* compare-and-swap (``if_match``, used for the index): a lock file created with ``O_CREAT | O_EXCL``
  serializes writers of one key; under it the current content's sha256 (the local ETag) is compared
  and the new content is ``os.replace``-d in.  A lock older than ``STALE_LOCK_SECONDS`` (a writer that
  crashed) is broken.  Readers never take the lock: they only ever see a whole old or whole new file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Unpack

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.io import files
from scrollcase.io.digest import HashingWriter, sha256_bytes, sha256_file
from scrollcase.io.documents import MAX_DOCUMENT_BYTES
from scrollcase.store.base import (
    CHUNK,
    Blob,
    FileUpload,
    ObjectInfo,
    Piece,
    ProgressCallback,
    RangeRead,
    Transfer,
    WriteOptions,
    document_too_large,
    limited,
)
from scrollcase.store.reuse import copied_bytes

STALE_LOCK_SECONDS = 60.0
TEMP_SUFFIX = ".tmp"
LOCK_WAIT_SECONDS = 30.0


class LocalStore:
    """Objects are files below ``root``; a key ``a/b/c`` is the file ``root/a/b/c``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def url(self) -> str:
        return str(self.root)

    def url_for(self, key: str) -> str:
        return str(self.path_for(key))

    def path_for(self, key: str) -> Path:
        parts = key.split("/")
        if any(p in ("", ".", "..") or "\\" in p or ":" in p for p in parts):
            raise StoreError(
                f"object key {key!r} is not a safe relative key",
                fix="keys come from scrollcase.format.release.object_keys; do not edit them by hand",
            )
        return self.root.joinpath(*parts)

    def check(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(
                f"store {self.root} exists but is not a directory", fix="pass --to a directory (or s3://bucket/prefix)"
            )

    def head(self, key: str) -> ObjectInfo | None:
        path = self.path_for(key)
        if not path.is_file():
            return None
        sha, size = sha256_file(path)
        return ObjectInfo(key=key, size=size, sha256=sha, etag=sha)

    def exists(self, key: str) -> bool:
        return self.path_for(key).is_file()

    def get_bytes(self, key: str) -> Blob | None:
        path = self.path_for(key)
        try:
            with path.open("rb") as stream:  # bounded as every store's documents: never a huge file read whole
                data = stream.read(MAX_DOCUMENT_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc}", fix="check the store directory's permissions") from None
        if len(data) > MAX_DOCUMENT_BYTES:
            raise document_too_large(str(path), MAX_DOCUMENT_BYTES)
        return Blob(data=data, etag=sha256_bytes(data))

    @contextlib.contextmanager
    def read_from(self, key: str, offset: int = 0, length: int | None = None) -> Iterator[RangeRead]:
        """The file from byte ``offset`` on (an installer continues an interrupted copy this way)."""
        path = self.path_for(key)
        try:
            stream = path.open("rb")
        except FileNotFoundError:
            raise StoreError(
                f"{path} does not exist", fix="check --store and --box; publish the release to this store"
            ) from None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc}", fix="check the store directory's permissions") from None
        with stream:
            stream.seek(offset)
            total = os.fstat(stream.fileno()).st_size
            yield RangeRead(offset, total, limited(iter(lambda: stream.read(CHUNK), b""), length))

    def put_bytes(self, key: str, data: bytes, **write: Unpack[WriteOptions]) -> str:
        target = self._prepare(key)
        if_match = write.get("if_match")
        with self._temp_beside(target) as temp:
            _write_synced(temp, data)
            if write.get("if_none_match"):
                _create_exclusive(temp, target, key)
            elif if_match is not None:
                with _key_lock(target):
                    current = target.read_bytes() if target.exists() else None
                    if current is None or sha256_bytes(current) != if_match:
                        raise ConflictError(
                            f"{target} changed since it was read (ETag mismatch)", fix="read it again and retry"
                        )
                    files.replace_with(temp, target)
            else:
                files.replace_with(temp, target)
        return sha256_bytes(data)

    def checksum_part_size(self, size: int) -> int | None:
        return None  # the copy is hashed whole as it is written

    def reuse_layout(self, size: int, pieces: Sequence[Piece]) -> tuple[Piece, ...]:
        return tuple(pieces)  # a file takes any range from anywhere

    def put_file(self, key: str, upload: FileUpload) -> Transfer:
        target = self._prepare(key)
        meter = _CountedOnce(upload.progress) if upload.progress else None
        upload = dataclasses.replace(upload, progress=meter)
        if any(p.copied for p in upload.pieces):
            transfer = self._put_assembled(key, target, upload)
            if transfer is not None:
                return transfer
        if meter is not None:
            meter.restart()  # a whole copy after a failed assembly: its bytes up to there were reported
        with self._temp_beside(target) as temp:
            copied_sha, copied_size = _copy_synced(upload.path, temp, upload.progress)
            _check_copy(upload, copied_sha, copied_size)
            _create_exclusive(temp, target, key)
        return Transfer(sent=upload.size)

    def _put_assembled(self, key: str, target: Path, upload: FileUpload) -> Transfer | None:
        """The new file from the pieces: the copied ones from the earlier files beside it, the rest from
        the local file; made visible only when its sha256 is the checked one.  None when the earlier
        files do not give those bytes (missing, short, corrupt): then it is copied whole instead."""
        with self._temp_beside(target) as temp:
            try:
                _assemble(temp, upload, self.path_for)
            except _SourceGoneError as gone:
                _notify(upload, f"{gone}: copying the whole archive instead")
                return None
            sha, size = sha256_file(temp)
            if (sha, size) != (upload.sha256, upload.size):
                sources = sorted({self.url_for(p.source_key) for p in upload.pieces if p.source_key})
                _notify(
                    upload,
                    f"the bytes copied from {', '.join(sources)} do not give the checked archive "
                    f"(sha256 {sha}): copying the whole archive instead",
                )
                return None
            _create_exclusive(temp, target, key)
        reused = copied_bytes(upload.pieces)
        return Transfer(sent=upload.size - reused, reused=reused)

    def _prepare(self, key: str) -> Path:
        target = self.path_for(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create {target.parent}: {exc}", fix="pass --to a writable directory (or set SCROLLCASE_STORE)"
            ) from None
        return target

    @contextlib.contextmanager
    def _temp_beside(self, target: Path) -> Iterator[Path]:
        # Same directory as the target, so link/rename never crosses a filesystem.  The name says which
        # process made it (".<name>.<pid>-<random>.tmp", io.files' temp names): those of processes that
        # are gone (a killed publish) are removed here, by the next write of the same key.
        remove_stale_temps(target)
        temp = files.temp_path(target, TEMP_SUFFIX)
        try:
            yield temp
        except OSError as exc:
            raise StoreError(f"writing {target} failed: {exc}", fix="check free disk space and permissions") from None
        finally:
            temp.unlink(missing_ok=True)


def temp_pattern(target: Path) -> re.Pattern[str]:
    """The names of the temp files a write of ``target`` makes (group 1: the pid of the writer)."""
    return files.temp_pattern(target, TEMP_SUFFIX)


def remove_stale_temps(target: Path) -> list[Path]:
    """Delete temp files beside ``target`` left by writers whose process no longer runs."""
    return files.remove_stale_temps(target, TEMP_SUFFIX)


class _CountedOnce:
    """A progress callback that reports every byte of the file once: a whole copy that follows a failed
    assembly counts from 0 again, and only its bytes past those already reported reach the meter."""

    def __init__(self, progress: ProgressCallback) -> None:
        self.progress = progress
        self.reported = 0
        self.seen = 0

    def restart(self) -> None:
        self.seen = 0

    def __call__(self, count: int) -> None:
        self.seen += count
        if self.seen > self.reported:
            self.progress(self.seen - self.reported)
            self.reported = self.seen


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("xb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _copy_synced(source: Path, dest: Path, progress: ProgressCallback | None) -> tuple[str, int]:
    with source.open("rb") as src, dest.open("xb") as out:
        hashing = HashingWriter(out)
        while chunk := src.read(CHUNK * 8):
            hashing.write(chunk)
            if progress:
                progress(len(chunk))
        out.flush()
        os.fsync(out.fileno())
    return hashing.sha.hexdigest(), hashing.size


def _check_copy(upload: FileUpload, copied_sha: str, copied_size: int) -> None:
    if (copied_sha, copied_size) != (upload.sha256, upload.size):
        raise IntegrityError(
            f"{upload.path} changed while it was being published (sha256 {copied_sha}, {copied_size} bytes; "
            f"expected {upload.sha256}, {upload.size} bytes)",
            fix="do not modify the archive during publish; rerun",
        )


class _SourceGoneError(Exception):
    """Internal: an earlier file to copy from is missing or shorter than its frame table says."""


def _assemble(temp: Path, upload: FileUpload, path_for: Callable[[str], Path]) -> None:
    """Write ``upload.pieces`` into ``temp`` in order, each from its own file, then fsync."""
    with temp.open("xb", buffering=0) as out, upload.path.open("rb", buffering=0) as local:
        for piece in upload.pieces:
            if piece.source_key is None:
                files.copy_range(local, out, piece.start, piece.size)
            else:
                source = path_for(piece.source_key)
                try:
                    with source.open("rb", buffering=0) as earlier:
                        done = files.copy_range(earlier, out, piece.source_start, piece.size)
                except FileNotFoundError:
                    raise _SourceGoneError(f"{source} is gone") from None
                if done != piece.size:
                    raise _SourceGoneError(f"{source} ends before byte {piece.source_range[1]}")
            if upload.progress:
                upload.progress(piece.size)
        os.fsync(out.fileno())


def _notify(upload: FileUpload, line: str) -> None:
    if upload.notice:
        upload.notice(line)


def _create_exclusive(temp: Path, target: Path, key: str) -> None:
    """Make ``temp`` visible as ``target`` only if ``target`` does not exist (atomically)."""
    try:
        if os.name == "nt":
            files.rename_new(temp, target)  # Windows: refuses an existing target, atomically
        else:
            os.link(temp, target)  # POSIX: refuses an existing target, atomically
    except FileExistsError:
        raise ConflictError(f"{target} already exists", fix="releases are immutable") from None
    except OSError:
        # A filesystem without hard links: claim the name with O_EXCL, then fill it atomically.
        _claim_then_replace(temp, target)


def _claim_then_replace(temp: Path, target: Path) -> None:
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise ConflictError(f"{target} already exists", fix="releases are immutable") from None
    os.close(fd)
    files.replace_with(temp, target)


@contextlib.contextmanager
def _key_lock(target: Path) -> Iterator[None]:
    lock = target.with_name(target.name + ".lock")
    token = secrets.token_hex(8)
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while not files.try_lock(lock, token):
        _break_stale(lock)
        if time.monotonic() > deadline:
            raise StoreError(
                f"{lock} has been held for over {LOCK_WAIT_SECONDS:.0f}s",
                fix=f"if no publish is running, delete {lock}",
            )
        time.sleep(0.02)
    try:
        yield
    finally:
        files.release_lock(lock, token)


def _break_stale(lock: Path) -> None:
    with contextlib.suppress(FileNotFoundError):  # released, or broken by another writer, since we looked
        if time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
            lock.unlink()
