"""Assets against a real HTTP server on 127.0.0.1 (with Range support) and real file:// URLs."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from scrollcase.build import assets
from scrollcase.errors import BuildError, IntegrityError, Problem
from scrollcase.github import paths, report
from scrollcase.io import fetch
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
    got = assets.fetch_asset(source(f"{server}/w.bin"), tmp_path, fetch.default_fetchers())
    assert got.read_bytes() == DATA and got.name == hashlib.sha256(DATA).hexdigest()
    assets.fetch_asset(source(f"{server}/w.bin"), tmp_path, fetch.default_fetchers())
    assert RangeHandler.ranges == [None]  # second call served from the cache


def test_interrupted_http_download_resumes_with_range(server: str, tmp_path: Path) -> None:
    RangeHandler.cut_after = 300_000
    src = source(f"{server}/w.bin")
    with pytest.raises(BuildError, match="interrupted") as caught:
        assets.fetch_asset(src, tmp_path, fetch.default_fetchers())
    assert "rerun" in (caught.value.problems[0].fix or "")
    part = tmp_path / f"{src.sha256}.part"
    assert part.stat().st_size == 300_000
    got = assets.fetch_asset(src, tmp_path, fetch.default_fetchers())
    assert got.read_bytes() == DATA and not part.exists()
    assert RangeHandler.ranges == [None, "bytes=300000-"]


def test_wrong_digest_is_an_integrity_error_and_drops_the_part(server: str, tmp_path: Path) -> None:
    bad = assets.AssetSource("w", f"{server}/w.bin", "x", "f" * 64, len(DATA))
    with pytest.raises(IntegrityError) as caught:
        assets.fetch_asset(bad, tmp_path, fetch.default_fetchers())
    assert caught.value.exit_code == 8 and "sha256" in caught.value.render()
    assert list(tmp_path.iterdir()) == []


def test_wrong_size_is_an_integrity_error(server: str, tmp_path: Path) -> None:
    bad = assets.AssetSource("w", f"{server}/w.bin", "x", hashlib.sha256(DATA).hexdigest(), len(DATA) - 1)
    with pytest.raises(IntegrityError, match="does not match"):
        assets.fetch_asset(bad, tmp_path, fetch.default_fetchers())


def test_http_error_names_the_url(server: str, tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        assets.fetch_asset(source(f"{server}/missing"), tmp_path, fetch.default_fetchers())
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
    [placed] = assets.place_assets([src], cache, fetch.default_fetchers(), box)
    assert placed == box / "model-cache/m/w.bin" and placed.read_bytes() == DATA


def test_unknown_scheme_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="s3") as caught:
        assets.fetch_asset(source("s3://bucket/w.bin"), tmp_path, fetch.default_fetchers())
    assert caught.value.problems[0].fix


def test_source_shorter_than_recipe_says_is_an_integrity_error(server: str, tmp_path: Path) -> None:
    """The server says how big the file is: a short file is a size mismatch on the first run, never
    "interrupted … rerun the build"."""
    short = assets.AssetSource("w", f"{server}/w.bin", "x", hashlib.sha256(DATA + b"!").hexdigest(), len(DATA) + 1)
    with pytest.raises(IntegrityError, match="does not match its size") as caught:
        assets.fetch_asset(short, tmp_path, fetch.default_fetchers())
    assert f"is {len(DATA)} bytes" in caught.value.render()
    assert list(tmp_path.iterdir()) == []


# --- asset problems located in recipe.json -----------------------------------------------------------


def recipe_sources(tmp_path: Path, base_url: str, declared: list[tuple[str, bytes, int]]) -> list[assets.AssetSource]:
    """A recipe.json (written as people do: one key per line) declaring (path, digest-of, size) assets,
    and the sources the build plans from it."""
    entries = [
        Asset(name=f"a{i}", path=path, sha256=hashlib.sha256(data).hexdigest(), size=size)
        for i, (path, data, size) in enumerate(declared)
    ]
    recipe = tmp_path / "recipes" / "m" / "recipe.json"
    recipe.parent.mkdir(parents=True)
    body = {"recipeId": "m", "assetBaseUrl": base_url, "assets": [e.model_dump() for e in entries]}
    recipe.write_text(json.dumps(body, indent=2) + "\n")
    return assets.plan_assets(base_url, "model-cache/m", entries, recipe)


def line_of(recipe: Path, index: int, field: str) -> int:
    """The 1-based line of the ``index``-th occurrence of ``"field":`` in recipe.json."""
    lines = [n for n, text in enumerate(recipe.read_text().splitlines(), 1) if f'"{field}":' in text]
    return lines[index]


def only_problem(error: BaseException) -> Problem:
    assert isinstance(error, IntegrityError | BuildError)
    [problem] = error.problems
    return problem


@pytest.fixture
def store(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "w.bin").write_bytes(DATA)
    (folder / "other.bin").write_bytes(DATA)
    return folder


@pytest.mark.parametrize("declared", [len(DATA) - 1, len(DATA) + 1, 10, 10 * len(DATA)])
@pytest.mark.parametrize("transport", ["file", "http"])
def test_a_wrong_size_is_named_at_its_recipe_line_on_the_first_run(
    transport: str, declared: int, store: Path, server: str, tmp_path: Path
) -> None:
    base = store.as_uri() if transport == "file" else server
    [_, src] = recipe_sources(tmp_path, base, [("other.bin", DATA, len(DATA)), ("w.bin", DATA, declared)])
    cache = tmp_path / "cache"
    with pytest.raises(IntegrityError, match=r"does not match its size in recipe\.json") as caught:
        assets.fetch_asset(src, cache, fetch.default_fetchers())
    problem = only_problem(caught.value)
    assert problem.file is not None and problem.file.endswith("recipes/m/recipe.json")
    assert problem.line == line_of(tmp_path / "recipes/m/recipe.json", 1, "size")
    assert problem.key == "assets[1].size"
    assert f"is {len(DATA)} bytes, not the {declared}" in problem.message
    assert f'"size": {len(DATA)}' in (problem.fix or "")
    assert list(cache.iterdir()) == []  # nothing kept to resume: the file is another one


def test_a_file_longer_than_declared_is_not_read_past_the_declared_size(store: Path, tmp_path: Path) -> None:
    """A source that says nothing of its size (a custom transport) is cut off at recipe.json's size."""
    [src] = recipe_sources(tmp_path, store.as_uri(), [("w.bin", DATA, 1000)])
    written: list[int] = []

    def quiet(url: str, out: BinaryIO, offset: int) -> None:
        for start in range(offset, len(DATA), 100):
            written.append(out.write(DATA[start : start + 100]))

    with pytest.raises(IntegrityError, match="size") as caught:
        assets.fetch_asset(src, tmp_path / "cache", {"file": quiet})
    assert sum(written) == 1000 and "more than 1000 bytes" in only_problem(caught.value).message


