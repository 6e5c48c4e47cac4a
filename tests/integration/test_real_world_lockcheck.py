"""lock-check's accelerator rules on the real PyPI-torch environments of shared/real-world.

Each row asks: would this (environment, platform) pass as the box named by the target?  The verdicts were
checked by hand against the locks (torch wheel file names and the nvidia-* wheels beside them): PyPI's
untagged Linux torch 2.8/2.9 is a CUDA 12.8 build, PyPI's Windows torch is a CPU build, PyTorch's ``+cu130``
Windows wheels bundle their CUDA runtime, and a CPU box must hold none of the nvidia CUDA wheels.
"""

from __future__ import annotations

import pytest

from scrollcase.lock.check import LockCheckInput, accelerator_problems, select_platform
from scrollcase.lock.manifest import parse_manifest
from scrollcase.lock.read import load_lock
from scrollcase.targets.classify import classify_torch
from tests.support.corpus import corpus_root, skip_without
from tests.support.targets import target_spec

ROOT = corpus_root()  # shared/ beside the checkout; an error only where .ci/run requires it
pytestmark = skip_without(ROOT)

BIA = "lorenzocerrone__BIA-Sanity-Preserver"
LLAMA = "prefix-dev__pixi__examples-llama-index-inference"

# (workspace, environment, target ID, keys of the problems)
VERDICTS = [
    (BIA, "cellpose", "linux-x86_64-cuda12.8", []),  # torch 2.9.1 + nvidia-cuda-runtime-cu12 12.8.90
    (BIA, "cellpose", "linux-x86_64-cuda12.4", ["torch"]),  # ... which is not a CUDA 12.4 box
    (BIA, "cellpose", "windows-x86_64-cuda12.8", ["torch"]),  # PyPI's Windows torch: a CPU wheel
    (BIA, "convpaint", "linux-x86_64-cpu", ["torch", "nvidia-cublas-cu12"]),  # a CUDA torch and 14 CUDA wheels
    ("Takobox710__yolo-tool", "default", "windows-x86_64-cuda13.0", []),  # 2.13.0+cu130, runtime bundled
    ("Takobox710__yolo-tool", "release-cpu", "windows-x86_64-cpu", []),  # 2.13.0+cpu
    ("pablovela5620__wilor-nano", "default", "linux-x86_64-cuda12.8", []),  # 2.10.0+cu128 + runtime 12.8.90
    (LLAMA, "default", "linux-x86_64-cuda12.1", []),  # torch 2.4.0 + nvidia-cuda-runtime-cu12 12.1.105
    (LLAMA, "default", "osx-arm64-metal", []),  # PyPI's macOS torch, no CUDA wheels
]


@pytest.mark.parametrize(
    ("workspace", "environment", "target_id", "keys"), VERDICTS, ids=[f"{w[:12]}-{e}-{t}" for w, e, t, _ in VERDICTS]
)
def test_pypi_torch_accelerator_verdicts(workspace: str, environment: str, target_id: str, keys: list[str]) -> None:
    lock = load_lock(ROOT / workspace / "pixi.lock")
    target = target_spec(target_id)
    platform = select_platform(lock, environment, target)
    assert platform is not None
    packages = lock.environments[environment].packages[platform]
    manifest = parse_manifest(f'[workspace]\nname = "x"\nplatforms = ["{target.subdir}"]\n')
    inp = LockCheckInput("real", target, manifest, lock, (), environment=environment)
    problems = accelerator_problems(inp, packages, classify_torch(packages))
    assert [p.key for p in problems] == keys, [p.message for p in problems]
    lines = (ROOT / workspace / "pixi.lock").read_text(encoding="utf-8").splitlines()
    for problem in problems:
        assert problem.line and lines[problem.line - 1].startswith("- pypi: "), problem
        assert problem.fix and "download.pytorch.org/whl/" in problem.fix
