"""Installed boxes share identical files, on the real demo (#33): box A as `scrollcase demo` builds it and box
B, built by the real build from the same local channel with another boxId and its own weights
(tests/integration/test_install_frames.py's `build_box_b`), installed by the real CLI into one host.  B's tree
adds at most a tenth of its blocks to the disk, both boxes run their own interpreter and numpy and verify
clean, and a shared file changed in A is reported for both, naming both."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scrollcase import cli
from scrollcase.demo.run import DEMO_BOX_ID
from scrollcase.format.receipt import verify_installed
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.integration.test_install_frames import BOX_B, RUN_B, build_box_b
from tests.integration.test_shared_files import blocks

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name == "nt", reason="st_blocks and hard link counts as POSIX has them"),
]


@pytest.fixture(scope="module")
def store(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("shared-demo")
    root = work / "store"
    shutil.copytree(demo_workspace / ".scrollcase" / "store", root)
    publish(LocalStore(root), *build_box_b(demo_workspace, work / "box-b"))
    return root


@pytest.fixture
def installed(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    for box, name in ((DEMO_BOX_ID, "a"), (BOX_B, "b")):
        assert cli.main(["install", "--quiet", "--store", str(store), "--box", box, str(tmp_path / name)]) == 0
    return tmp_path / "a", tmp_path / "b", tmp_path / "cache"


def test_the_demo_box_b_after_a_adds_a_tenth_of_its_tree_runs_and_verifies(
    installed: tuple[Path, Path, Path],
) -> None:
    a, b, cache = installed
    seen: set[tuple[int, int]] = set()
    blocks(a, seen)
    blocks(cache, seen)
    added, whole = blocks(b, seen), blocks(b, set())
    print(f"box B: {whole * 512} bytes of blocks, {added * 512} added after box A ({100 * added / whole:.1f}%)")
    assert added <= whole // 10, (added, whole)
    for dest in (a, b):
        assert verify_installed(dest).passed
    python = b / "venv" / "bin" / "python"
    ran = subprocess.run([str(python), "-c", RUN_B], cwd=b, capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stdout.strip()) == (0, "4.0"), ran.stderr
    ran = subprocess.run(
        [str(a / "venv" / "bin" / "python"), "-c", "import numpy; print(numpy.ones(3).sum())"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ran.returncode, ran.stdout.strip()) == (0, "3.0"), ran.stderr


def test_a_numpy_file_changed_in_a_is_reported_for_a_and_b_naming_both(installed: tuple[Path, Path, Path]) -> None:
    a, b, _ = installed
    shared = next(p for p in sorted(a.rglob("numpy/__init__.py")) if p.samefile(b / p.relative_to(a))).relative_to(a)
    with (a / shared).open("ab") as edited:
        edited.write(b"\n# changed\n")
    for dest in (a, b):
        (change,) = verify_installed(dest).changes
        assert (change.path, change.change, change.sharedWith) == (shared.as_posix(), "changed", (str(a), str(b)))
