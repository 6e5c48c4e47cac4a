"""The client against a lying or stalling S3 API on 127.0.0.1 (#32 item 13): install and upgrade from ``s3://``
through boto3 against tests/support/hostilehttp.py serving a published store as a bucket (path-style GetObject
is a GET of ``/<bucket>/<key>``, answered with S3's headers) — endless bodies, a Content-Length far over the
document limit, endless bytes after a frame's correct 206, an index trickled a byte at a time, a server that
stops answering.  Each is refused as a StoreError (9) or IntegrityError (8) naming the ``s3://`` URL and the limit."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scrollcase import cli, install_box
from scrollcase.errors import StoreError
from scrollcase.io.documents import MAX_DOCUMENT_BYTES
from scrollcase.store.s3 import S3Store
from scrollcase.store.s3rules import client_config
from tests.support.framedreleases import BOX
from tests.support.hostilehttp import Flood, HostileState, Trickle, published_store, serve_hostile
from tests.support.releases import SyntheticRelease

BUCKET = "boxes-bucket"
MIB = 1 << 20


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, SyntheticRelease], Path]:
    return published_store(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def releases(published: tuple[dict[str, SyntheticRelease], Path]) -> dict[str, SyntheticRelease]:
    return published[0]


@pytest.fixture(scope="module")
def store_dir(published: tuple[dict[str, SyntheticRelease], Path]) -> Path:
    return published[1]


def cache_files(host: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (host / "cache").rglob("*") if p.is_file()}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_")) or k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def lying_s3(store_dir: Path, tmp_path: Path) -> Iterator[tuple[str, HostileState]]:
    """The store's files as the bucket's objects, with an ETag on each answer (GetObject's result has one)."""
    root = tmp_path / "s3root"
    shutil.copytree(store_dir, root / BUCKET)
    state = HostileState(etag='"0123456789abcdef"')
    with serve_hostile(root, state) as running:
        yield running.url, state


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = cli.main([argv[0], "--json", *argv[1:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, json.loads(out) if out.strip() else None


def s3_install(capsys: Any, endpoint: str, dest: Path, *options: str) -> tuple[int, Any]:
    store = ("--store", f"s3://{BUCKET}", "--endpoint-url", endpoint)
    return run_cli(capsys, "install", *store, "--box", BOX, *options, str(dest))


INDEX_URL = f"s3://{BUCKET}/boxes/{BOX}/index.json"


def test_an_endless_index_body_is_refused_at_the_document_limit(
    lying_s3: tuple[str, HostileState], host: Path, capsys: Any
) -> None:
    endpoint, state = lying_s3
    state.attacks["/index.json"] = Flood()
    code, error = s3_install(capsys, endpoint, host / "box")
    assert (code, error["error"]) == (9, "StoreError"), error
    assert error["message"].startswith(f"refusing {INDEX_URL}: more than {MAX_DOCUMENT_BYTES} bytes")
    assert sum(state.flooded.values()) < MAX_DOCUMENT_BYTES + 64 * MIB
    assert not (host / "box").exists()


def test_a_content_length_over_the_limit_is_refused_before_the_body(
    lying_s3: tuple[str, HostileState], host: Path, capsys: Any
) -> None:
    endpoint, state = lying_s3
    state.attacks["/index.json"] = Flood(length=300 * MIB)
    code, error = s3_install(capsys, endpoint, host / "box")
    assert (code, error["error"]) == (9, "StoreError"), error
    assert error["message"].startswith(f"refusing {INDEX_URL}: more than {MAX_DOCUMENT_BYTES} bytes")
    assert sum(state.flooded.values()) < 64 * MIB


def test_an_endless_archive_stops_at_its_declared_size(
    lying_s3: tuple[str, HostileState], host: Path, releases: dict[str, SyntheticRelease], capsys: Any
) -> None:
    endpoint, state = lying_s3
    state.attacks[".tar.zst"] = Flood()
    code, error = s3_install(capsys, endpoint, host / "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    size = releases["1.0.1"].manifest.archive.size
    assert f"s3://{BUCKET}/{releases['1.0.1'].manifest.keys.archive}" in error["message"]
    assert str(size) in error["message"]
    assert sum(state.flooded.values()) < size + 64 * MIB
    assert all(n <= size for n in cache_files(host).values())
    assert not (host / "box").exists()


def test_an_endless_frame_after_a_correct_206_stops_at_the_frames_size(
    lying_s3: tuple[str, HostileState], host: Path, releases: dict[str, SyntheticRelease], capsys: Any
) -> None:
    endpoint, state = lying_s3
    dest = host / "box"
    assert s3_install(capsys, endpoint, dest, "--version", "1.0.0")[0] == 0
    before = (dest / "box.json").read_bytes()
    state.attacks[".tar.zst"] = Flood(ranged_only=True)
    code, error = run_cli(capsys, "upgrade", "--store", f"s3://{BUCKET}", "--endpoint-url", endpoint, str(dest))
    assert (code, error["error"]) == (8, "IntegrityError"), error
    frames = {f.size for f in releases["1.0.1"].manifest.archive.frames or []}
    assert error["message"].startswith(f"refusing s3://{BUCKET}/{releases['1.0.1'].manifest.keys.archive}: ")
    assert any(f"more than the {size} bytes" in error["message"] for size in frames), error["message"]
    assert sum(state.flooded.values()) < 64 * MIB
    assert (dest / "box.json").read_bytes() == before
    assert all(size <= max(frames) for size in cache_files(host).values())


def client(endpoint: str, **config: Any) -> Any:
    return boto3.session.Session().client("s3", endpoint_url=endpoint, config=client_config(**config))


def test_a_trickled_index_fails_at_the_deadline(lying_s3: tuple[str, HostileState], host: Path) -> None:
    """One byte every 0.5 s never trips botocore's 15 s read timeout; the document's deadline (2 s here) does."""
    endpoint, state = lying_s3
    state.attacks["/index.json"] = Trickle(0.5)
    store = S3Store(client(endpoint), BUCKET, endpoint_url=endpoint, document_deadline=2)
    with pytest.raises(StoreError) as refused:
        install_box(store, BOX, host / "box")
    assert refused.value.message.startswith(f"refusing {INDEX_URL}: only ")
    assert "before the deadline of 2 s for a document" in refused.value.message
    assert state.flooded[f"/{BUCKET}/boxes/{BOX}/index.json"] < 20
    assert not (host / "box").exists()


def test_a_stalled_s3_api_is_a_store_error_naming_the_endpoint(lying_s3: tuple[str, HostileState], host: Path) -> None:
    """A server that accepts and never answers: the read timeout (1 s here, one try) names the endpoint."""
    endpoint, state = lying_s3
    state.hold = threading.Event()
    try:
        store = S3Store(client(endpoint, attempts=1, read_timeout=1), BUCKET, endpoint_url=endpoint)
        with pytest.raises(StoreError) as refused:
            install_box(store, BOX, host / "box")
    finally:
        state.hold.set()
    assert f"cannot reach the S3 endpoint {endpoint} (GET {INDEX_URL})" in refused.value.message
    assert not (host / "box").exists()
