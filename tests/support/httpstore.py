"""A static file server on 127.0.0.1 that honours ``Range: bytes=N-`` and ``bytes=N-M`` (or, on request,
ignores them or leaves out Content-Length), counts the body bytes it sends, and can break a transfer off after a
budget of bytes (as a server that dies mid-download would).  Started and stopped by the tests, in a thread of the
test process."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass
class ServerState:
    """What the handler does and what it did; the tests change and read it between requests."""

    honour_range: bool = True
    budget: int | None = None  # body bytes it sends in all; then every transfer breaks off (a dead server)
    budget_suffix: str = ""  # the budget applies to paths ending so (e.g. ".tar.zst"); others are never cut
    send_length: bool = True  # False: no Content-Length, the body ends when the connection closes (HTTP/1.0)
    sent: int = 0  # body bytes sent
    sent_by_path: dict[str, int] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)  # "GET <path> <Range or ->"
    encodings: list[str] = field(default_factory=list)  # each request's Accept-Encoding ("-": none)
    etag: str | None = None  # sent as the ETag of every file when set
    status: int | None = None  # every GET is answered with this error status when set (401, 403, 500...)
    range_shift: int = 0  # a broken server: the Content-Range of a 206 starts this many bytes off
    length_header: str | None = None  # a Content-Length sent instead of the true one (a 200 only)
    hold: threading.Event | None = None  # when set: every GET waits (at most 30 s) for it before answering
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, path: str, wanted: int) -> int:
        """How many of ``wanted`` bytes of ``path`` may still be sent (the rest: the connection breaks off)."""
        with self.lock:
            limited = self.budget is not None and path.endswith(self.budget_suffix)
            spent = sum(n for p, n in self.sent_by_path.items() if p.endswith(self.budget_suffix))
            allowed = max(0, min(wanted, self.budget - spent)) if limited and self.budget is not None else wanted
            self.sent += allowed
            self.sent_by_path[path] = self.sent_by_path.get(path, 0) + allowed
            return allowed

    def sent_for(self, suffix: str) -> int:
        with self.lock:
            return sum(n for p, n in self.sent_by_path.items() if p.endswith(suffix))


class RangeHandler(SimpleHTTPRequestHandler):
    state: ServerState  # set on the per-server subclass

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        state = self.state
        wanted = self.headers.get("Range")
        state.requests.append(f"GET {self.path} {wanted or '-'}")
        state.encodings.append(self.headers.get("Accept-Encoding") or "-")
        if state.hold is not None:
            state.hold.wait(30)
        if state.status is not None:
            self.send_error(state.status)
            return
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        found = _RANGE.match(wanted or "") if state.honour_range else None
        start = int(found.group(1)) if found else 0
        end = min(int(found.group(2)), size - 1) if found and found.group(2) else size - 1
        if found and start >= size:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206 if found else 200)
        if found:
            self.send_header("Content-Range", f"bytes {start + state.range_shift}-{end}/{size}")
        if state.etag is not None:
            self.send_header("ETag", state.etag)
        if state.send_length:
            length = str(end + 1 - start)
            self.send_header("Content-Length", state.length_header if state.length_header and not found else length)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        self._send_body(path, start, end + 1)

    def _send_body(self, path: Path, start: int, size: int) -> None:
        """Bytes ``start`` up to ``size`` (exclusive) of the file."""
        with path.open("rb") as stream:
            stream.seek(start)
            left = size - start
            while left:
                chunk = stream.read(min(left, 256 * 1024))
                allowed = self.state.take(self.path, len(chunk))
                self.wfile.write(chunk[:allowed])
                if allowed < len(chunk):
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)  # the server "dies" mid-body
                    return
                left -= len(chunk)


@dataclass
class HttpStoreServer:
    url: str
    state: ServerState
    server: ThreadingHTTPServer


@contextlib.contextmanager
def serve(
    root: Path,
    state: ServerState | None = None,
    handler_class: type[RangeHandler] = RangeHandler,
    name: str = "http-store",
) -> Iterator[HttpStoreServer]:
    """Serve ``root`` at ``http://127.0.0.1:<free port>`` until the block ends, each request answered by a
    ``handler_class`` (a RangeHandler, or a subclass that misbehaves) sharing ``state``."""
    state = state or ServerState()
    handler = type("Handler", (handler_class,), {"state": state})

    def make(*args: Any) -> RangeHandler:
        return handler(*args, directory=str(root))  # type: ignore[no-any-return]

    server = ThreadingHTTPServer(("127.0.0.1", 0), make)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name=name, daemon=True)
    thread.start()
    try:
        yield HttpStoreServer(f"http://127.0.0.1:{server.server_address[1]}", state, server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
