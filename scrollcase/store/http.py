"""A store served over plain HTTP(S) by any static file server or CDN: read-only, stdlib only.

The layout is the one ``publish`` writes (``<base>/boxes/<boxId>/index.json`` …), so a directory store
or a public bucket behind ``python -m http.server``, nginx or a CDN is an install source as it is.
Downloads resume with ``Range: bytes=N-``; a server that answers it with the whole object (200 instead
of 206) raises :class:`~scrollcase.store.base.RangeNotSupportedError`.  Every failure (404, refused
connection, timeout, a connection lost mid-body) is a StoreError naming the URL and the fix.
The opener is injected (tests and host apps may pass their own); none exists at import time.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import IO
from urllib.parse import quote, urlsplit

from scrollcase.errors import IntegrityError, StoreError, UsageError
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import MAX_DOCUMENT_BYTES
from scrollcase.io.fetch import safe_opener
from scrollcase.store.base import (
    CHUNK,
    DOCUMENT_DEADLINE,
    Blob,
    RangeNotSupportedError,
    RangeRead,
    capped,
    document_too_large,
    document_too_slow,
    parse_content_range,
    range_header,
    read_document,
)

# The longest silence between two socket operations, as for S3 (scrollcase.store.s3rules.READ_TIMEOUT): a large
# download keeps going as long as bytes move; a server that accepts and never answers fails in 15 s.
TIMEOUT = 15.0
_REACH_FIX = "check the store URL and that the server is running and reachable from this machine, then rerun"


class _Watch:
    """The socket one request connected, for its watchdog (the request runs in the caller's thread)."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.fired = threading.Event()

    def cut(self) -> None:
        self.fired.set()
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)  # a blocked read (headers or body) returns at once


class _Current(threading.local):
    watch: _Watch | None = None


_CURRENT = _Current()  # which watch the connections made in this thread report to


class _WatchedHTTP(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        if _CURRENT.watch is not None:
            _CURRENT.watch.sock = self.sock


class _WatchedHTTPS(http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        if _CURRENT.watch is not None:
            _CURRENT.watch.sock = self.sock


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTP, req)


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPS, req, context=getattr(self, "_context", None))


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[_Watch]:
    """Cut the connection this thread opens inside the block off once ``seconds`` have passed: a server that
    trickles its status line and headers is stopped there too, not only one that trickles the body."""
    watch = _Watch()
    timer = threading.Timer(seconds, watch.cut)
    timer.daemon = True
    _CURRENT.watch = watch
    timer.start()
    try:
        yield watch
    finally:
        timer.cancel()
        _CURRENT.watch = None


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; UsageError unless it is ``http(s)://host[:port][/path]``."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = urlsplit(""), False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.query or parts.fragment:
        raise UsageError(
            f"--store {url!r} is not a store URL",
            fix="pass http(s)://host[:port]/path (the folder holding boxes/), s3://bucket/prefix or a directory",
        )
    return url.rstrip("/")


