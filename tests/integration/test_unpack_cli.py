"""`scrollcase unpack` end to end: real CLI subprocess, real archives, real release manifests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.box.archive import PackResult, pack_tree
from scrollcase.box.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files
from scrollcase.release import ReleaseManifest, dump_release, object_keys

REPO = Path(__file__).resolve().parents[2]
NAME = "demo-1.0.0-linux-x86_64-cpu.tar.zst"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_ACTIONS", None)
    return subprocess.run([sys.executable, "-m", "scrollcase", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def build_box(tmp: Path) -> PackResult:
    tree = tmp / "tree"
    (tree / "venv" / "bin").mkdir(parents=True)
    (tree / "venv" / "bin" / "tool").write_text(f"#!{BOX_PREFIX_PLACEHOLDER}/venv/bin/python\n")
    (tree / "venv" / "bin" / "tool").chmod(0o755)
    (tree / "venv" / "etc.txt").write_text(f"home={BOX_PREFIX_PLACEHOLDER}\n")
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER,
                          files=scan_prefix_files(tree, BOX_PREFIX_PLACEHOLDER))
    (tree / "box.json").write_text(json.dumps({"boxId": "demo", "relocation": info.model_dump()}))
    dist = tmp / "dist"
    return pack_tree(tree, dist / NAME)


def write_release(packed: PackResult) -> Path:
    manifest = ReleaseManifest.model_validate({
        "boxId": "demo", "modelId": "demo", "runtimeId": "demo", "version": "1.0.0",
        "sourceRevision": "r1", "recipeId": "demo-linux-x86_64-cpu", "recipeVersion": "1.0.0",
        "target": {"platform": "linux", "arch": "x86_64", "accelerator": "cpu"},
        "targetId": "linux-x86_64-cpu",
        "compatibility": {"minHostAppVersion": "1.0.0", "minRamGb": 1},
        "archive": {"name": NAME, "size": packed.size, "sha256": packed.sha256},
        "pythonEntryPoint": "venv/bin/python", "modelCacheSubdir": "model-cache/demo",
        "weights": "bundled", "assets": [],
        "keys": object_keys("demo", "1.0.0", "linux-x86_64-cpu", NAME).model_dump(),
        "builtBy": {"scrollcase": "0.1.0", "pixi": "0.73.0", "lockSha256": "0" * 64, "pythonVersion": "3.11"},
    })
    path = packed.path.with_name(NAME.removesuffix(".tar.zst") + ".release.json")
    path.write_bytes(dump_release(manifest))
    return path


def test_unpack_release_manifest_relocates(tmp_path: Path) -> None:
    packed = build_box(tmp_path)
    release = write_release(packed)
    done = cli("unpack", str(release), "out/box", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    dest = (tmp_path / "out" / "box").resolve()
    assert result["dest"] == str(dest)
    assert result["sha256"] == packed.sha256
    assert result["relocatedFiles"] == 2
    assert (dest / "venv" / "bin" / "tool").read_text() == f"#!{dest}/venv/bin/python\n"
    assert (dest / "venv" / "etc.txt").read_text() == f"home={dest}\n"


def test_unpack_bare_archive_with_sidecar_and_option(tmp_path: Path) -> None:
    packed = build_box(tmp_path)
    missing = cli("unpack", str(packed.path), "a", cwd=tmp_path)
    assert missing.returncode == 2 and "--sha256" in missing.stderr
    packed.path.with_name(NAME + ".sha256").write_text(f"{packed.sha256}  {NAME}\n")
    assert cli("unpack", str(packed.path), "b", "-q", cwd=tmp_path).returncode == 0
    assert (tmp_path / "b" / "box.json").is_file()
    done = cli("unpack", str(packed.path), "c", "--sha256", packed.sha256.upper(), cwd=tmp_path)
    assert done.returncode == 0 and "verified" in done.stdout


def test_unpack_wrong_digest_exit_code_and_json(tmp_path: Path) -> None:
    packed = build_box(tmp_path)
    done = cli("unpack", str(packed.path), "d", "--sha256", "ab" * 32, "--json", cwd=tmp_path)
    assert done.returncode == 8
    error = json.loads(done.stdout)
    assert error["error"] == "IntegrityError" and "sha256" in error["message"]
    assert not (tmp_path / "d").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "tree"]


def test_unpack_tampered_archive_named_by_release(tmp_path: Path) -> None:
    packed = build_box(tmp_path)
    release = write_release(packed)
    data = bytearray(packed.path.read_bytes())
    data[-10] ^= 1
    packed.path.write_bytes(bytes(data))
    done = cli("unpack", str(release), "e", cwd=tmp_path)
    assert done.returncode == 8 and "download it again" in done.stderr
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("args", [["--help"], ["unpack", "--help"]])
def test_help(tmp_path: Path, args: list[str]) -> None:
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 0 and "unpack" in done.stdout
