"""`scrollcase unpack` end to end: real CLI subprocess, real archives, real release manifests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.format.archive.pack import PackResult, pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.release import ReleaseManifest, dump_release, object_keys
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files
from scrollcase.targets.evidence import FrameworkEvidence, GpuEvidence
from tests.support.releases import box_json_for

REPO = Path(__file__).resolve().parents[2]
NAME = "demo-1.0.0-linux-x86_64-cpu.tar.zst"
CUDA_NAME = "demo-1.0.0-linux-x86_64-cuda12.4.tar.zst"
MIN_DRIVER = "550.54.14"
TORCH_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]
QUERY = "--query-gpu=driver_version,compute_cap,name"
POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="the fake nvidia-smi is a shell script")


def cli(*args: str, cwd: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_ACTIONS", None)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def build_box(tmp: Path, name: str = NAME, cuda: str | None = None, gpu: GpuEvidence | None = None) -> PackResult:
    """A packed box whose box.json is the one a build of ``write_release``'s manifest packs (its relocation too)."""
    tree = tmp / "tree"
    (tree / "venv" / "bin").mkdir(parents=True)
    (tree / "venv" / "bin" / "tool").write_text(f"#!{BOX_PREFIX_PLACEHOLDER}/venv/bin/python\n")
    (tree / "venv" / "bin" / "tool").chmod(0o755)
    (tree / "venv" / "etc.txt").write_text(f"home={BOX_PREFIX_PLACEHOLDER}\n")
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(tree, BOX_PREFIX_PLACEHOLDER))
    draft = release_manifest(name, 0, "0" * 64, cuda, gpu)
    (tree / "box.json").write_bytes(dump_box_json(box_json_for(draft).model_copy(update={"relocation": info})))
    dist = tmp / "dist"
    return pack_tree(tree, dist / name)


def write_release(packed: PackResult, cuda: str | None = None, gpu: GpuEvidence | None = None) -> Path:
    manifest = release_manifest(packed.path.name, packed.size, packed.sha256, cuda, gpu)
    path = packed.path.with_name(packed.path.name.removesuffix(".tar.zst") + ".release.json")
    path.write_bytes(dump_release(manifest))
    return path


def release_manifest(name: str, size: int, sha256: str, cuda: str | None, gpu: GpuEvidence | None) -> ReleaseManifest:
    tid = f"linux-x86_64-cuda{cuda}" if cuda else "linux-x86_64-cpu"
    target: dict[str, str] = {"platform": "linux", "arch": "x86_64", "accelerator": "cuda" if cuda else "cpu"}
    compatibility: dict[str, object] = {"minHostAppVersion": "1.0.0", "minRamGb": 1}
    if cuda:
        target["cudaVersion"] = cuda
        compatibility["minNvidiaDriverVersion"] = MIN_DRIVER
    return ReleaseManifest.model_validate(
        {
            "boxId": "demo",
            "modelId": "demo",
            "runtimeId": "demo",
            "version": "1.0.0",
            "sourceRevision": "r1",
            "recipeId": f"demo-{tid}",
            "recipeVersion": "1.0.0",
            "target": target,
            "targetId": tid,
            "compatibility": compatibility,
            "archive": {"name": name, "size": size, "sha256": sha256},
            "pythonEntryPoint": "venv/bin/python",
            "modelCacheSubdir": "model-cache/demo",
            "weights": "bundled",
            "assets": [],
            "keys": object_keys("demo", "1.0.0", tid, name).model_dump(),
            "builtBy": {"scrollcase": "0.1.0", "pixi": "0.73.0", "lockSha256": "0" * 64, "pythonVersion": "3.11"},
            "gpu": gpu.model_dump() if gpu else None,
            "selfTest": {"passed": True, "checks": [{"name": "import json", "kind": "import", "passed": True}]},
        }
    )


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
    assert result["gpuCheck"]["status"] == "skip" and "not a CUDA target" in result["gpuCheck"]["summary"]


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


# --- the install-time GPU check, with a fake nvidia-smi on PATH ----------------------------------------------


def torch_evidence(archs: list[str] = TORCH_ARCHS) -> GpuEvidence:
    return GpuEvidence(
        cudaRuntime="12.4",
        source="framework",
        framework=FrameworkEvidence(version="2.6.0", cuda="12.4", cudnn=90100, archList=archs),
    )


def cuda_release(tmp: Path, archs: list[str] = TORCH_ARCHS) -> Path:
    return write_release(
        build_box(tmp, CUDA_NAME, "12.4", torch_evidence(archs)), cuda="12.4", gpu=torch_evidence(archs)
    )


