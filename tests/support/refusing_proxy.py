"""A tiny HTTP proxy on 127.0.0.1 that plays an S3-compatible store WITHOUT conditional writes.

Requests carrying ``If-None-Match`` or ``If-Match`` (or, with ``refusing_part_copies``, ``x-amz-copy-source``)
get ``501 NotImplemented`` (as older MinIO/R2/Ceph
versions answer); everything else is forwarded unchanged to a real S3 server (moto).  It lets the
tests drive the HEAD-compare fallback against a real HTTP conversation.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
from collections.abc import Callable, Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NOT_IMPLEMENTED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
    b"<Message>A header you provided implies functionality that is not implemented</Message>"
    b"</Error>"
)


def _conditional(headers: Message) -> bool:
    return bool(headers.get("If-None-Match") or headers.get("If-Match"))


def _part_copy(headers: Message) -> bool:
    return bool(headers.get("x-amz-copy-source"))


def _handler(
    upstream_port: int, refused: list[str], refuses: Callable[[Message], bool] = _conditional
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if refuses(self.headers):
                refused.append(f"{self.command} {self.path}")
                self.send_response(501)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(NOT_IMPLEMENTED)))
                self.end_headers()
                self.wfile.write(NOT_IMPLEMENTED)
                return
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"}
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            # HEAD answers carry the object's length, not the (empty) body's.
            length = response.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextlib.contextmanager
def refusing_conditional_writes(
    upstream_port: int, refuses: Callable[[Message], bool] = _conditional
) -> Iterator[tuple[str, list[str]]]:
    """Yield (endpoint URL, list of refused requests) for a proxy in front of ``upstream_port``."""
    refused: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream_port, refused, refuses))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", refused
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def refusing_part_copies(upstream_port: int) -> Iterator[tuple[str, list[str]]]:
    """The same proxy, answering ``UploadPartCopy`` (and any copy) with 501 NotImplemented instead."""
    with refusing_conditional_writes(upstream_port, _part_copy) as running:
        yield running