@pytest.mark.parametrize("transport", ["file", "http"])
def test_a_wrong_digest_is_named_at_its_sha256_line(transport: str, store: Path, server: str, tmp_path: Path) -> None:
    base = store.as_uri() if transport == "file" else server
    [src] = recipe_sources(tmp_path, base, [("w.bin", DATA[::-1], len(DATA))])
    with pytest.raises(IntegrityError, match=r"sha256 in recipe\.json") as caught:
        assets.fetch_asset(src, tmp_path / "cache", fetch.default_fetchers())
    problem = only_problem(caught.value)
    assert problem.line == line_of(tmp_path / "recipes/m/recipe.json", 0, "sha256")
    assert problem.key == "assets[0].sha256"
    assert f'"sha256": "{hashlib.sha256(DATA).hexdigest()}"' in (problem.fix or "")


def test_a_missing_asset_is_named_at_its_path_line(server: str, tmp_path: Path) -> None:
    [src] = recipe_sources(tmp_path, server, [("missing", DATA, len(DATA))])
    with pytest.raises(BuildError) as caught:
        assets.fetch_asset(src, tmp_path / "cache", fetch.default_fetchers())
    problem = only_problem(caught.value)
    assert "404" in problem.message and problem.key == "assets[0].path"
    assert problem.line == line_of(tmp_path / "recipes/m/recipe.json", 0, "path")


def test_a_broken_transfer_stays_interrupted_and_resumes(server: str, tmp_path: Path) -> None:
    """The server said the declared size and sent less: the network's fault, so the part is kept."""
    RangeHandler.cut_after = 300_000
    [src] = recipe_sources(tmp_path, server, [("w.bin", DATA, len(DATA))])
    with pytest.raises(BuildError, match="interrupted") as caught:
        assets.fetch_asset(src, tmp_path / "cache", fetch.default_fetchers())
    assert only_problem(caught.value).file is not None
    assert assets.fetch_asset(src, tmp_path / "cache", fetch.default_fetchers()).read_bytes() == DATA


def test_asset_problems_annotate_recipe_json_lines_on_github(store: Path, tmp_path: Path) -> None:
    [src] = recipe_sources(tmp_path, store.as_uri(), [("w.bin", DATA, 5)])
    with pytest.raises(IntegrityError) as caught:
        assets.fetch_asset(src, tmp_path / "cache", fetch.default_fetchers())
    [problem] = paths.located(caught.value.problems, root=tmp_path)
    text = report.annotation(problem)
    line = line_of(tmp_path / "recipes/m/recipe.json", 0, "size")
    assert text.startswith(f"::error file=recipes/m/recipe.json,line={line},")


def test_size_from_headers() -> None:
    assert fetch.full_size("bytes 10-19/20", "10", 10) == 20
    assert fetch.full_size("bytes 10-19/*", "10", 10) is None
    assert fetch.full_size(None, "30", 0) == 30
    assert fetch.full_size(None, None, 0) is None


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
    got = assets.fetch_asset(src, tmp_path, fetch.default_fetchers(s3_client))
    assert got.read_bytes() == DATA
    assert ranges == ["bytes=5000-"]  # one GET, for the missing bytes only


@pytest.mark.parametrize("declared", [len(DATA) - 1, len(DATA) + 1])
def test_a_wrong_size_over_s3_is_named_at_its_recipe_line(s3_client: object, tmp_path: Path, declared: int) -> None:
    [src] = recipe_sources(tmp_path, "s3://models/boxes", [("w 1.bin", DATA, declared)])
    with pytest.raises(IntegrityError) as caught:
        assets.fetch_asset(src, tmp_path / "cache", fetch.default_fetchers(s3_client))  # type: ignore[arg-type]
    problem = only_problem(caught.value)
    assert problem.line == line_of(tmp_path / "recipes/m/recipe.json", 0, "size")
    assert f"is {len(DATA)} bytes, not the {declared}" in problem.message
