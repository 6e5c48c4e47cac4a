"""The small protocol every object store implements, and the facts it returns.

Keys are relative to the store's root (a directory or ``s3://bucket/prefix``) and always use ``/``.
Conditional writes are the core of the safety story: ``put_file``/``put_bytes`` with
``if_none_match=True`` create a key only when it is absent, ``if_match=ETAG`` replaces a key only
when it still holds the version that was read.  A failed condition raises
:class:`~scrollcase.errors.ConflictError`; callers decide whether that is a conflict or a race to retry.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict, Unpack

from scrollcase.errors import IntegrityError, Problem, StoreError, describe_path

CHUNK = 1024 * 1024
# How long a host waits for a whole small document (the box index, a release manifest), however its bytes
# trickle in: the per-read timeouts alone let a server sending 1 byte every few seconds hold an install for
# days (TUF's "slow retrieval" attack).  Kilobytes take well under a second on any working link.
DOCUMENT_DEADLINE = 60.0
SHA256_METADATA = "scrollcase-sha256"  # stored as x-amz-meta-scrollcase-sha256 on S3

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class ObjectInfo:
    """What a store knows about one key without downloading it.  ``sha256`` is hex, None if unknown."""

    key: str
    size: int
    sha256: str | None
    etag: str | None = None


@dataclass(frozen=True)
class Blob:
    """An object's bytes plus the ETag to pass back as ``if_match`` for a compare-and-swap."""

    data: bytes
    etag: str


@dataclass(frozen=True)
class Piece:
    """Bytes ``[start, end)`` of a file being published: sent from the local file, or copied inside the
    store from the earlier object ``source_key`` (from its byte ``source_start``), which holds them too."""

    start: int
    end: int
    source_key: str | None = None
    source_start: int = 0

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def copied(self) -> bool:
        return self.source_key is not None

    @property
    def source_range(self) -> tuple[int, int]:
        return self.source_start, self.source_start + self.size


@dataclass(frozen=True)
class FileUpload:
    """A file to publish under one key: as checked (size, sha256, per-piece digests) and how to write it."""

    path: Path
    size: int
    sha256: str
    part_sha256: Sequence[str] = ()
    pieces: Sequence[Piece] = ()  # Store.reuse_layout's; () = sent whole (in the store's own parts)
    progress: ProgressCallback | None = None  # bytes written so far, sent or copied
    notice: Callable[[str], None] | None = None  # a line for the user: why a copy was sent instead


@dataclass(frozen=True)
class Transfer:
    """What ``put_file`` moved: bytes sent from the local file, bytes the store copied from earlier objects."""

    sent: int
    reused: int = 0


class WriteOptions(TypedDict, total=False):
    """How ``put_bytes`` writes: ``if_none_match`` creates the key only when it is absent, ``if_match``
    (an ETag) replaces it only while it still holds the version read; ``content_type`` of the object
    (default ``application/octet-stream``)."""

    if_none_match: bool
    if_match: str | None
    content_type: str


class Store(Protocol):
    """Where releases go.  Implementations: ``LocalStore`` (directory) and ``S3Store``."""

    @property
    def url(self) -> str:
        """Human-readable location of the store root (``s3://bucket/prefix`` or a directory)."""
        ...

    def url_for(self, key: str) -> str:
        """Human-readable location of one key, for messages."""
        ...

    def check(self) -> None:
        """Fail early with a clear StoreError when the store is unreachable, missing or refuses us."""
        ...

    def head(self, key: str) -> ObjectInfo | None:
        """Size and sha256 of ``key``; None when it does not exist."""
        ...

    def exists(self, key: str) -> bool:
        """Whether ``key`` exists (no download, no hashing)."""
        ...

    def get_bytes(self, key: str) -> Blob | None:
        """The bytes of a small object with its ETag; None when it does not exist."""
        ...

    def put_bytes(self, key: str, data: bytes, **write: Unpack[WriteOptions]) -> str:
        """Write a small object (conditionally: :class:`WriteOptions`); return its new ETag.

        ConflictError when the condition fails.
        """
        ...

    def checksum_part_size(self, size: int) -> int | None:
        """The size of the pieces ``put_file`` sends with their own checksums for a file of ``size``
        bytes, or None when it sends the file whole."""
        ...

    def reuse_layout(self, size: int, pieces: Sequence[Piece]) -> tuple[Piece, ...]:
        """How ``put_file`` would write a file of ``size`` bytes whose ranges ``pieces`` (from
        :func:`scrollcase.store.reuse.plan_reuse`) hold earlier objects' bytes: each piece is copied or sent
        (on S3 each is one part, so S3's part rules shape it).  ``()``: the file is sent whole."""
        ...

    def put_file(self, key: str, upload: FileUpload) -> Transfer:
        """Create ``key`` from a (large) file only if absent.  ConflictError when the key already exists.

        ``upload.part_sha256``: hex sha256 of each ``checksum_part_size`` piece (or of each of
        ``upload.pieces``), computed when the file was checked; the store sends them instead of hashing
        again, so the server verifies that it got exactly the bytes that were checked.
        """
        ...


@dataclass(frozen=True)
class RangeRead:
    """The bytes of one object from an offset on, as they arrive.  ``total`` is the object's whole size
    when the store says (Content-Range, Content-Length, the file's size), so a reader can refuse an
    object of the wrong size before it writes a byte.  ``chunks`` raises StoreError when the transfer
    breaks off (connection lost, timeout)."""

    offset: int
    total: int | None
    chunks: Iterator[bytes]


class RangeNotSupportedError(StoreError):
    """The server answered a ranged request with the whole object: a download cannot resume there."""


