"""URL -> bytes, resumable: one fetcher per scheme (file, http(s), s3), chosen from a registry.

A fetcher writes a URL's bytes from an offset on into an open file, so a part file resumes where it stopped;
it announces the full size it learns before copying (:func:`announce_size`), so a writer held to a declared
size (an asset's) refuses a wrong one before a byte arrives.  The S3 client is injected, never created here.
"""

from __future__ import annotations

import http.client
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Protocol

from scrollcase.errors import BuildError, Problem

if TYPE_CHECKING:  # boto3-stubs: types only
    from mypy_boto3_s3 import S3Client

CHUNK = 1024 * 1024
WEB_SCHEMES = ("http", "https")


class RedirectRefusedError(urllib.error.URLError):
    """A redirect scrollcase does not follow: to a scheme other than http(s), or from https to http."""


class SafeRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects only to http(s) URLs and never from https down to http: urllib's own handler also
    follows ``ftp://`` (a server could make the client connect to any FTP host and port) and https -> http
    (a downgrade to cleartext that a man in the middle can then rewrite)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url).scheme, urllib.parse.urlsplit(newurl).scheme
        if new not in WEB_SCHEMES or (old == "https" and new != "https"):
            fp.close()
            limit = "only http(s) redirects are followed" if new not in WEB_SCHEMES else "never from https to http"
            raise RedirectRefusedError(f"refusing the redirect (HTTP {code}) to {newurl}: {limit}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def safe_opener(*handlers: urllib.request.BaseHandler) -> urllib.request.OpenerDirector:
    """urllib's opener with :class:`SafeRedirects` in place of its redirect handler: every http(s) read of
    scrollcase (a store, an asset) goes through one."""
    return urllib.request.build_opener(SafeRedirects, *handlers)


class Fetcher(Protocol):
    def __call__(self, url: str, out: BinaryIO, offset: int) -> None:
        """Write the bytes of ``url`` from ``offset`` on to ``out`` (positioned at ``offset``).  A fetcher
        that learns the full size of the file before copying it passes it to :func:`announce_size`."""


def announce_size(out: BinaryIO, total: int) -> None:
    """Tell an asset download the full size its source reports, before any byte is copied: a size other
    than recipe.json's stops the download there (a wrong size is known without fetching the file, and
    a file shorter than declared is not taken for a broken transfer).  Other writers ignore it."""
    expect = getattr(out, "expect_total", None)  # build/assets.py's AssetSink holds a download to its size
    if callable(expect):
        expect(total)


@contextmanager
def fetching(what: str, key: str, url: str, fix: str, at: Callable[[Problem], Problem] | None = None) -> Iterator[None]:
    """A fetcher's network or file error as a BuildError saying ``what`` failed, located at ``key``
    (or where ``at`` places the problem)."""
    try:
        yield
    except (OSError, http.client.HTTPException) as exc:
        problem = Problem(message=str(exc) or type(exc).__name__, key=key, value=url, fix=fix)
        raise BuildError(what, problems=[at(problem) if at else problem]) from None


def file_url_path(url: str) -> Path:
    """The local path of a ``file://`` URL."""
    return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))


def fetch_file(url: str, out: BinaryIO, offset: int) -> None:
    with file_url_path(url).open("rb") as src:
        announce_size(out, os.fstat(src.fileno()).st_size)
        src.seek(offset)
        shutil.copyfileobj(src, out, CHUNK)


def http_fetcher(timeout: float = 60.0, opener: Callable[..., Any] | None = None) -> Fetcher:
    open_url = opener or safe_opener().open

    def fetch(url: str, out: BinaryIO, offset: int) -> None:
        # only http(s) URLs reach this fetcher: default_fetchers registers it for those schemes
        request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})  # noqa: S310
        try:
            response = open_url(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416:  # nothing left to send: the part file is already complete
                return
            raise OSError(f"HTTP {exc.code} {exc.reason}") from None
        with response:
            if offset and response.status != 206:
                out.seek(0)  # server ignored Range: start over
                out.truncate()
                offset = 0
            total = full_size(response.headers.get("Content-Range"), response.headers.get("Content-Length"), offset)
            if total is not None:
                announce_size(out, total)
            shutil.copyfileobj(response, out, CHUNK)

    return fetch


def full_size(content_range: str | None, content_length: str | None, offset: int) -> int | None:
    """The whole file's size from a response's headers: ``Content-Range: bytes a-b/TOTAL`` of a range
    answer, else ``offset`` + ``Content-Length``; None when the server did not say (chunked, ``*``)."""
    if content_range:
        total = content_range.rpartition("/")[2].strip()
        return int(total) if total.isdigit() else None
    if content_length and content_length.strip().isdigit():
        return offset + int(content_length)
    return None


def s3_fetcher(client: S3Client) -> Fetcher:
    """``s3://bucket/key`` through an injected boto3 S3 client."""

    def fetch(url: str, out: BinaryIO, offset: int) -> None:
        parts = urllib.parse.urlsplit(url)
        key = urllib.parse.unquote(parts.path.lstrip("/"))
        try:
            if offset:
                answer = client.get_object(Bucket=parts.netloc, Key=key, Range=f"bytes={offset}-")
            else:
                answer = client.get_object(Bucket=parts.netloc, Key=key)
        except Exception as exc:  # botocore's ClientError and friends
            raise OSError(f"S3 get_object failed: {exc}") from None
        length = answer.get("ContentLength")
        total = full_size(answer.get("ContentRange"), None if length is None else str(length), offset)
        if total is not None:
            announce_size(out, total)
        shutil.copyfileobj(answer["Body"], out, CHUNK)

    return fetch


def default_fetchers(s3_client: S3Client | None = None) -> dict[str, Fetcher]:
    fetchers: dict[str, Fetcher] = {"file": fetch_file, "http": http_fetcher(), "https": http_fetcher()}
    if s3_client is not None:
        fetchers["s3"] = s3_fetcher(client=s3_client)
    return fetchers