def fake_smi(tmp: Path, script: str | None) -> str:
    """A PATH holding only a fake nvidia-smi running ``script`` (None: no nvidia-smi at all)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    if script is not None:
        tool = bin_dir / "nvidia-smi"
        tool.write_text(f'#!/bin/sh\n[ "$1" = "{QUERY}" ] || exit 2\n{script}\n', encoding="utf-8")
        tool.chmod(0o755)
    return str(bin_dir)


def assert_refused(done: subprocess.CompletedProcess[str], tmp: Path, dest: str, *fragments: str) -> None:
    assert done.returncode == 11, done.stdout + done.stderr
    assert not (tmp / dest).exists()
    assert not [p for p in tmp.iterdir() if p.name.startswith(f".{dest}.")]  # no temp folder either
    assert "refusing to install demo 1.0.0 (linux-x86_64-cuda12.4)" in done.stderr
    assert "--skip-gpu-check" in done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, done.stderr


@POSIX_ONLY
def test_cuda_box_refused_without_nvidia_smi(tmp_path: Path) -> None:
    release = cuda_release(tmp_path)
    done = cli("unpack", str(release), "box", cwd=tmp_path, path=fake_smi(tmp_path, None))
    assert_refused(done, tmp_path, "box", "needs an NVIDIA GPU and driver", "nvidia-smi is not on PATH")


@POSIX_ONLY
def test_cuda_box_refused_when_nvidia_smi_fails_json(tmp_path: Path) -> None:
    release = cuda_release(tmp_path)
    path = fake_smi(tmp_path, 'echo "NVIDIA-SMI has failed because it could not communicate" >&2; exit 9')
    done = cli("unpack", str(release), "box", "--json", cwd=tmp_path, path=path)
    assert_refused(done, tmp_path, "box", "NVIDIA-SMI has failed")
    error = json.loads(done.stdout)
    assert error["error"] == "HostError" and error["exitCode"] == 11
    (problem,) = error["problems"]
    assert problem["key"] == "target" and problem["severity"] == "error"


@POSIX_ONLY
def test_cuda_box_refused_for_an_old_driver(tmp_path: Path) -> None:
    release = cuda_release(tmp_path)
    path = fake_smi(tmp_path, 'echo "535.104.05, 8.6, NVIDIA GeForce RTX 3090"')
    done = cli("unpack", str(release), "box", cwd=tmp_path, path=path)
    assert_refused(
        done,
        tmp_path,
        "box",
        "compatibility.minNvidiaDriverVersion",
        "535.104.05 is older than minNvidiaDriverVersion 550.54.14",
        "update the NVIDIA driver to 550.54.14 or newer",
        "another target",
    )


@POSIX_ONLY
def test_cuda_box_refused_when_no_gpu_runs_its_architectures(tmp_path: Path) -> None:
    release = cuda_release(tmp_path, archs=["sm_80", "sm_86", "sm_90"])
    path = fake_smi(tmp_path, 'echo "570.86.10, 10.0, NVIDIA B200"')
    done = cli("unpack", str(release), "box", cwd=tmp_path, path=path)
    assert_refused(
        done,
        tmp_path,
        "box",
        "gpu.framework.archList",
        "sm_80 sm_86 sm_90",
        "GPU 0 (NVIDIA B200, compute capability 10.0)",
        "sm_100",
    )


@POSIX_ONLY
def test_cuda_box_accepted_on_a_matching_gpu(tmp_path: Path) -> None:
    release = cuda_release(tmp_path)
    path = fake_smi(tmp_path, 'echo "550.54.14, 8.6, NVIDIA GeForce RTX 3090"')
    done = cli("unpack", str(release), "box", "--json", cwd=tmp_path, path=path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "box" / "box.json").is_file()
    check = json.loads(done.stdout)["gpuCheck"]
    assert check["status"] == "pass" and check["problems"] == []
    assert check["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA GeForce RTX 3090",
            "computeCapability": "8.6",
            "driverVersion": "550.54.14",
            "runs": "sass",
            "arch": "sm_86",
        }
    ]


@POSIX_ONLY
def test_cuda_box_accepted_with_warnings_for_ptx_and_an_unfit_gpu(tmp_path: Path) -> None:
    release = cuda_release(tmp_path, archs=["sm_86", "compute_86"])
    script = 'echo "560.35.03, 9.0, NVIDIA H100"; echo "560.35.03, 7.5, Tesla T4"'
    done = cli("unpack", str(release), "box", cwd=tmp_path, path=fake_smi(tmp_path, script))
    assert done.returncode == 0, done.stderr
    assert (
        "warning: gpu.framework.archList: GPU 0 (NVIDIA H100, compute capability 9.0) has no matching "
        "SASS and runs the box through PTX compute_86" in done.stderr
    )
    assert "GPU 1 (Tesla T4, compute capability 7.5) cannot run" in done.stderr
    assert (tmp_path / "box" / "box.json").is_file()


@POSIX_ONLY
def test_skip_gpu_check_installs_anyway_with_a_warning(tmp_path: Path) -> None:
    release = cuda_release(tmp_path)
    done = cli(
        "unpack", str(release), "box", "--skip-gpu-check", "--json", "-q", cwd=tmp_path, path=fake_smi(tmp_path, None)
    )
    assert done.returncode == 0, done.stderr
    assert "warning: --skip-gpu-check: the linux-x86_64-cuda12.4 box is installed without checking" in done.stderr
    assert json.loads(done.stdout)["gpuCheck"]["status"] == "skip"
    assert (tmp_path / "box" / "box.json").is_file()


@POSIX_ONLY
def test_a_cuda_release_without_gpu_evidence_is_refused_as_unsound(tmp_path: Path) -> None:
    """A CUDA manifest with no GPU evidence is not a sound release (format/soundness.py, docs/install.md exit 8):
    refused before the GPU is asked, now that box.json is always read (it used to be skipped here, because this
    test's box.json did not parse, and the release installed)."""
    release = write_release(build_box(tmp_path, CUDA_NAME, "12.4"), cuda="12.4")
    path = fake_smi(tmp_path, 'echo "550.54.14, 12.0, NVIDIA RTX PRO 6000"')
    done = cli("unpack", str(release), "box", cwd=tmp_path, path=path)
    assert done.returncode == 8, done.stderr
    assert "is a CUDA target, but the manifest carries no GPU evidence" in done.stderr
    assert not (tmp_path / "box").exists()
