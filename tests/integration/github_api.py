"""A tiny stand-in for the GitHub REST API on 127.0.0.1 that records check-run requests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    body: dict[str, Any]
    authorization: str


@dataclass
class FakeGitHub:
    url: str
    requests: list[Recorded] = field(default_factory=list)
    # 403 answers check-run writes as GitHub does for a fork's (or Dependabot's) read-only token.
    refuse_writes: int | None = None

    def check_run_requests(self) -> list[Recorded]:
        return [r for r in self.requests if "/check-runs" in r.path]


def _handler(api: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}") if length else {}

        def _record(self) -> Recorded:
            entry = Recorded(self.command, self.path, self._body(), self.headers.get("Authorization", ""))
            api.requests.append(entry)
            return entry

        def _reply(self, status: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _check_run(self, entry: Recorded) -> dict[str, Any]:
            repo = "/".join(entry.path.split("/")[2:4])
            return {
                "id": 7,
                "name": entry.body.get("name", "x"),
                "head_sha": entry.body.get("head_sha", ""),
                "status": entry.body.get("status", "in_progress"),
                "url": f"{api.url}/repos/{repo}/check-runs/7",
                "html_url": f"https://github.example/{repo}/runs/7",
            }

        def do_POST(self) -> None:
            entry = self._record()
            if api.refuse_writes is not None:
                self._reply(
                    api.refuse_writes,
                    {
                        "message": "Resource not accessible by integration",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                )
            elif entry.path.startswith("/repos/") and entry.path.endswith("/check-runs"):
                self._reply(201, self._check_run(entry))
            else:
                self._reply(404, {"message": "Not Found"})

        def do_PATCH(self) -> None:
            entry = self._record()
            if entry.path.startswith("/repos/") and "/check-runs/" in entry.path:
                self._reply(200, self._check_run(entry))
            else:
                self._reply(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._record()
            self._reply(404, {"message": "Not Found"})

    return Handler


@contextmanager
def fake_github(refuse_writes: int | None = None) -> Iterator[FakeGitHub]:
    """The stand-in on a free 127.0.0.1 port; ``refuse_writes=403`` plays a fork's read-only token."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(FakeGitHub(url="")))
    api = FakeGitHub(url=f"http://127.0.0.1:{server.server_address[1]}", refuse_writes=refuse_writes)
    server.RequestHandlerClass = _handler(api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
