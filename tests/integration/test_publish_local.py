"""Publishing to the directory store: ordering, idempotence and concurrent publishers (threads and
processes) sharing one index."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from scrollcase.errors import ConflictError, IntegrityError
from scrollcase.store.base import FileUpload
from scrollcase.store.index import parse_index
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.releases import SyntheticRelease, write_release

REPO = Path(__file__).resolve().parents[2]


def index_of(store: Path) -> dict[str, list[str]]:
    index = parse_index((store / "boxes/demo-box/index.json").read_bytes(), "index.json")
    return {version: sorted(targets) for version, targets in index.versions.items()}


def test_publish_then_republish_then_conflict(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    release = write_release(tmp_path / "dist", size=300_000)
    lines: list[str] = []
    first = publish(store, release.manifest, release.archive_path, progress=lines.append)
    assert len(first.uploaded) == 3 and first.index_written
    assert any("100%" in line for line in lines)
    again = publish(store, release.manifest, release.archive_path)
    assert again.uploaded == () and not again.index_written
    rebuilt = write_release(tmp_path / "rebuilt", size=300_000)
    with pytest.raises(ConflictError):
        publish(store, rebuilt.manifest, rebuilt.archive_path)
    published = tmp_path / "store" / release.manifest.keys.archive
    assert published.read_bytes() == release.archive_path.read_bytes()


def test_interrupted_publish_is_completed_by_a_rerun(tmp_path: Path) -> None:
    """Archive present without manifest (as a crash after the first upload leaves it): rerun completes."""
    root = tmp_path / "store"
    release = write_release(tmp_path / "dist")
    store = LocalStore(root)
    store.put_file(
        release.manifest.keys.archive,
        FileUpload(release.archive_path, release.manifest.archive.size, release.manifest.archive.sha256),
    )
    result = publish(store, release.manifest, release.archive_path)
    assert list(result.uploaded) == [release.manifest.keys.sha256, release.manifest.keys.release]
    assert [u.action for u in result.plan.uploads] == ["skip", "upload", "upload"]


def test_threads_publishing_different_targets_and_the_same_release(tmp_path: Path) -> None:
    root = tmp_path / "store"
    releases = [
        write_release(tmp_path / "cpu", cuda=None),
        write_release(tmp_path / "cu124", cuda="12.4"),
        write_release(tmp_path / "cu128", cuda="12.8"),
        write_release(tmp_path / "v2", version="2.0.0"),
    ]
    work: list[SyntheticRelease] = releases + releases  # every release twice, at the same time
    barrier = threading.Barrier(len(work))
    errors: list[BaseException] = []

    def run(release: SyntheticRelease) -> None:
        barrier.wait()
        try:
            publish(LocalStore(root), release.manifest, release.archive_path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert index_of(root) == {
        "1.0.0": ["linux-x86_64-cpu", "linux-x86_64-cuda12.4", "linux-x86_64-cuda12.8"],
        "2.0.0": ["linux-x86_64-cuda12.4"],
    }
    assert not list(root.rglob("*.tmp")) and not list(root.rglob("*.lock"))


def test_processes_publishing_different_targets_share_the_index(tmp_path: Path) -> None:
    root = tmp_path / "store"
    releases = [
        write_release(tmp_path / name, cuda=cuda)
        for name, cuda in (("cpu", None), ("cu118", "11.8"), ("cu124", "12.4"), ("cu128", "12.8"))
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "scrollcase", "publish", str(r.manifest_path), "--to", str(root), "--quiet"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for r in releases
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    assert index_of(root) == {
        "1.0.0": ["linux-x86_64-cpu", "linux-x86_64-cuda11.8", "linux-x86_64-cuda12.4", "linux-x86_64-cuda12.8"]
    }


SBOM = b'{"bomFormat": "CycloneDX", "specVersion": "1.6"}\n'


def test_the_sbom_is_published_before_the_manifest_and_republished_as_a_no_op(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    release = write_release(tmp_path / "dist", sbom=SBOM)
    assert release.manifest.sbom is not None
    result = publish(store, release.manifest, release.archive_path)
    sbom_key = release.manifest.keys.release.rsplit("/", 1)[0] + "/" + release.manifest.sbom.name
    assert [u.kind for u in result.plan.uploads] == ["archive", "sha256", "sbom", "release"]
    assert list(result.uploaded)[2:] == [sbom_key, release.manifest.keys.release]
    assert (tmp_path / "store" / sbom_key).read_bytes() == SBOM
    assert publish(store, release.manifest, release.archive_path).uploaded == ()


@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_an_sbom_that_is_not_the_manifests_is_refused_before_any_upload(tmp_path: Path, damage: str) -> None:
    release = write_release(tmp_path / "dist", sbom=SBOM)
    assert release.manifest.sbom is not None
    sbom = tmp_path / "dist" / release.manifest.sbom.name
    if damage == "changed":
        sbom.write_bytes(SBOM.replace(b"1.6", b"1.5"))
    else:
        sbom.unlink()
    with pytest.raises(IntegrityError, match="SBOM" if damage == "missing" else "sha256"):
        publish(LocalStore(tmp_path / "store"), release.manifest, release.archive_path)
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.*"))
