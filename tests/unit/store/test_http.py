"""The read-only HTTP store against a real static server on 127.0.0.1 (a thread of this process):
URLs, Range requests, and every failure as a StoreError naming the URL."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.errors import IntegrityError, StoreError, UsageError
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import Blob, RangeNotSupportedError
from scrollcase.store.factory import open_read_store
from scrollcase.store.http import HttpStore, check_base_url
from tests.support.hostilehttp import Flood, HostileState, serve_hostile
from tests.support.httpstore import HttpStoreServer, ServerState, serve

DATA = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)  # the test servers are on 127.0.0.1


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpStoreServer]:
    (tmp_path / "boxes" / "demo").mkdir(parents=True)
    (tmp_path / "boxes" / "demo" / "a file.bin").write_bytes(DATA)
    with serve(tmp_path) as running:
        yield running


def read_all(store: HttpStore, key: str, offset: int = 0) -> tuple[int | None, bytes]:
    with store.read_from(key, offset) as stream:
        return stream.total, b"".join(stream.chunks)


@pytest.mark.parametrize(
    "url", ["ftp://host/x", "http://", "https:///path", "http://host:0/x", "http://host/x?sig=1", "host/path"]
)
def test_a_base_url_must_be_http_with_a_host(url: str) -> None:
    with pytest.raises(UsageError, match="is not a store URL"):
        check_base_url(url)


def test_keys_become_quoted_urls_below_the_base() -> None:
    store = HttpStore("https://cdn.example.com/boxes-root/")
    assert store.url == "https://cdn.example.com/boxes-root"
    assert store.url_for("boxes/demo/a file.bin") == "https://cdn.example.com/boxes-root/boxes/demo/a%20file.bin"


def test_open_read_store_picks_the_store_by_location(tmp_path: Path) -> None:
    assert type(open_read_store("https://cdn.example.com/x")).__name__ == "HttpStore"
    assert type(open_read_store(str(tmp_path))).__name__ == "LocalStore"
    made: list[str | None] = []
    s3 = open_read_store("s3://bucket/p", "http://127.0.0.1:9", env={}, s3_client=lambda e: made.append(e) or object())
    assert type(s3).__name__ == "S3Store" and made == ["http://127.0.0.1:9"]
    for location, endpoint in (
        ("", None),
        ("ftp://x/y", None),
        (str(tmp_path), "http://x:1"),
        ("https://x/", "http://x:1"),
    ):
        with pytest.raises(UsageError):
            open_read_store(location, endpoint)


def test_whole_object_and_a_range(server: HttpStoreServer) -> None:
    store = HttpStore(server.url)
    assert read_all(store, "boxes/demo/a file.bin") == (len(DATA), DATA)
    assert read_all(store, "boxes/demo/a file.bin", 1000) == (len(DATA), DATA[1000:])
    assert server.state.requests[-1].endswith("bytes=1000-")
    assert server.state.sent == len(DATA) + len(DATA) - 1000
    blob = store.get_bytes("boxes/demo/a file.bin")
    assert blob is not None and blob.data == DATA
    with store.read_from("boxes/demo/a file.bin") as stream:  # by default from the first byte, no Range
        assert b"".join(stream.chunks) == DATA
    assert server.state.requests[-1].endswith(" -")


def test_a_missing_key(server: HttpStoreServer) -> None:
    store = HttpStore(server.url)
    assert store.get_bytes("boxes/demo/nope") is None
    with pytest.raises(StoreError, match=r"nope does not exist \(HTTP 404\)"):
        read_all(store, "boxes/demo/nope")


def test_a_server_that_ignores_range(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with serve(tmp_path, ServerState(honour_range=False)) as running:
        store = HttpStore(running.url)
        assert read_all(store, "f") == (len(DATA), DATA)  # from the start it is fine
        with pytest.raises(RangeNotSupportedError, match="ignored the Range request") as raised:
            read_all(store, "f", 10)
    assert raised.value.exit_code == 9 and f"{running.url}/f" in raised.value.message


def test_a_transfer_that_breaks_off_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with serve(tmp_path, ServerState(budget=300_000)) as running:
        store = HttpStore(running.url)
        with store.read_from("f") as stream:
            received = 0
            with pytest.raises(StoreError, match="broke off") as raised:
                for chunk in stream.chunks:
                    received += len(chunk)
    assert received == 300_000 and f"{running.url}/f" in raised.value.message
    assert "after 300000 bytes of this request" in raised.value.message  # where a rerun resumes
    assert "rerun" in (raised.value.fix or "")


def test_a_refused_connection_names_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    store = HttpStore(f"http://127.0.0.1:{port}/store")
    with pytest.raises(StoreError, match="connection refused") as raised:
        store.get_bytes("boxes/demo/index.json")
    assert f"127.0.0.1:{port}/store/boxes/demo/index.json" in raised.value.message


def test_a_silent_server_times_out() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    try:
        store = HttpStore(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5)
        with pytest.raises(StoreError, match=r"no answer within 0\.5 s \(timed out\)"):  # the store's own timeout
            store.get_bytes("index.json")
    finally:
        for conn in accepted:
            conn.close()
        listener.close()


def test_an_http_error_status(tmp_path: Path) -> None:
    (tmp_path / "g").write_bytes(b"abc")
    with serve(tmp_path) as running, pytest.raises(StoreError, match="HTTP 416") as raised:
        read_all(HttpStore(running.url), "g", 10)  # a range past the end
    assert f"{running.url}/g" in raised.value.message


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8080/store/", "http://127.0.0.1:8080/store"),
        ("https://cdn.example.com", "https://cdn.example.com"),
        ("http://host:1//", "http://host:1"),
    ],
)
def test_a_store_url_with_a_host_and_a_port_is_its_base(url: str, base: str) -> None:
    assert check_base_url(url) == base


@pytest.mark.parametrize("url", ["http://host:99999/x", "http://[::1/x", "https://host:-1/"])
def test_a_store_url_whose_port_cannot_be_read_is_refused(url: str) -> None:
    with pytest.raises(UsageError, match="is not a store URL"):
        check_base_url(url)


def test_a_length_asks_for_only_those_bytes(server: HttpStoreServer) -> None:
    store = HttpStore(server.url)
    with store.read_from("boxes/demo/a file.bin", 1000, 24) as stream:
        assert (stream.offset, stream.total, b"".join(stream.chunks)) == (1000, len(DATA), DATA[1000:1024])
    with store.read_from("boxes/demo/a file.bin", 0, 10) as stream:
        assert b"".join(stream.chunks) == DATA[:10]
    assert [r.rsplit(" ", 1)[1] for r in server.state.requests] == ["bytes=1000-1023", "bytes=0-9"]
    assert server.state.encodings == ["identity", "identity"]  # the archive's sha256 is of the bytes as stored


def test_the_etag_is_the_servers_else_the_sha256_of_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_bytes(b"{}")
    with serve(tmp_path) as plain, serve(tmp_path, ServerState(etag='"v7"')) as tagged:
        untagged = HttpStore(plain.url).get_bytes("index.json")
        assert untagged is not None and untagged.etag == sha256_bytes(b"{}")
        assert HttpStore(tagged.url).get_bytes("index.json") == Blob(b"{}", '"v7"')


@pytest.mark.parametrize(
    ("status", "fix"),
    [
        (401, "lets this machine read it"),
        (403, "lets this machine read it"),
        (500, "the server is running and reachable"),
        (400, "the server is running and reachable"),
    ],
)
def test_an_error_status_says_what_to_check(tmp_path: Path, status: int, fix: str) -> None:
    with serve(tmp_path, ServerState(status=status)) as running, pytest.raises(StoreError) as raised:
        HttpStore(running.url).get_bytes("boxes/demo/index.json")
    assert f"GET {running.url}/boxes/demo/index.json failed: HTTP {status}" in raised.value.message
    assert fix in (raised.value.fix or "")


def test_a_206_for_other_bytes_than_asked_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with serve(tmp_path, ServerState(range_shift=1)) as running:
        with pytest.raises(StoreError, match="Range support is broken") as raised:
            read_all(HttpStore(running.url), "f", 10)
        assert "bytes 11-" in raised.value.message and not isinstance(raised.value, RangeNotSupportedError)
        assert read_all(HttpStore(running.url), "f") == (len(DATA), DATA)  # a whole read asks for no range


def test_the_whole_size_of_a_200_is_its_content_length_when_it_is_a_number(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    with serve(tmp_path, ServerState(length_header="three")) as running:
        assert read_all(HttpStore(running.url), "f") == (None, b"abc")
    with serve(tmp_path) as running:
        assert read_all(HttpStore(running.url), "f") == (3, b"abc")


def test_a_206_that_starts_before_the_asked_offset_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with serve(tmp_path, ServerState(range_shift=-1)) as running, pytest.raises(StoreError, match="Range support"):
        read_all(HttpStore(running.url), "f", 10)


def test_the_default_timeout_is_the_15_s_of_the_s3_store() -> None:
    """docs/install.md: every HTTP request has a 15 s timeout, the S3 store's read timeout."""
    from scrollcase.store.s3rules import READ_TIMEOUT

    assert HttpStore("http://127.0.0.1:1").timeout == READ_TIMEOUT == 15.0


