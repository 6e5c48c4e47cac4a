"""Assets against a real HTTP server on 127.0.0.1 (with Range support) and real file:// URLs."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scrollcase.box import assets
from scrollcase.errors import BuildError, IntegrityError
from scrollcase.recipe.model import Asset

DATA = bytes(range(256)) * 4000  # ~1 MB


class RangeHandler(BaseHTTPRequestHandler):
    """Serves DATA at any path; honours ``Range: bytes=N-``; can cut the first response short."""

    cut_after: int | None = None
    ranges: list[str | None] = []

    def do_GET(self) -> None:
        type(self).ranges.append(self.headers.get("Range"))
        if self.path.endswith("/missing"):
            self.send_error(404)
            return
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            if start >= len(DATA):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")
        else:
            self.send_response(200)
        body = DATA[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = type(self).cut_after
        if cut is not None:
            type(self).cut_after = None
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.connection.shutdown(2)  # the transfer breaks mid-body
            return
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    RangeHandler.cut_after, RangeHandler.ranges = None, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/boxes"
    httpd.shutdown()
    httpd.server_close()


def source(url: str, data: bytes = DATA) -> assets.AssetSource:
    return assets.AssetSource("w", url, "model-cache/m/w.bin", hashlib.sha256(data).hexdigest(), len(data))


def test_asset_urls_are_joined_and_quoted() -> None:
    a = Asset(name="w", path="dir/my weights.bin", sha256="0" * 64, size=1)
    [planned] = assets.plan_assets("https://x.org/boxes/", "model-cache/m", [a])
    assert planned.url == "https://x.org/boxes/dir/my%20weights.bin"
    assert planned.box_path == "model-cache/m/dir/my weights.bin"
    [bundled] = assets.release_assets([planned], [a], bundled=True)
    [remote] = assets.release_assets([planned], [a], bundled=False)
    assert bundled.url is None and remote.url == planned.url and not remote.bundled


def test_http_download_verifies_and_caches(server: str, tmp_path: Path) -> None:
    got = assets.fetch_asset(source(f"{server}/w.bin"), tmp_path, assets.default_fetchers())
    assert got.read_bytes() == DATA and got.name == hashlib.sha256(DATA).hexdigest()
    assets.fetch_asset(source(f"{server}/w.bin"), tmp_path, assets.default_fetchers())
    assert RangeHandler.ranges == [None]  # second call served from the cache


def test_interrupted_http_download_resumes_with_range(server: str, tmp_path: Path) -> None:
    RangeHandler.cut_after = 300_000
    src = source(f"{server}/w.bin")
    with pytest.raises(BuildError, match="interrupted") as caught:
        assets.fetch_asset(src, tmp_path, assets.default_fetchers())
    assert "rerun" in (caught.value.problems[0].fix or "")
    part = tmp_path / f"{src.sha256}.part"
    assert part.stat().st_size == 300_000
    got = assets.fetch_asset(src, tmp_path, assets.default_fetchers())
    assert got.read_bytes() == DATA and not part.exists()
    assert RangeHandler.ranges == [None, "bytes=300000-"]


def test_wrong_digest_is_an_integrity_error_and_drops_the_part(server: str, tmp_path: Path) -> None:
    bad = assets.AssetSource("w", f"{server}/w.bin", "x", "f" * 64, len(DATA))
    with pytest.raises(IntegrityError) as caught:
        assets.fetch_asset(bad, tmp_path, assets.default_fetchers())
    assert caught.value.exit_code == 8 and "sha256" in caught.value.render()
    assert list(tmp_path.iterdir()) == []


def test_wrong_size_is_an_integrity_error(server: str, tmp_path: Path) -> None:
    bad = assets.AssetSource("w", f"{server}/w.bin", "x", hashlib.sha256(DATA).hexdigest(), len(DATA) - 1)
    with pytest.raises(IntegrityError, match="does not match"):
        assets.fetch_asset(bad, tmp_path, assets.default_fetchers())


def test_http_error_names_the_url(server: str, tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        assets.fetch_asset(source(f"{server}/missing"), tmp_path, assets.default_fetchers())
    assert "404" in caught.value.render() and "/missing" in caught.value.render()


def test_file_url_with_resume_and_placement(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "w.bin").write_bytes(DATA)
    src = source((store / "w.bin").as_uri())
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"{src.sha256}.part").write_bytes(DATA[:1000])  # an earlier, broken run
    box = tmp_path / "box"
    [placed] = assets.place_assets([src], cache, assets.default_fetchers(), box)
    assert placed == box / "model-cache/m/w.bin" and placed.read_bytes() == DATA


def test_unknown_scheme_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="s3") as caught:
        assets.fetch_asset(source("s3://bucket/w.bin"), tmp_path, assets.default_fetchers())
    assert caught.value.problems[0].fix


def test_source_shorter_than_recipe_says_is_an_integrity_error(server: str, tmp_path: Path) -> None:
    """The server has nothing past its end (416 on resume): retrying cannot help."""
    short = assets.AssetSource("w", f"{server}/w.bin", "x", hashlib.sha256(DATA + b"!").hexdigest(), len(DATA) + 1)
    with pytest.raises(BuildError, match="interrupted"):
        assets.fetch_asset(short, tmp_path, assets.default_fetchers())
    with pytest.raises(IntegrityError, match="does not match"):
        assets.fetch_asset(short, tmp_path, assets.default_fetchers())
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def s3_client() -> Iterator[object]:
    """A real S3 API (moto's server) on 127.0.0.1 and a boto3 client for it."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket="models")
    client.put_object(Bucket="models", Key="boxes/w 1.bin", Body=DATA)
    yield client
    server.stop()


def test_s3_asset_with_resume_through_an_injected_client(s3_client: object, tmp_path: Path) -> None:
    [src] = assets.plan_assets(
        "s3://models/boxes",
        "model-cache/m",
        [Asset(name="w", path="w 1.bin", sha256=hashlib.sha256(DATA).hexdigest(), size=len(DATA))],
    )
    (tmp_path / f"{src.sha256}.part").write_bytes(DATA[:5000])
    ranges: list[str] = []

    def record(request: Any, **_: Any) -> None:
        value = request.headers.get("Range")
        ranges.append(value.decode() if isinstance(value, bytes) else str(value))

    s3_client.meta.events.register("before-send.s3.GetObject", record)  # type: ignore[attr-defined]
    got = assets.fetch_asset(src, tmp_path, assets.default_fetchers(s3_client))
    assert got.read_bytes() == DATA
    assert ranges == ["bytes=5000-"]  # one GET, for the missing bytes only
