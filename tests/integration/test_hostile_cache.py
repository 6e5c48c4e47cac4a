"""The host client against a hostile disk (#32 item 10): a download cache and a frame cache on a real full
file system (a tmpfs of a few MB, tests/support/smalldisk.py) give exit 5 naming the file, keep what was
written, and a rerun once there is room completes.  The releases are test_upgrade_cli's (two framed
releases of 8 x 1 MB incompressible wheels), published to a directory store."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.integration.test_upgrade_cli import install_old, installed_state, make_release, run_cli
from tests.support.releases import SyntheticRelease
from tests.support.smalldisk import resize, small_disk, used

BOX = "framed-box"
MB = 1 << 20


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticRelease]:
    work = tmp_path_factory.mktemp("full-disk-releases")
    return {v: make_release(work, v) for v in ("1.0.0", "1.0.1")}


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory, releases: dict[str, SyntheticRelease]) -> str:
    """A directory store: the disk is what is on trial, and no server sees a client hang up mid-body."""
    root = tmp_path_factory.mktemp("full-disk-store") / "store"
    for release in releases.values():
        publish(LocalStore(root), release.manifest, release.archive_path)
    return str(root)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_")) or k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, error, err = run_cli(capsys, *argv)
    assert code == 5, err
    assert error["error"] == "BuildError" and "No space left on device" in error["message"], error
    assert error["problems"][0]["value"] == errno.errorcode[errno.ENOSPC]
    return dict(error)


def test_a_full_download_cache_is_exit_5_naming_the_file_and_a_rerun_resumes(
    releases: dict[str, SyntheticRelease],
    store_url: str,
    host: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    archive = releases["1.0.0"].manifest.archive
    assert archive.size > 6 * MB
    with small_disk(host / "small", 2 * MB) as disk:
        monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(disk))
        install = ("install", "--store", store_url, "--box", BOX, "--version", "1.0.0", str(host / "box"))
        done = subprocess.run(  # the exit code a host sees: the real entry point in its own process
            [sys.executable, "-m", "scrollcase", "install", "--json", *install[1:]],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert done.returncode == 5 and "Traceback" not in done.stderr, done.stderr
        error = json.loads(done.stdout)
        assert error["error"] == "BuildError" and "No space left on device" in error["message"]
        partial = disk / "downloads" / f"{archive.sha256}.tar.zst.part"
        assert f"cannot write {partial} (the download cache)" in error["message"]
        assert "SCROLLCASE_CACHE_DIR" in error["fix"] and str(archive.size) in error["fix"]
        kept = partial.stat().st_size
        assert 0 < kept < archive.size and not (host / "box").exists()
        resize(disk, 64 * MB)  # room made: the rerun fetches only the rest
        code, result, err = run_cli(capsys, *install)
        assert code == 0, err
        assert result["resumedFrom"] == kept and result["bytesDownloaded"] == archive.size - kept
        assert installed_state(host / "box")[0] == "1.0.0"


def test_a_full_frame_cache_is_exit_5_naming_the_entry_and_dest_is_unchanged(
    store_url: str, host: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = host / "box"
    install_old(capsys, store_url, dest)
    before = installed_state(dest)
    with small_disk(host / "small", 64 * MB) as disk:
        shutil.copytree(host / "cache" / "frames", disk / "frames")  # 1.0.0's frames and DEST's pin
        resize(disk, used(disk))  # full: not a page more for 1.0.1's new frames
        monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(disk))
        error = refused(capsys, "upgrade", "--store", store_url, str(dest))
        assert f"cannot write {disk / 'frames'}" in error["message"] and "(the frame cache)" in error["message"]
        assert installed_state(dest) == before
        resize(disk, 64 * MB)
        code, result, err = run_cli(capsys, "upgrade", "--store", store_url, str(dest))
        assert code == 0, err
        assert result["to"] == "1.0.1" and installed_state(dest)[0] == "1.0.1"