class ReadableStore(Protocol):
    """What an installer needs from a store: small objects whole, large ones from an offset on.

    ``LocalStore``, ``S3Store`` and the read-only ``HttpStore`` (any static file server or CDN) implement it.
    """

    @property
    def url(self) -> str: ...

    def url_for(self, key: str) -> str: ...

    def get_bytes(self, key: str) -> Blob | None:
        """The bytes of a small object; None when it does not exist."""
        ...

    def read_from(
        self, key: str, offset: int = 0, length: int | None = None
    ) -> contextlib.AbstractContextManager[RangeRead]:
        """Stream ``key`` from byte ``offset`` to its end, or ``length`` bytes of it (HTTP Range, S3 ranged
        GET, a seek; an upgrade reads single frames this way).

        StoreError when the key does not exist or the store fails; :class:`RangeNotSupportedError` when
        ``offset`` > 0 and the server ignores ranges."""
        ...


_CONTENT_RANGE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+|\*)$")


def parse_content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``bytes 100-999/1000`` -> (100, 999, 1000); the total is None for ``/*``; None when unparsable."""
    found = _CONTENT_RANGE.match((value or "").strip())
    if found is None:
        return None
    start, end, total = found.groups()
    return int(start), int(end), None if total == "*" else int(total)


def range_header(offset: int, length: int | None) -> str | None:
    """The ``Range`` value for ``offset`` on (``length`` bytes, or to the end); None for the whole object."""
    if length is not None:
        return f"bytes={offset}-{offset + length - 1}"
    return f"bytes={offset}-" if offset else None


def limited(chunks: Iterator[bytes], length: int | None) -> Iterator[bytes]:
    """``chunks`` cut after ``length`` bytes (all of them when None)."""
    if length is None:
        yield from chunks
        return
    left = length
    for chunk in chunks:
        if left <= 0:
            return
        yield chunk[:left]
        left -= len(chunk)


def capped(chunks: Iterator[bytes], size: int, url: str, what: str) -> Iterator[bytes]:
    """``chunks``, refused with an IntegrityError the moment a byte past ``size`` arrives (never written, never
    buffered): a store or a man in the middle sending endless bytes for ``what`` stops there (TUF's
    "endless data" attack)."""
    received = 0
    for chunk in chunks:
        received += len(chunk)
        if received > size:
            raise IntegrityError(
                f"refusing {url}: the store sent more than the {size} bytes of {what}; nothing of it was kept",
                problems=[Problem(message=f"more than the declared {size} bytes", file=url)],
                fix="the store (or something between it and this machine) is broken or hostile: "
                "use another store, or https",
            )
        yield chunk


def read_document(chunks: Iterator[bytes], url: str, *, max_bytes: int, started: float, seconds: float) -> bytes:
    """A small document's ``chunks`` joined, refused with a StoreError once more than ``max_bytes`` arrived or
    when ``seconds`` have passed since ``started`` (``time.monotonic()`` when it was asked for) before its end:
    each store's reader hands over bytes as they come (a trickle yields often), so the check runs between them."""
    parts: list[bytes] = []
    received = 0
    try:
        for chunk in chunks:
            received += len(chunk)
            if received > max_bytes:
                raise document_too_large(url, max_bytes)
            if time.monotonic() - started > seconds:
                raise document_too_slow(url, received, seconds)
            parts.append(chunk)
    except StoreError:
        if time.monotonic() - started > seconds:  # a connection cut off at the deadline (HttpStore's watchdog)
            raise document_too_slow(url, received, seconds) from None
        raise
    return b"".join(parts)


def document_too_large(url: str, max_bytes: int) -> StoreError:
    return StoreError(
        f"refusing {url}: more than {max_bytes} bytes arrived, and a document is at most {max_bytes} bytes "
        f"({max_bytes >> 20} MiB)",
        problems=[Problem(message=f"larger than the limit of {max_bytes} bytes", file=url)],
        fix="the store holds no scrollcase document there, or is hostile: check --store, or use another store",
    )


def document_too_slow(url: str, received: int | None, limit: float) -> StoreError:
    """``received`` None: cut off before its body (the status line and headers trickled)."""
    arrived = "it had not arrived" if received is None else f"only {received} bytes arrived"
    return StoreError(
        f"refusing {url}: {arrived} before the deadline of {limit:g} s for a document",
        problems=[Problem(message=f"not complete within {limit:g} s", file=url)],
        fix="the store or the network is too slow (or the store is hostile): rerun later, or use another store",
    )


def sidecar_text(sha256: str, file_name: str) -> bytes:
    """The ``.sha256`` sidecar in ``sha256sum`` format, checkable with ``sha256sum -c``."""
    return f"{sha256}  {file_name}\n".encode()


SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
SIDECAR_SUFFIX = ".sha256"


def sidecar_path(archive: Path) -> Path:
    """Where the ``.sha256`` sidecar of ``archive`` lies: beside it, named after it."""
    return archive.with_name(archive.name + SIDECAR_SUFFIX)


def read_sidecar(archive: Path) -> str | None:
    """The digest the sidecar of ``archive`` starts with (as written); None when there is no sidecar.

    IntegrityError when the sidecar does not start with 64 hex digits.
    """
    sidecar = sidecar_path(archive)
    if not sidecar.is_file():
        return None
    words = sidecar.read_text(encoding="utf-8", errors="replace").split()
    if not words or not SHA256_HEX.match(words[0]):
        raise IntegrityError(
            f"{describe_path(sidecar)} does not start with a sha256 digest",
            fix="the file should read '<64 hex digits>  <archive name>'",
        )
    return words[0]
