"""The real thing: a CUDA 12.4 torch box from PyPI, locked, built, proven, verified, published, installed, run.

The conda part (python, numpy) comes from a local channel made from this machine's CPython (as the demo
does), through ``--channel-override``; torch 2.6.0 and its 22 wheels (2.8 GB) come from PyPI and are cached
in the user cache folder, so a rerun downloads nothing.  No GPU is needed: the GPU evidence comes from the
box's own interpreter, and the host's GPU is a fake ``nvidia-smi``.  ~20 GB of disk at the peak.

Skip with ``-m 'not torch'`` in a quick loop; ``.ci/run`` runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.demo.run import make_demo_channel
from tests.integration.test_parity_examples import (
    check_device_check_without_a_gpu_fails_cleanly,
    check_the_script_runs_on_cpu_and_refuses_a_missing_gpu,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    pytest.mark.timeout(2400),
    pytest.mark.xdist_group("torch"),  # the torch box is built once, by one worker
    pytest.mark.skipif(sys.platform != "linux", reason="the local channel packages a Linux CPython"),
]
REPO = Path(__file__).resolve().parents[2]
RECIPE = "torch-mlp-linux-x86_64-cuda12.4"
TIMINGS: dict[str, float] = {}


def scrollcase(
    cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI; its stage seconds are kept for the summary this module prints at the end."""
    start = time.monotonic()
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")} | (env or {})
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", *args], cwd=cwd, capture_output=True, text=True, env=run_env, check=False
    )
    TIMINGS[args[0] if args[0] not in TIMINGS else f"{args[0]} ({len(TIMINGS)})"] = time.monotonic() - start
    if check:
        assert done.returncode == 0, f"scrollcase {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module", autouse=True)
def report_timings(pytestconfig: pytest.Config) -> Iterator[None]:
    """The stage timings, printed in the test log (CI's too) whether the tests pass or fail."""
    yield
    width = max((len(k) for k in TIMINGS), default=0)
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
        reporter.write_line("\nreal torch box, stage timings:")
        for name, seconds in TIMINGS.items():
            reporter.write_line(f"  {name:<{width}}  {seconds:7.1f} s")


# Session-scoped, not module-scoped: under pytest-xdist a worker may run another module's tests between two of
# these, and pytest then tears module fixtures down; the torch box (minutes, GBs) would be built twice.
@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("torch-e2e")
    (root / "recipes").mkdir()
    shutil.copytree(REPO / "recipes" / RECIPE, root / "recipes" / RECIPE)
    start = time.monotonic()
    make_demo_channel(root / "channel", "linux-64")
    TIMINGS["channel"] = time.monotonic() - start
    yield root
    shutil.rmtree(root, ignore_errors=True)  # GBs: never left behind


def override(work: Path) -> list[str]:
    return ["--channel-override", f"conda-forge={(work / 'channel').as_uri()}"]


@pytest.fixture(scope="session")
def locked(work: Path) -> Path:
    scrollcase(work, "lock", RECIPE, *override(work))
    return work / "recipes" / RECIPE / "pixi.lock"


@pytest.fixture(scope="session")
def release(work: Path, locked: Path) -> Path:
    done = scrollcase(work, "build", RECIPE, "--json")
    data = json.loads(done.stdout)
    for stage, seconds in data["timings"].items():
        TIMINGS[f"  build: {stage}"] = seconds
    return work / data["release"]


def test_lock_resolves_pypi_torch_for_cuda124(work: Path, locked: Path) -> None:
    inspect = json.loads(scrollcase(work, "inspect", str(locked), "--json").stdout)
    [row] = inspect["environments"]
    assert row["torch"] == {"provider": "pypi", "version": "2.6.0", "build": None, "accelerator": "cuda12.4"}
    lock_text = locked.read_text()
    assert "  name: nvidia-cuda-runtime-cu12\n  version: 12.4.127\n" in lock_text
    assert "    indexes:\n    - https://pypi.org/simple\n" in lock_text
    assert "  name: numpy\n" not in lock_text.split("- pypi:", 1)[1]  # conda's numpy is never a wheel
    check = scrollcase(work, "lock-check", RECIPE, *override(work))
    assert "torch 2.6.0 -> cuda12.4" in check.stdout


def test_build_proves_the_cuda_runtime_without_a_gpu(release: Path) -> None:
    manifest = json.loads(release.read_text())
    gpu = manifest["gpu"]
    assert gpu["cudaRuntime"] == "12.4" and gpu["source"] == "framework"
    framework = gpu["framework"]
    assert framework["version"] == "2.6.0+cu124" and framework["cuda"] == "12.4"
    assert framework["cudnn"] == 90100  # nvidia-cudnn-cu12 9.1.0.70
    assert "sm_90" in framework["archList"] and "sm_50" in framework["archList"]
    assert {"name": "nvidia-cuda-runtime-cu12", "version": "12.4.127", "kind": "pypi"} in gpu["runtimePackages"]
    assert "libcudart.so.12" in gpu["cudartSonames"]
    assert manifest["selfTest"]["passed"] is True


