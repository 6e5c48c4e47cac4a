"""The example recipes' torch parity script and scripts/device-check, on a machine without a GPU.

torch is not a test dependency: without it, both must fail cleanly with a clear message.  With torch
(the real torch box tests/integration/test_torch_e2e.py installs, or SCROLLCASE_TEST_TORCH_PYTHON) the
same script runs for real on cpu and device-check refuses a machine without a GPU: the two checks below,
called from there.
"""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from scrollcase.io.proc import run_python
from scrollcase.parity.outputs import open_outputs
from scrollcase.parity.protocol import plan_runs
from scrollcase.parity.runner import execute

REPO = Path(__file__).resolve().parents[2]
TARGETS = (
    "linux-x86_64-cpu",
    "linux-x86_64-cuda12.4",
    "linux-x86_64-cuda12.8",
    "windows-x86_64-cuda12.4",
    "osx-arm64-metal",
)
SCRIPTS = [REPO / "recipes" / f"tiny-mlp-{t}" / "checks" / "parity.py" for t in TARGETS]


def has_torch(python: str) -> bool:
    return run_python(Path(python), ["-c", "import torch"], timeout=120).ok


def script_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tiny_mlp_parity", SCRIPTS[0])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # torch is imported lazily, inside main()
    return module


def test_every_example_recipe_has_the_same_parity_script() -> None:
    texts = {path.read_text(encoding="utf-8") for path in SCRIPTS}
    assert len(texts) == 1


@pytest.mark.parametrize("shape", [(64, 10), (7,), (), (2, 3, 4), (0,)])
def test_the_script_writes_npy_exactly_like_numpy(tmp_path: Path, shape: tuple[int, ...]) -> None:
    array = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    path = tmp_path / "outputs.npz"
    script_module().save_npz(path, {"y": (shape, array.reshape(-1).tolist())})
    expected = io.BytesIO()
    np.save(expected, array)
    assert zipfile.ZipFile(path).read("y.npy") == expected.getvalue()
    assert open_outputs(path).infos()["y"].shape == shape
    assert not list(tmp_path.glob("*.part"))


@pytest.mark.skipif(has_torch(sys.executable), reason="torch is installed here")
def test_without_torch_the_script_fails_with_a_clear_message(tmp_path: Path) -> None:
    run = plan_runs(SCRIPTS[1], ["cuda"], tmp_path)[0]
    record = execute(run, Path(sys.executable), timeout=60)
    assert not record.outcome.passed
    assert "parity: torch is not importable in" in record.outcome.message
    assert "(exit code 1)" in record.outcome.message


def check_the_script_runs_on_cpu_and_refuses_a_missing_gpu(python: Path, tmp_path: Path) -> None:
    """With ``python`` (an interpreter that has torch)."""
    cpu = execute(plan_runs(SCRIPTS[0], ["cpu"], tmp_path)[0], python, timeout=120)
    assert cpu.outcome.passed, cpu.outcome.message
    assert cpu.meta["accelerator"] == "cpu" and cpu.outputs is not None
    infos = cpu.outputs.infos()
    assert {k: (v.shape, v.dtype.str) for k, v in infos.items()} == {
        "hidden": ((64, 128), "<f4"),
        "logits": ((64, 10), "<f4"),
        "probabilities": ((64, 10), "<f4"),
    }
    again = execute(plan_runs(SCRIPTS[0], ["cpu"], tmp_path / "again")[0], python, timeout=120)
    assert again.outputs is not None
    first, second = (np.load(tmp_path / d / "cpu" / "outputs.npz")["logits"] for d in (".", "again"))
    assert np.array_equal(first, second)  # deterministic
    if not run_python(python, ["-c", "import torch,sys; sys.exit(not torch.cuda.is_available())"]).ok:
        cuda = execute(plan_runs(SCRIPTS[1], ["cuda"], tmp_path)[0], python, timeout=120)
        assert "cuda requested but torch.cuda.is_available() is False" in cuda.outcome.message


def device_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "device-check"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.skipif(has_torch(sys.executable), reason="torch is installed here")
def test_device_check_without_torch_fails_cleanly() -> None:
    done = device_check()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("device-check: cannot run here: torch is not installed in")
    assert "Traceback" not in done.stderr


def check_device_check_without_a_gpu_fails_cleanly(python: Path) -> None:
    """With ``python`` (an interpreter that has torch)."""
    no_gpu = "import torch, sys; sys.exit(torch.cuda.is_available())"
    if run_python(python, ["-c", no_gpu]).ok:
        done = device_check("--python", str(python))
        assert done.returncode == 2, done.stdout + done.stderr
        assert "device-check: cannot run here: torch" in done.stdout
    else:  # a real GPU: the whole check must pass
        done = device_check("--python", str(python))
        assert done.returncode == 0, done.stdout + done.stderr


def test_device_check_help() -> None:
    done = device_check("--help")
    assert done.returncode == 0 and "--cuda-version" in done.stdout