def test_a_failure_is_told_by_its_message_else_by_its_kind() -> None:
    from scrollcase.store.http import _why

    assert _why(OSError("name or service not known"), 15.0) == "name or service not known"
    assert _why(OSError(), 15.0) == "OSError"


def test_a_range_read_stops_at_its_length_whatever_the_server_sends(tmp_path: Path) -> None:
    """#32 item 1: a 206 with the right Content-Range, then zeros without end: refused at the range's end."""
    (tmp_path / "blob").write_bytes(bytes(range(256)) * 64)
    state = HostileState(attacks={"blob": Flood(ranged_only=True)})
    with serve_hostile(tmp_path, state) as running, HttpStore(running.url).read_from("blob", 100, 1000) as stream:
        taken = 0
        with pytest.raises(IntegrityError) as refused:
            for chunk in stream.chunks:
                taken += len(chunk)
    assert taken <= 1000
    assert refused.value.message.startswith(f"refusing {running.url}/blob: the store sent more than the 1000 bytes")
    assert "bytes=100-1099" in refused.value.message


def test_a_206_claiming_more_than_the_asked_range_is_refused_before_its_body(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(bytes(4096))
    state = HostileState(attacks={"blob": Flood(ranged_only=True, extra_range=10)})
    with serve_hostile(tmp_path, state) as running, pytest.raises(IntegrityError) as refused:  # noqa: SIM117
        with HttpStore(running.url).read_from("blob", 0, 100):
            pytest.fail("the refusal comes before the body is handed over")
    assert "asked for bytes 0-99, the server answers with Content-Range 'bytes 0-109/4096'" in refused.value.message
