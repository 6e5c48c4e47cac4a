"""The README's first command, as a user runs it: `scrollcase demo`, offline, start to finish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_build_e2e import stage_line

REPO = Path(__file__).resolve().parents[2]


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
