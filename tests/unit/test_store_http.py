"""The read-only HTTP store against a real static server on 127.0.0.1 (a thread of this process):
URLs, Range requests, and every failure as a StoreError naming the URL."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.errors import StoreError, UsageError
from scrollcase.store.base import RangeNotSupportedError, parse_content_range
from scrollcase.store.factory import open_read_store
from scrollcase.store.http import HttpStore, check_base_url
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
    ("header", "parsed"),
    [
        ("bytes 100-999/1000", (100, 999, 1000)),
        ("bytes 0-0/*", (0, 0, None)),
        (" bytes 5-9/10 ", (5, 9, 10)),
        ("bytes */1000", None),
        ("items 1-2/3", None),
        (None, None),
    ],
)
def test_parse_content_range(header: str | None, parsed: tuple[int, int, int | None] | None) -> None:
    assert parse_content_range(header) == parsed


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
