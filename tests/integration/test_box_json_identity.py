"""box.json must exist, parse and agree with the release manifest before anything is made visible (#32 items 6
and 7), through the real CLI in a subprocess (the exit code is the contract).  The store is a real directory
store whose archive was swapped for a crafted one after publishing (publish itself refuses these), its release
manifest, sidecar and index entry rewritten to name the new bytes, as a hostile or broken publisher would."""

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

from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.release import dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.releases import SyntheticRelease, box_json_for, write_release

ROOT = Path(__file__).resolve().parents[2]
BOX = "demo-box"


def scrollcase(cwd: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    """``python -m scrollcase ARGV --json`` with its own cache and no proxies: (exit code, the JSON)."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("AWS_")}
    env |= {"SCROLLCASE_CACHE_DIR": str(cwd / "cache"), "PYTHONPATH": str(ROOT), "PATH": str(cwd)}
    run = subprocess.run(
        [sys.executable, "-m", "scrollcase", *argv, "--json"], cwd=cwd, env=env, capture_output=True, timeout=120
    )
    assert "Traceback" not in run.stderr.decode(), run.stderr.decode()
    return run.returncode, json.loads(run.stdout)


def archive_of(members: dict[str, bytes]) -> bytes:
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as packing:
        for name, data in members.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            packing.addfile(member, io.BytesIO(data))
    return zstandard.ZstdCompressor().compress(tar.getvalue())


def swap_archive(store: Path, release: SyntheticRelease, archive: bytes) -> None:
    """The published release's archive replaced by ``archive``; its manifest, sidecar and index entry follow."""
    manifest = release.manifest
    info = manifest.archive.model_copy(update={"size": len(archive), "sha256": sha256_bytes(archive)})
    data = dump_release(manifest.model_copy(update={"archive": info}))
    (store / manifest.keys.archive).write_bytes(archive)
    (store / manifest.keys.release).write_bytes(data)
    (store / f"{manifest.keys.archive}.sha256").write_text(f"{info.sha256}  {info.name}\n")
    index_path = store / "boxes" / BOX / "index.json"
    index = json.loads(index_path.read_text())
    entry = index["versions"][manifest.version][manifest.targetId]
    entry |= {"sha256": info.sha256, "size": info.size, "releaseSha256": sha256_bytes(data)}
    index_path.write_text(json.dumps(index, indent=2))


@pytest.fixture
def release(tmp_path: Path) -> SyntheticRelease:
    return write_release(tmp_path / "dist", size=4096, box_id=BOX, cuda=None)


@pytest.fixture
def store(tmp_path: Path, release: SyntheticRelease) -> Path:
    root = tmp_path / "store"
    publish(LocalStore(root), release.manifest, release.archive_path)
    return root


def another_box(release: SyntheticRelease) -> bytes:
    """box.json naming another box and a CUDA target, plus one field this scrollcase does not know."""
    box = json.loads(dump_box_json(box_json_for(release.manifest)))
    box |= {"boxId": "other-box", "targetId": "linux-x86_64-cuda12.4", "futureField": True}
    box["target"] |= {"accelerator": "cuda", "cudaVersion": "12.4"}
    return json.dumps(box).encode()


def test_a_box_json_naming_another_box_with_an_unknown_field_is_refused(
    tmp_path: Path, store: Path, release: SyntheticRelease
) -> None:
    """Item 6: before, box.json failed to parse (the unknown field), check_identity skipped it, exit 0."""
    swap_archive(store, release, archive_of({"box.json": another_box(release), "payload.bin": b"x" * 100}))
    code, error = scrollcase(tmp_path, "install", "--store", str(store), "--box", BOX, "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert "box.json" in error["message"] and "futureField" in json.dumps(error["problems"])
    assert not (tmp_path / "box").exists()


@pytest.mark.parametrize(
    ("box_json", "said"),
    [
        (b"not json {", "is not valid JSON"),
        (b'{"schemaVersion": 99}', "schemaVersion"),
        (b"{}", "does not describe a box"),
    ],
)
def test_an_unparsable_box_json_is_refused_not_skipped(
    tmp_path: Path, store: Path, release: SyntheticRelease, box_json: bytes, said: str
) -> None:
    swap_archive(store, release, archive_of({"box.json": box_json, "payload.bin": b"x" * 100}))
    code, error = scrollcase(tmp_path, "install", "--store", str(store), "--box", BOX, "box")
    assert code == 8 and error["error"] in ("IntegrityError", "NewerFormatError"), error
    assert "box.json" in error["message"] and said in json.dumps(error)
    assert not (tmp_path / "box").exists()


def test_an_archive_without_box_json_is_refused_at_install(
    tmp_path: Path, store: Path, release: SyntheticRelease
) -> None:
    """Item 7: before, it installed with exit 0 (and verify --installed and upgrade then rejected it)."""
    swap_archive(store, release, archive_of({"payload.bin": b"x" * 100, "venv/bin/python": b"#!/bin/sh\n"}))
    code, error = scrollcase(tmp_path, "install", "--store", str(store), "--box", BOX, "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert "has no box.json at its root" in error["message"]
    assert not (tmp_path / "box").exists()


def test_unpack_refuses_an_archive_without_box_json(tmp_path: Path, store: Path, release: SyntheticRelease) -> None:
    swap_archive(store, release, archive_of({"payload.bin": b"x" * 100}))
    manifest = store / release.manifest.keys.release
    code, error = scrollcase(tmp_path, "unpack", str(manifest), "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert "has no box.json at its root" in error["message"]
    assert not (tmp_path / "box").exists()


def test_a_wrong_archive_digest_still_outranks_a_bad_box_json(
    tmp_path: Path, store: Path, release: SyntheticRelease
) -> None:
    """unpack reads box.json before it hashes the archive: an archive of the right size with other bytes is
    reported as the wrong sha256 it is, not as its (then meaningless) box.json."""
    swap_archive(store, release, archive_of({"payload.bin": b"x" * 100}))
    archive = store / release.manifest.keys.archive
    archive.write_bytes(archive_of({"payload.bin": b"y" * 100}))  # same size, other bytes
    code, error = scrollcase(tmp_path, "unpack", str(store / release.manifest.keys.release), "box")
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert "sha256 is" in error["message"], error
    assert not (tmp_path / "box").exists()
