"""The README's first command, as a user runs it: `scrollcase demo`, offline, start to finish."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_build_e2e import stage_line

REPO = Path(__file__).resolve().parents[2]

# The demo archive's sha256, keyed by what it is built from: this interpreter (the demo packages this
# CPython's stdlib) and the installed numpy wheel, on this machine's architecture.  A restructuring must
# leave these bytes alone; a new interpreter or numpy needs its own row (run the demo, add the digest).
# Changed deliberately once: the archive became one zstd frame per package (issue 16, framed archive).
DEMO_ARCHIVE_SHA256: dict[tuple[str, str, str], str] = {
    ("3.11.7 (main, May  9 2026, 07:35:25) [GCC 12.2.0]", "2.4.6", "x86_64"): (
        "e8c9f3df5b4f3347357eecb2be86564dba6caa47cc25aaf99bd84109b2e8a4b9"
    ),
}


@pytest.mark.slow
def test_demo_command_builds_and_verifies_a_release(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", "w", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data["timings"]) == {"channel", "recipe", "lock", "build", "verify", "publish"}
    release = tmp_path / data["release"]
    assert release.parent == tmp_path / "w/.scrollcase/dist"
    manifest = json.loads(release.read_text())
    assert manifest["selfTest"]["passed"] and manifest["archive"]["sha256"] == data["sha256"]
    for stage in ("== channel", "== lock", stage_line("pack"), "== verify", "== publish"):
        assert stage in done.stderr
    store = tmp_path / "w/.scrollcase/store"
    keys = manifest["keys"]
    assert (store / keys["archive"]).read_bytes() == (release.parent / manifest["archive"]["name"]).read_bytes()
    assert json.loads((store / keys["release"]).read_text())["archive"]["sha256"] == data["sha256"]
    assert (store / "boxes" / manifest["boxId"] / "index.json").is_file()
    assert len(data["published"]) == 3

    # A rerun rebuilds the same bytes, so publishing again uploads nothing.
    again = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", "w", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert rerun["sha256"] == data["sha256"] and rerun["published"] == []


def _demo_key() -> tuple[str, str, str]:
    numpy = pytest.importorskip("numpy")
    return (sys.version, numpy.__version__, platform.machine())


@pytest.mark.slow
def test_demo_archive_bytes_are_pinned(tmp_path: Path) -> None:
    key = _demo_key()
    if key not in DEMO_ARCHIVE_SHA256:
        pytest.skip(f"no pinned demo archive sha256 for (sys.version, numpy, machine) = {key!r}")
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", "w", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    digest = hashlib.sha256((tmp_path / data["archive"]).read_bytes()).hexdigest()
    assert (digest, data["sha256"]) == (DEMO_ARCHIVE_SHA256[key], digest)
