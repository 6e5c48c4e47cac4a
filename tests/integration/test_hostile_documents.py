"""The client against hostile small documents (#32 items 2 and 3), through the real CLI in a subprocess (the
exit code is the contract): an index, a release manifest and a box.json nested 200,000 levels deep, and an
index larger than the documented 16 MiB, from a directory store and a static HTTP server on 127.0.0.1.
Each is refused as the document's own error (StoreError 9 for the store's index, IntegrityError 8 for a
release), naming the file or URL and the limit; never a RecursionError traceback (exit 70)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import zstandard

from scrollcase.format.release import dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import MAX_DOCUMENT_BYTES, MAX_JSON_DEPTH
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.httpstore import serve
from tests.support.releases import SyntheticRelease, make_manifest, write_release

ROOT = Path(__file__).resolve().parents[2]
BOX = "demo-box"
DEEP = b"[" * 200_000  # Python's json module raises RecursionError on it
TOO_DEEP = f"more than {MAX_JSON_DEPTH} levels deep"


def scrollcase(cwd: Path, *argv: str) -> tuple[int, dict[str, Any], str]:
    """``python -m scrollcase ARGV --json`` with its own cache and no proxies: (exit code, the JSON, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("AWS_")}
    env |= {"SCROLLCASE_CACHE_DIR": str(cwd / "cache"), "PYTHONPATH": str(ROOT), "PATH": str(cwd)}
    run = subprocess.run(
        [sys.executable, "-m", "scrollcase", *argv, "--json"], cwd=cwd, env=env, capture_output=True, timeout=120
    )
    err = run.stderr.decode()
    assert "Traceback" not in err and "RecursionError" not in err, err
    return run.returncode, json.loads(run.stdout), err


@pytest.fixture
def release(tmp_path: Path) -> SyntheticRelease:
    return write_release(tmp_path / "dist", size=4096, box_id=BOX, cuda=None)


@pytest.fixture
def store(tmp_path: Path, release: SyntheticRelease) -> Path:
    root = tmp_path / "store"
    publish(LocalStore(root), release.manifest, release.archive_path)
    return root


def index_path(store: Path) -> Path:
    return store / "boxes" / BOX / "index.json"


def test_an_index_nested_200000_deep_is_a_store_error_naming_its_url_and_the_limit(tmp_path: Path, store: Path) -> None:
    index_path(store).write_bytes(DEEP)
    with serve(store) as server:
        code, error, _ = scrollcase(tmp_path, "install", "--store", server.url, "--box", BOX, "box")
    assert (code, error["error"]) == (9, "StoreError"), error
    assert (
        error["message"].startswith(f"{server.url}/boxes/{BOX}/index.json nests JSON") and TOO_DEEP in error["message"]
    )
    assert not (tmp_path / "box").exists()


def test_a_release_manifest_nested_200000_deep_is_an_integrity_error(
    tmp_path: Path, store: Path, release: SyntheticRelease
) -> None:
    (store / release.manifest.keys.release).write_bytes(DEEP)
    code, error, _ = scrollcase(tmp_path, "install", "--store", str(store), "--box", BOX, "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert release.manifest.keys.release in error["message"] and TOO_DEEP in error["message"]
    assert not (tmp_path / "box").exists()


def test_a_box_json_nested_200000_deep_in_the_archive_is_refused_naming_it(tmp_path: Path) -> None:
    """check_identity reads box.json from the archive before extracting; unpack reads its relocation after."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as packing:
        member = tarfile.TarInfo("box.json")
        member.size = len(DEEP)
        packing.addfile(member, io.BytesIO(DEEP))
    archive = zstandard.ZstdCompressor().compress(tar.getvalue())
    draft = make_manifest(box_id=BOX, cuda=None, size=len(archive), sha256=sha256_bytes(archive))
    (tmp_path / draft.archive.name).write_bytes(archive)
    manifest = tmp_path / "box.release.json"
    manifest.write_bytes(dump_release(draft))
    code, error, _ = scrollcase(tmp_path, "unpack", str(manifest), "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert f"{draft.archive.name}!box.json nests JSON" in error["message"] and TOO_DEEP in error["message"]
    assert not (tmp_path / "box").exists()


@pytest.mark.parametrize("over", ["http", "directory"])
def test_an_index_larger_than_16_mib_is_refused_naming_the_limit(tmp_path: Path, store: Path, over: str) -> None:
    """A valid index, padded past the limit with whitespace: installs today, so only the size refuses it."""
    index = index_path(store)
    index.write_bytes(index.read_bytes() + b" " * MAX_DOCUMENT_BYTES)
    with serve(store) as server:
        url = server.url if over == "http" else str(store)
        code, error, _ = scrollcase(tmp_path, "install", "--store", url, "--box", BOX, "box")
    assert (code, error["error"]) == (9, "StoreError"), error
    assert "index.json" in error["message"] and str(MAX_DOCUMENT_BYTES) in error["message"]
    assert not (tmp_path / "box").exists()
