"""Valid recipe dictionaries for tests: start from one, break one thing."""

from __future__ import annotations

import copy
import json
from typing import Any

from scrollcase.targets.vocabulary import TargetSpec

CUDA_RECIPE: dict[str, Any] = {
    "schemaVersion": 1,
    "recipeId": "my-model-linux-x86_64-cuda12.4",
    "recipeVersion": "1.0.0",
    "boxId": "my-model",
    "modelId": "example-org-my-model",
    "runtimeId": "my-model-runtime",
    "version": "1.0.0",
    "sourceRevision": "my-model-v1.2.0",
    "target": {"platform": "linux", "arch": "x86_64", "accelerator": "cuda", "cudaVersion": "12.4"},
    "compatibility": {"minHostAppVersion": "1.0.0", "minNvidiaDriverVersion": "550.54.14", "minRamGb": 16},
    "pythonVersion": "3.11",
    "pixiVersion": "0.73.0",
    "pythonEntryPoint": "venv/bin/python",
    "modelCacheSubdir": "model-cache/my-model",
    "assetBaseUrl": "https://assets.example.org/boxes",
    "assets": [
        {"name": "weights", "path": "my-model/weights.bin", "sha256": "a" * 64, "size": 1024},
        {"name": "config", "path": "my-model/config.json", "sha256": "b" * 64, "size": 12},
    ],
    "selfTest": {
        "imports": ["torch"],
        "files": ["model-cache/my-model/config.json"],
        "pythonCode": "import torch; assert torch.cuda.is_available()",
    },
    "parity": {
        "script": "checks/parity.py",
        "accelerators": ["cpu", "cuda"],
        "tolerances": {"absolute": 1e-4, "relative": 1e-3, "minimumCosine": 0.9999},
    },
    "prunePaths": ["venv/share/doc", "venv/lib/python3.11/site-packages/torch/test"],
}


def cuda_recipe() -> dict[str, Any]:
    return copy.deepcopy(CUDA_RECIPE)


def cpu_recipe() -> dict[str, Any]:
    data = cuda_recipe()
    data["recipeId"] = "my-model-linux-x86_64-cpu"
    data["target"] = {"platform": "linux", "arch": "x86_64", "accelerator": "cpu"}
    del data["compatibility"]["minNvidiaDriverVersion"]
    data["parity"]["accelerators"] = ["cpu"]
    return data


def to_text(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


def pixi_toml(data: dict[str, Any]) -> str:
    """A pixi.toml that follows every rule for the recipe ``data`` (validate and lock-check check them)."""
    target = data["target"]
    spec = TargetSpec(target["platform"], target["arch"], target["accelerator"], target.get("cudaVersion"))
    lines = [
        "[workspace]",
        f'name = "{data["recipeId"]}"',
        'channels = ["conda-forge"]',
        f'platforms = ["{spec.subdir}"]',
    ]
    if spec.is_cuda:
        lines += ["", "[system-requirements]", f'cuda = "{spec.cuda_version}"']
    lines += ["", "[dependencies]", f'python = "{data["pythonVersion"]}.*"']
    build = "cuda*" if spec.is_cuda else "cpu*"
    lines += [f'pytorch = {{ version = "2.*", build = "{build}" }}']
    if spec.is_cuda:
        lines += [f'cuda-version = "{spec.cuda_version}.*"']
    return "\n".join(lines) + "\n"
