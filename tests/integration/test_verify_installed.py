"""`scrollcase verify --installed` against a careless or hostile disk (#32 item 9), through the real CLI in a
subprocess: a box unpacked by `scrollcase unpack` whose modes change afterwards (a setuid bit on its
interpreter, an executable bit removed, a world-writable folder), and a box moved with `mv`, whose relocated
files still name the folder it was installed in.  Each is reported, in text and --json, with exit 8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.integration.test_install_cli import make_release
from tests.support.releases import SyntheticRelease

ROOT = Path(__file__).resolve().parents[2]
POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")


def scrollcase(cwd: Path, *argv: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCROLLCASE_")}
    env |= {"SCROLLCASE_CACHE_DIR": str(cwd / "cache"), "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "scrollcase", *argv], cwd=cwd, env=env, capture_output=True, timeout=120
    )
    out, err = run.stdout.decode(), run.stderr.decode()
    assert "Traceback" not in err, err
    return run.returncode, out, err


def verify_json(cwd: Path, dest: Path) -> tuple[int, dict[str, Any], str]:
    code, out, err = scrollcase(cwd, "verify", "--installed", str(dest), "--json")
    return code, json.loads(out), err


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRelease:
    return make_release(tmp_path_factory.mktemp("verify-installed"), "1.0.0")


@pytest.fixture
def installed(tmp_path: Path, release: SyntheticRelease) -> Path:
    code, _, err = scrollcase(tmp_path, "unpack", "--quiet", str(release.manifest_path), "box")
    assert code == 0, err
    dest = tmp_path / "box"
    code, report, err = verify_json(tmp_path, dest)
    assert code == 0 and report["passed"] and report["modesChecked"] and not report["moved"], (report, err)
    return dest


@POSIX_ONLY
def test_mode_changes_are_reported_with_the_mode_expected_and_found(tmp_path: Path, installed: Path) -> None:
    tool, payload, lib = installed / "venv" / "bin" / "tool", installed / "payload.bin", installed / "venv" / "lib"
    tool.chmod(0o4755)  # setuid on the box's interpreter-like script: its bytes are unchanged
    payload.chmod(0o755)  # an executable bit added
    lib.chmod(0o777)  # a folder anyone may write into
    code, report, _ = verify_json(tmp_path, installed)
    assert code == 8 and not report["passed"] and not report["moved"]
    assert report["changes"] == [
        {"path": "payload.bin", "change": "mode", "expected": "0644", "found": "0755"},
        {"path": "venv/bin/tool", "change": "mode", "expected": "0755", "found": "4755"},
        {"path": "venv/lib", "change": "mode", "expected": "0755", "found": "0777"},
    ]
    code, out, err = scrollcase(tmp_path, "verify", "--installed", str(installed))
    assert code == 8
    assert "mode     venv/bin/tool (0755 -> 4755)" in out and "3 changed since install" in out
    assert "3 file(s) of the box" in err
    tool.chmod(0o644)  # the executable bit removed
    payload.chmod(0o644)
    lib.chmod(0o755)
    _, report, _ = verify_json(tmp_path, installed)
    assert report["changes"] == [{"path": "venv/bin/tool", "change": "mode", "expected": "0755", "found": "0644"}]


def test_a_box_moved_with_mv_is_reported_with_the_fix(tmp_path: Path, installed: Path) -> None:
    moved = tmp_path / "elsewhere"
    installed.rename(moved)
    assert (moved / "venv" / "bin" / "tool").read_text() == f"#!{installed}/venv/bin/python\n"  # the old folder
    code, report, _ = verify_json(tmp_path, moved)
    assert code == 8 and not report["passed"] and report["moved"] and report["changes"] == []
    assert report["installedAt"] == str(installed) and report["dest"] == str(moved)
    code, out, err = scrollcase(tmp_path, "verify", "--installed", str(moved))
    assert code == 8 and f"moved    installed in {installed}, now in {moved}" in out
    assert f"was installed in {installed}: its relocated files still name that folder" in err
    assert f"move it back to {installed}" in err and "scrollcase unpack" in err
    moved.rename(installed)  # moved back: nothing to report
    assert verify_json(tmp_path, installed)[0] == 0


@POSIX_ONLY
def test_a_symlink_to_the_installed_folder_is_not_a_move(tmp_path: Path, installed: Path) -> None:
    """The relocated files name the folder the receipt records; a link to it is the same box there."""
    (tmp_path / "link").symlink_to(installed)
    code, report, err = verify_json(tmp_path, tmp_path / "link")
    assert code == 0 and report["passed"] and not report["moved"], (report, err)


@POSIX_ONLY
def test_an_upgraded_box_records_its_modes_and_verifies_clean(tmp_path: Path, release: SyntheticRelease) -> None:
    """An upgrade unpacks the new release beside DEST and swaps it in: its receipt is the new release's."""
    newer = make_release(tmp_path / "newer", "1.1.0")
    store = tmp_path / "store"
    for one in (release, newer):
        publish(LocalStore(store), one.manifest, one.archive_path)
    box = ("--store", str(store))
    assert scrollcase(tmp_path, "install", *box, "--box", "demo-box", "--version", "1.0.0", "--quiet", "box")[0] == 0
    code, _, err = scrollcase(tmp_path, "upgrade", *box, "--quiet", "box")
    assert code == 0, err
    code, report, err = verify_json(tmp_path, tmp_path / "box")
    assert code == 0 and report["version"] == "1.1.0" and report["modesChecked"], (report, err)
    (tmp_path / "box" / "venv" / "bin" / "tool").chmod(0o2755)  # setgid
    code, report, _ = verify_json(tmp_path, tmp_path / "box")
    assert code == 8 and [c["found"] for c in report["changes"]] == ["2755"]