def test_verify_publish_and_install_elsewhere_then_run_torch(work: Path, release: Path) -> None:
    scrollcase(work, "verify", str(release), "--self-test")
    store = work / "store"
    scrollcase(work, "publish", str(release), "--to", str(store))
    index = json.loads((store / "boxes/torch-mlp/index.json").read_text())
    assert index["versions"]["1.0.0"]["linux-x86_64-cuda12.4"]["gpu"]["framework"]["cuda"] == "12.4"
    host = fake_gpu(work, "550.54.14, 8.6, NVIDIA GeForce RTX 3090")
    dest = work / "installed box"  # a space in the path: relocation must still hold
    unpack = scrollcase(
        work, "unpack", str(store / json.loads(release.read_text())["keys"]["release"]), str(dest), "--json", env=host
    )
    assert json.loads(unpack.stdout)["gpuCheck"]["status"] in ("pass", "warn")
    release.parent.joinpath(json.loads(release.read_text())["archive"]["name"]).unlink()  # disk: 2.7 GB
    code = (
        "import torch, numpy; x = torch.from_numpy(numpy.arange(12, dtype=numpy.float32).reshape(3, 4)); "
        "y = torch.nn.functional.linear(x, torch.ones(2, 4)); "
        "print(torch.__version__, torch.version.cuda, y.sum().item())"
    )
    run = subprocess.run(
        [str(dest / "venv/bin/python"), "-I", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(work)},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["2.6.0+cu124", "12.4", "132.0"]


@pytest.fixture(scope="module")
def torch_python(work: Path, release: Path) -> Path:
    """An interpreter with torch: SCROLLCASE_TEST_TORCH_PYTHON, else the box the test above installed
    (installed here when it did not run)."""
    if os.environ.get("SCROLLCASE_TEST_TORCH_PYTHON"):
        return Path(os.environ["SCROLLCASE_TEST_TORCH_PYTHON"])
    dest = work / "installed box"
    if not dest.is_dir():
        host = fake_gpu(work, "550.54.14, 8.6, NVIDIA GeForce RTX 3090")
        scrollcase(work, "unpack", str(release), str(dest), env=host)
    return dest / "venv" / "bin" / "python"


def test_the_example_parity_script_runs_on_cpu_with_the_boxs_torch(torch_python: Path, tmp_path: Path) -> None:
    check_the_script_runs_on_cpu_and_refuses_a_missing_gpu(torch_python, tmp_path)


def test_device_check_with_the_boxs_torch_refuses_a_machine_without_a_gpu(torch_python: Path) -> None:
    check_device_check_without_a_gpu_fails_cleanly(torch_python)


def test_an_old_driver_is_refused_before_extracting(work: Path, release: Path) -> None:
    manifest = json.loads(release.read_text())
    host = fake_gpu(work, "535.104.05, 8.6, NVIDIA GeForce RTX 3090")
    done = scrollcase(work, "unpack", str(release), str(work / "old-driver"), env=host, check=False)
    assert done.returncode == 11 and not (work / "old-driver").exists()
    assert manifest["compatibility"]["minNvidiaDriverVersion"] in done.stderr


def test_a_lock_for_cuda132_fails_lock_check_and_build_with_their_own_messages(work: Path, locked: Path) -> None:
    other = work / "recipes-132"
    shutil.copytree(work / "recipes" / RECIPE, other / RECIPE.replace("12.4", "13.2"))
    folder = other / RECIPE.replace("12.4", "13.2")
    for name in ("recipe.json", "pixi.toml"):
        path = folder / name
        path.write_text(path.read_text().replace("12.4", "13.2").replace('torch = "==2.6.0"', 'torch = "==2.15.0"'))
    scrollcase(work, "lock", folder.name, "--recipes-root", str(other), *override(work))  # metadata only
    wrong = work / "recipes-wrong"
    shutil.copytree(work / "recipes" / RECIPE, wrong / RECIPE)
    shutil.copy(folder / "pixi.lock", wrong / RECIPE / "pixi.lock")
    check = scrollcase(work, "lock-check", RECIPE, "--recipes-root", str(wrong), *override(work), check=False)
    assert check.returncode == 4
    assert "a build for cuda13.2" in check.stderr and "torch 2.5 or 2.6" in check.stderr
    build = scrollcase(
        work, "build", RECIPE, "--recipes-root", str(wrong), "--state-dir", str(work / "wrong-state"), check=False
    )
    assert build.returncode == 5
    assert "does not hold what linux-x86_64-cuda12.4 promises, so nothing was downloaded" in build.stderr


def fake_gpu(work: Path, answer: str) -> dict[str, str]:
    """PATH with a fake ``nvidia-smi`` that reports one GPU (driver, compute capability, name)."""
    folder = work / "fake-gpu" / answer.split(",")[0]
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho '{answer}'\n", encoding="utf-8")
    tool.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
