"""An HTTP proxy on 127.0.0.1 in front of a real S3 server (moto, in a thread of the test process) that plays what
moto does not: the checks and answers of stricter or odder S3 servers.

moto stores and serves objects faithfully but verifies no ``x-amz-checksum-sha256`` and reports no SHA-256 of a
copied part; AWS and SeaweedFS do both.  The proxy forwards every request unchanged unless a test asks it to:

- ``verify_checksums``: a body whose SHA-256 differs from its ``x-amz-checksum-sha256`` header gets AWS's
  ``400 BadDigest`` (as AWS and SeaweedFS answer);
- ``copy_checksums``: an UploadPartCopy answer carries the SHA-256 of the copied range, read back from the server
  (``copy_checksum_lie``: that SHA-256 instead, whatever was copied, as a broken server would);
- ``answer``: a canned answer (an S3 error document, a status) for the requests a test picks, before forwarding;
- ``ignore_range``: the Range header is dropped (a server that serves the whole object);
- ``cut_bodies``: a GET's body breaks off after that many bytes (a server that dies mid-download);
- ``head_checksums`` off: HEAD answers carry no checksum (a server that keeps none).

Always: a HEAD answer's SHA-256 of a multipart object gets the ``-<parts>`` that moto leaves off there (AWS, SeaweedFS
and moto's own GET send it): the composite checksum of the parts is not the SHA-256 of the object.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Exchange:
    """One request as the proxy received it."""

    command: str
    path: str
    headers: Message
    body: bytes

    @property
    def query(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)

    @property
    def is_part_copy(self) -> bool:
        return self.command == "PUT" and "partNumber" in self.query and bool(self.headers.get("x-amz-copy-source"))


@dataclass(frozen=True)
class Reply:
    """A canned answer: ``status`` with ``headers`` and ``body`` (an S3 error document, or nothing); status 0
    hangs up without answering (a server that drops the connection)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/xml"),)


def s3_error(status: int, code: str, message: str = "") -> Reply:
    document = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    return Reply(status, document.encode())


@dataclass
class ProxyState:
    """What the proxy does and what it saw; the tests change and read it between requests."""

    verify_checksums: bool = False
    copy_checksums: bool = False
    copy_checksum_lie: str | None = None
    ignore_range: bool = False
    cut_bodies: int | None = None
    head_checksums: bool = True  # False: HEAD answers carry no x-amz-checksum-* (a server that keeps none)
    answer: Callable[[Exchange], Reply | None] = lambda exchange: None
    seen: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def operations(self) -> list[str]:
        """``METHOD path`` of each request seen, in order, the query string kept."""
        with self.lock:
            return [f"{e.command} {e.path}" for e in self.seen]


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _checksum_error(exchange: Exchange) -> Reply | None:
    claimed = exchange.headers.get("x-amz-checksum-sha256")
    if exchange.command == "PUT" and claimed and claimed != _b64_sha256(exchange.body):
        return s3_error(400, "BadDigest", "The SHA256 you specified did not match the calculated checksum.")
    return None


def _upstream_client(port: int) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def _composite_suffixed(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    etag = dict((k.lower(), v) for k, v in headers).get("etag", "").strip('"')
    parts = etag.rpartition("-")[2] if "-" in etag else ""
    return [
        (k, f"{v}-{parts}" if k.lower() == "x-amz-checksum-sha256" and parts and "-" not in v else v)
        for k, v in headers
    ]


def _handler(upstream: int, state: ProxyState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            exchange = Exchange(self.command, self.path, self.headers, self.rfile.read(length) if length else b"")
            with state.lock:
                state.seen.append(exchange)
            reply = state.answer(exchange) or (_checksum_error(exchange) if state.verify_checksums else None)
            if reply is not None and reply.status == 0:
                self.close_connection = True
                return
            if reply is not None:
                self._send(reply.status, list(reply.headers), reply.body)
                return
            status, headers, data = self._upstream(exchange)
            if self.command == "HEAD":
                kept = state.head_checksums
                headers = [(k, v) for k, v in _composite_suffixed(headers) if kept or "checksum" not in k.lower()]
            if exchange.is_part_copy and state.copy_checksums and status == 200:
                data = self._with_copy_checksum(exchange, data)
            cut = state.cut_bodies if self.command == "GET" and status in (200, 206) else None
            self._send(status, headers, data, cut)

        def _upstream(self, exchange: Exchange) -> tuple[int, list[tuple[str, str]], bytes]:
            dropped = {"transfer-encoding", *(("range",) if state.ignore_range else ())}
            headers = {k: v for k, v in exchange.headers.items() if k.lower() not in dropped}
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            try:
                conn.request(exchange.command, exchange.path, body=exchange.body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                kept = [
                    (k, v) for k, v in response.getheaders() if k.lower() not in ("transfer-encoding", "connection")
                ]
                return response.status, kept, data
            finally:
                conn.close()

        def _with_copy_checksum(self, exchange: Exchange, data: bytes) -> bytes:
            bucket, _, key = urllib.parse.unquote(str(exchange.headers["x-amz-copy-source"])).lstrip("/").partition("/")
            copy_range = str(exchange.headers.get("x-amz-copy-source-range", ""))
            copied = _upstream_client(upstream).get_object(Bucket=bucket, Key=key, Range=copy_range)["Body"].read()
            element = f"<ChecksumSHA256>{state.copy_checksum_lie or _b64_sha256(copied)}</ChecksumSHA256>"
            return data.replace(b"</CopyPartResult>", element.encode() + b"</CopyPartResult>")

        def _send(self, status: int, headers: list[tuple[str, str]], data: bytes, cut: int | None = None) -> None:
            self.send_response(status)
            for key, value in headers:
                if key.lower() != "content-length":
                    self.send_header(key, value)
            # HEAD answers carry the object's length, not the (empty) body's.
            length = dict((k.lower(), v) for k, v in headers).get("content-length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data if cut is None else data[:cut])
            if cut is not None:
                self.close_connection = True

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@dataclass(frozen=True)
class S3Proxy:
    endpoint: str
    state: ProxyState


@contextlib.contextmanager
def s3_proxy(upstream_port: int) -> Iterator[S3Proxy]:
    """A proxy on a free port of 127.0.0.1 in front of ``upstream_port``, stopped on exit."""
    state = ProxyState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream_port, state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield S3Proxy(f"http://127.0.0.1:{server.server_address[1]}", state)
    finally:
        server.shutdown()
        server.server_close()
