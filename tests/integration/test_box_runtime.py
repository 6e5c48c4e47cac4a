"""The runtime contract of a real box (issue #17): unpacked through a symlinked folder it names the path
as given, and it runs from a read-only DEST without writing a byte into it."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.build.pipeline import BuildResult, run_self_test
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.boxjson import parse_box_json
from scrollcase.io.proc import run_python
from tests.integration.test_build_e2e import build, demo_channel, make_recipe, shared_cache

pytestmark = pytest.mark.slow
__all__ = ["demo_channel", "shared_cache"]  # fixtures this module uses

PATHS_CODE = (
    "import json, sys, sysconfig, numpy; "
    "print(json.dumps([sys.prefix, sysconfig.get_paths()['purelib'], sysconfig.get_config_var('prefix'), "
    "numpy.__file__]))"
)


@pytest.fixture(scope="module")
def built(demo_channel: Path, shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    root = tmp_path_factory.mktemp("runtime")
    return build(make_recipe(root, demo_channel), root, cache_dir=shared_cache)


def _unpack(built: BuildResult, dest: Path) -> Path:
    archive = built.manifest.archive
    return unpack_archive(built.archive, dest, expected_size=archive.size, expected_sha256=archive.sha256).dest


def test_a_symlinked_dest_parent_is_kept_and_prefixes_agree(built: BuildResult, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real", target_is_directory=True)
    dest = tmp_path / "link" / "box"
    assert _unpack(built, dest) == dest
    run = run_python(dest / "venv/bin/python", ["-c", PATHS_CODE])
    assert run.ok, run.stderr
    prefix, purelib, config_prefix, numpy_file = json.loads(run.stdout)
    assert prefix == config_prefix == str(dest / "venv")
    assert purelib == str(dest / "venv/lib/python3.11/site-packages")
    assert numpy_file.startswith(purelib + "/")


def _listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under root: (mode, size, mtime in ns), symlinks not followed."""
    out = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory) / name
            info = path.lstat()
            out[path.relative_to(root).as_posix()] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return out


@pytest.fixture
def read_only_box(built: BuildResult, tmp_path: Path) -> Iterator[Path]:
    dest = _unpack(built, tmp_path / "box")
    _set_writable(dest, writable=False)
    try:
        yield dest
    finally:
        _set_writable(dest, writable=True)  # so that pytest can remove it


def _set_writable(root: Path, *, writable: bool) -> None:
    bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod((mode | stat.S_IWUSR) if writable else (mode & ~bits))


def test_a_read_only_box_runs_and_self_tests_without_writing_into_dest(read_only_box: Path) -> None:
    dest = read_only_box
    before = _listing(dest)
    assert not any(mode & 0o222 for mode, _, _ in before.values() if not stat.S_ISLNK(mode))
    for code in ("import numpy; print(numpy.ones(3).sum())", PATHS_CODE):  # the latter imports prefix carriers
        run = run_python(dest / "venv/bin/python", ["-c", code])
        assert run.ok, run.stderr
    box = parse_box_json((dest / "box.json").read_bytes())
    report, error = run_self_test(dest, box, recipe_file=None, recipe_text=None, junit=None)
    assert error is None and report.passed
    assert _listing(dest) == before  # no __pycache__, no file changed, nothing appeared
