"""A hostile HTTP store on 127.0.0.1 (#32): it serves a store folder as tests/support/httpstore.py does, except for
the paths given an attack — endless bytes after correct headers (TUF's "endless data"), a body trickled a byte at
a time ("slow retrieval"), or a redirect elsewhere.  It counts what each attack sent, so a test can say the client
stopped reading, not merely that it failed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.framedreleases import write_framed_release
from tests.support.httpstore import _RANGE, HttpStoreServer, RangeHandler, ServerState, serve
from tests.support.releases import SyntheticRelease

FLOOD_CAP = 1 << 30  # a flood stops by itself after 1 GiB, should a client never hang up


@dataclass(frozen=True)
class Flood:
    """Correct headers, then zeros without end.  ``ranged_only``: only requests with a Range header are flooded
    (a 206 with the right Content-Range and no Content-Length, the body delimited by closing the connection);
    otherwise every GET is a 200 with no Content-Length, or ``length`` claimed."""

    ranged_only: bool = False
    length: int | None = None
    extra_range: int = 0  # a 206's Content-Range claims this many bytes more than were asked for


@dataclass(frozen=True)
class Trickle:
    """The file's true bytes with its true Content-Length, one byte every ``interval`` seconds."""

    interval: float = 0.5


@dataclass(frozen=True)
class TrickleHeaders:
    """A status line, then one header's bytes one every ``interval`` seconds, without end (within 10 minutes)."""

    interval: float = 0.5


@dataclass(frozen=True)
class Redirect:
    """A ``302`` to ``location`` (a ``{path}`` in it becomes the request's path)."""

    location: str


Attack = Flood | Trickle | TrickleHeaders | Redirect


@dataclass
class HostileState(ServerState):
    attacks: dict[str, Attack] = field(default_factory=dict)  # path suffix -> attack
    flooded: dict[str, int] = field(default_factory=dict)  # path -> bytes an attack sent

    def attack_on(self, path: str, ranged: bool) -> Attack | None:
        for suffix, attack in self.attacks.items():
            if path.endswith(suffix) and not (isinstance(attack, Flood) and attack.ranged_only and not ranged):
                return attack
        return None


class HostileHandler(RangeHandler):
    state: HostileState

    def do_GET(self) -> None:
        wanted = self.headers.get("Range")
        attack = self.state.attack_on(self.path, wanted is not None)
        if attack is None:
            super().do_GET()
            return
        self.state.requests.append(f"GET {self.path} {wanted or '-'}")
        self.close_connection = True
        with contextlib.suppress(OSError):
            if isinstance(attack, Redirect):
                self.send_response(302)
                self.send_header("Location", attack.location.format(path=self.path))
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif isinstance(attack, TrickleHeaders):
                self._trickle_headers(attack.interval)
            elif isinstance(attack, Trickle):
                self._trickle(Path(self.translate_path(self.path)).read_bytes(), attack.interval)
            else:
                self._flood(attack, wanted)

    def _flood(self, attack: Flood, wanted: str | None) -> None:
        found = _RANGE.match(wanted or "")
        size = Path(self.translate_path(self.path)).stat().st_size
        if found:
            start = int(found.group(1))
            end = (int(found.group(2)) if found.group(2) else size - 1) + attack.extra_range
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
            if attack.length is not None:
                self.send_header("Content-Length", str(attack.length))
        self.end_headers()
        zeros = bytes(256 * 1024)
        sent = 0
        try:
            while sent < FLOOD_CAP:
                self.wfile.write(zeros)
                sent += len(zeros)
        finally:
            self.state.flooded[self.path] = self.state.flooded.get(self.path, 0) + sent

    def _trickle_headers(self, interval: float) -> None:
        self.wfile.write(b"HTTP/1.0 200 OK\r\nX-Slow: ")
        for n in range(int(600 / interval)):
            self.wfile.write(b"z")
            self.wfile.flush()
            self.state.flooded[self.path] = n + 1
            time.sleep(interval)

    def _trickle(self, data: bytes, interval: float) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for n, byte in enumerate(data):
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            self.state.flooded[self.path] = n + 1
            time.sleep(interval)


@contextlib.contextmanager
def serve_hostile(root: Path, state: HostileState) -> Iterator[HttpStoreServer]:
    """Serve ``root`` at ``http://127.0.0.1:<free port>``, with ``state``'s attacks, until the block ends."""
    with serve(root, state, HostileHandler, "hostile-store") as server:
        yield server


def published_store(work: Path, payload: int = 400_000) -> tuple[dict[str, SyntheticRelease], Path]:
    """Two framed releases (1.0.0, 1.0.1: 4 packages of ``payload`` bytes; pkg0 and pkg1's data differ, so an
    upgrade fetches one large frame) published to ``work``/store."""
    releases = {
        v: write_framed_release(work, v, payload=payload, packages=4, rewritten=changed)
        for v, changed in (("1.0.0", ()), ("1.0.1", (1,)))
    }
    for release in releases.values():
        publish(LocalStore(work / "store"), release.manifest, release.archive_path)
    return releases, work / "store"
