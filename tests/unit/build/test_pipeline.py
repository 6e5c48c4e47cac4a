from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from scrollcase.build import conda as install
from scrollcase.build.pipeline import env_placeholder, prune_box
from scrollcase.demo.channel import PackageFile, PackageSpec, index_channel, write_package
from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format.layout import box_layout
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER
from scrollcase.recipe.loader import RecipeDir, parse_recipe
from scrollcase.wheels import source as wheels

RECIPE: dict[str, Any] = {
    "schemaVersion": 1,
    "recipeId": "m-linux-x86_64-cuda12.4",
    "recipeVersion": "1.0.0",
    "boxId": "m",
    "modelId": "org-m",
    "runtimeId": "rt",
    "version": "2.0.0",
    "sourceRevision": "v2",
    "target": {"platform": "linux", "arch": "x86_64", "accelerator": "cuda", "cudaVersion": "12.4"},
    "compatibility": {"minHostAppVersion": "1.0.0", "minNvidiaDriverVersion": "550.54.14", "minRamGb": 16},
    "pythonVersion": "3.11",
    "pixiVersion": "0.73.0",
    "pythonEntryPoint": "venv/bin/python",
    "modelCacheSubdir": "model-cache/m",
    "assetBaseUrl": "https://assets.example.org/boxes",
    "assets": [{"name": "w", "path": "w.bin", "sha256": "a" * 64, "size": 3}],
    "selfTest": {"imports": ["torch"], "files": [], "pythonCode": ""},
    "prunePaths": ["venv/share/doc"],
}


def recipe_dir(**changes: Any) -> RecipeDir:
    return RecipeDir(Path("recipes") / RECIPE["recipeId"], parse_recipe(json.dumps({**RECIPE, **changes})))


def test_environment_is_linked_under_the_box_placeholder() -> None:
    layout = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
    assert env_placeholder(layout) == BOX_PREFIX_PLACEHOLDER + "/venv"


def test_prune_removes_paths_and_bytecode(tmp_path: Path) -> None:
    layout = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
    (tmp_path / "venv/share/doc").mkdir(parents=True)
    (tmp_path / "venv/share/doc/x.txt").write_text("x")
    (tmp_path / "venv/lib/__pycache__").mkdir(parents=True)
    (tmp_path / "venv/lib/__pycache__/m.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "venv/lib/m.py").write_text("")
    (tmp_path / "venv/lib/old.pyc").write_bytes(b"\0")
    notes = prune_box(tmp_path, layout, ["venv/share/doc", "venv/nothing-here"])
    assert notes == ["prunePaths entry 'venv/nothing-here' matched nothing"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == ["venv/lib/m.py"]


def test_prune_refuses_to_follow_a_symlink_out_of_the_box(tmp_path: Path) -> None:
    layout = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
    outside = tmp_path / "precious"
    (outside / "docs").mkdir(parents=True)
    box = tmp_path / "box"
    (box / "venv").mkdir(parents=True)
    (box / "venv/share").symlink_to(outside)
    with pytest.raises(BuildError, match="outside the box"):
        prune_box(box, layout, ["venv/share/docs"])
    assert (outside / "docs").is_dir()


def test_scrub_record_removes_host_paths() -> None:
    record = {
        "name": "foo",
        "extracted_package_dir": "/home/me/.cache/foo",
        "indexed_timestamp": 1,
        "package_tarball_full_path": "/home/me/foo.tar.bz2",
        "link": {"source": "/home/me/x", "type": 1},
        "url": "file:///home/me/chan/linux-64/foo-1-0.tar.bz2",
        "channel": "file:///home/me/chan/",
        "files": ["a"],
    }
    assert install.scrub_record(record) == {
        "name": "foo",
        "link": {"type": 1},
        "url": "local/linux-64/foo-1-0.tar.bz2",
        "channel": "local",
        "files": ["a"],
    }
    remote = {"url": "https://conda.anaconda.org/conda-forge/linux-64/x.conda"}
    assert install.scrub_record(remote) == remote


@pytest.fixture
def channel_records(tmp_path: Path) -> tuple[Path, list[Any]]:
    import rattler

    channel = tmp_path / "chan"
    package = write_package(channel, PackageSpec("foo", "1.0", files=[PackageFile("share/foo.txt", b"hi\n")]))
    index_channel(channel, ["linux-64"])
    records = asyncio.run(rattler.solve(sources=[channel.as_uri()], specs=["foo"], platforms=["linux-64"]))
    return package, list(records)


def test_local_packages_are_checked_against_the_lock(channel_records: tuple[Path, list[Any]]) -> None:
    package, records = channel_records
    install.verify_local_packages(records, "pixi.lock")  # untouched: passes
    data = bytearray(package.read_bytes())
    data[-10] ^= 0xFF
    package.write_bytes(bytes(data))
    with pytest.raises(IntegrityError) as caught:
        install.verify_local_packages(records, "pixi.lock")
    assert "sha256 differs" in caught.value.render() and caught.value.fix
    package.write_bytes(bytes(data[:-1]))
    with pytest.raises(IntegrityError, match="size differs"):
        install.verify_local_packages(records, "pixi.lock")
    package.unlink()
    with pytest.raises(IntegrityError, match="missing"):
        install.verify_local_packages(records, "pixi.lock")


def test_remote_urls_are_left_to_rattler() -> None:
    assert install.local_package_path("https://conda.anaconda.org/x.conda") is None
    assert install.local_package_path("file:///srv/chan/linux-64/x.conda") == Path("/srv/chan/linux-64/x.conda")


def _lock_with_pypi(tmp_path: Path, channel_records: tuple[Path, list[Any]]) -> Path:
    """A v6 pixi.lock (the format pixi writes) holding one conda and one PyPI package for linux-64."""
    package, _ = channel_records
    digest = hashlib.sha256(package.read_bytes()).hexdigest()
    wheel = "https://files.pythonhosted.org/packages/torch-2.4.0+cu124-cp311-cp311-linux_x86_64.whl"
    lock = tmp_path / "pixi.lock"
    lock.write_text(f"""version: 6
environments:
  default:
    channels:
    - url: {package.parent.parent.as_uri()}/
    packages:
      linux-64:
      - conda: {package.as_uri()}
      - pypi: {wheel}
packages:
- conda: {package.as_uri()}
  name: foo
  version: '1.0'
  build: '0'
  subdir: linux-64
  sha256: {digest}
  size: {package.stat().st_size}
- pypi: {wheel}
  name: torch
  version: 2.4.0+cu124
  sha256: {digest}
  requires_python: '>=3.8'
""")
    return lock


def test_pypi_wheels_in_the_lock_are_planned_for_install(
    tmp_path: Path, channel_records: tuple[Path, list[Any]]
) -> None:
    lock = _lock_with_pypi(tmp_path, channel_records)
    locked = wheels.locked_wheels(lock, "linux-64")
    assert [(w.name, w.version) for w in locked] == [("torch", "2.4.0+cu124")]
    assert wheels.locked_wheels(lock, "win-64") == []
    (source,) = wheels.plan_wheels(locked, lock, "linux-64")
    assert source.filename == "torch-2.4.0+cu124-cp311-cp311-linux_x86_64.whl"
    assert source.url.startswith("https://files.pythonhosted.org/") and len(source.sha256) == 64