class HttpStore:
    """Objects are ``<base_url>/<key>``; only reads (an installer's store).  Every read is bounded: a small
    document by ``max_document_bytes`` and ``document_deadline`` seconds in all, a range by its length;
    redirects go only to http(s), never from https to http (:func:`~scrollcase.io.fetch.safe_opener`)."""

    def __init__(
        self,
        base_url: str,
        *,
        opener: urllib.request.OpenerDirector | None = None,
        timeout: float = TIMEOUT,
        document_deadline: float = DOCUMENT_DEADLINE,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
    ) -> None:
        self.base_url = check_base_url(base_url)
        self.opener = opener or safe_opener(_WatchedHTTPHandler(), _WatchedHTTPSHandler())
        self.timeout = timeout
        self.document_deadline = document_deadline
        self.max_document_bytes = max_document_bytes

    @property
    def url(self) -> str:
        return self.base_url

    def url_for(self, key: str) -> str:
        return f"{self.base_url}/{quote(key, safe='/')}"

    def get_bytes(self, key: str) -> Blob | None:
        url = self.url_for(key)
        started = time.monotonic()
        # a second's grace: a trickled body is refused by read_document with its byte count; the watchdog stops
        # what no read returns from (a status line and headers trickled, a body gone silent)
        with _watchdog(self.document_deadline + 1.0) as watch:
            try:
                data, response = self._document(url, started)
            except StoreError:
                if watch.fired.is_set():  # the watchdog cut it off: say so, not "connection lost"
                    raise document_too_slow(url, None, self.document_deadline) from None
                raise
            if watch.fired.is_set():  # cut off in its headers, which http.client then took for complete
                raise document_too_slow(url, None, self.document_deadline)
        if response is None:
            return None
        return Blob(data=data, etag=response.headers.get("ETag") or sha256_bytes(data))

    def _document(self, url: str, started: float) -> tuple[bytes, http.client.HTTPResponse | None]:
        response = self._open(url, {})
        if response is None:
            return b"", None
        with response:
            declared = _total(response, url, 0, None)
            if declared is not None and declared > self.max_document_bytes:
                raise document_too_large(url, self.max_document_bytes)
            chunks = _chunks(response, url, self.timeout, response.read1)
            limit, deadline = self.max_document_bytes, self.document_deadline
            return read_document(chunks, url, max_bytes=limit, started=started, seconds=deadline), response

    @contextlib.contextmanager
    def read_from(self, key: str, offset: int = 0, length: int | None = None) -> Iterator[RangeRead]:
        url = self.url_for(key)
        wanted = range_header(offset, length)
        response = self._open(url, {"Range": wanted} if wanted else {})
        if response is None:
            raise StoreError(
                f"{url} does not exist (HTTP 404)", fix="check --store and --box, and that it is published"
            )
        with response:
            total = _total(response, url, offset, wanted)
            chunks = _chunks(response, url, self.timeout, response.read)
            if length is not None:  # a whole read is held to its declared size by its reader (download.py)
                _check_range_end(response, url, offset, length)
                chunks = capped(chunks, length, url, f"the range {wanted}")
            yield RangeRead(offset, total, chunks)

    def _open(self, url: str, headers: dict[str, str]) -> http.client.HTTPResponse | None:
        # identity: a server must not gzip the archive (the sha256 is of the bytes as stored).
        # The scheme is http(s), checked by check_base_url.
        request = urllib.request.Request(url, headers={"Accept-Encoding": "identity", **headers})  # noqa: S310
        try:
            response: http.client.HTTPResponse = self.opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:
                return None
            raise StoreError(
                f"GET {url} failed: HTTP {exc.code} {exc.reason}",
                fix="check the store URL and that the server lets this machine read it"
                if exc.code in (401, 403)
                else _REACH_FIX,
            ) from None
        except urllib.error.URLError as exc:
            raise StoreError(f"cannot reach {url}: {_why(exc.reason, self.timeout)}", fix=_REACH_FIX) from None
        except (OSError, http.client.HTTPException) as exc:
            raise StoreError(f"cannot reach {url}: {_why(exc, self.timeout)}", fix=_REACH_FIX) from None
        return response


def _why(reason: object, timeout: float) -> str:
    if isinstance(reason, TimeoutError | socket.timeout):
        return f"no answer within {timeout:g} s (timed out)"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    return str(reason) or type(reason).__name__


def _total(response: http.client.HTTPResponse, url: str, offset: int, wanted: str | None) -> int | None:
    """The object's whole size, from Content-Range (206) or Content-Length (200)."""
    if wanted and response.status != 206:
        raise RangeNotSupportedError(
            f"{url}: the server ignored the Range request ({wanted}) and sent the whole file (HTTP {response.status})",
            fix="serve the store with a server that honours Range requests (nginx, caddy, any CDN); "
            "the download restarts from the beginning",
        )
    if response.status == 206:
        found = parse_content_range(response.headers.get("Content-Range"))
        if found is None or found[0] != offset:
            raise StoreError(
                f"{url}: HTTP 206 with Content-Range {response.headers.get('Content-Range')!r}, not bytes {offset}-…",
                fix="the server's Range support is broken: serve the store with another server",
            )
        return found[2]
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _check_range_end(response: http.client.HTTPResponse, url: str, offset: int, length: int) -> None:
    """A 206 for ``length`` bytes from ``offset`` must say it sends those bytes (its Content-Range's end)."""
    found = parse_content_range(response.headers.get("Content-Range"))
    if response.status == 206 and found is not None and found[1] > offset + length - 1:
        raise IntegrityError(
            f"refusing {url}: asked for bytes {offset}-{offset + length - 1}, the server answers with "
            f"Content-Range {response.headers.get('Content-Range')!r}",
            fix="the store is broken or hostile: use another store",
        )


def _chunks(response: IO[bytes], url: str, timeout: float, read: Callable[[int], bytes]) -> Iterator[bytes]:
    """The body as it arrives; ``read``: ``response.read`` (full chunks) or ``read1`` (whatever came, so a
    caller holding a deadline sees a trickle)."""
    received = 0
    try:
        while chunk := read(CHUNK):
            received += len(chunk)
            yield chunk
        # http.client ends a body cut short by the server quietly (b""); what is left of Content-Length says.
        left = getattr(response, "length", None)
        if left:
            raise http.client.IncompleteRead(b"", left)
    except (OSError, http.client.HTTPException) as exc:
        # IncompleteRead, a reset or a timeout: the server stopped sending before the body's end.
        raise StoreError(
            f"the connection to {url} broke off after {received} bytes of this request: {_why(exc, timeout)}",
            fix="rerun: the download resumes where it stopped",
        ) from None
