"""Targets named by their ID in test tables, built through the recipe's real Target model."""

from __future__ import annotations

from typing import Any

from scrollcase.recipe.model import Target
from scrollcase.targets.vocabulary import TargetSpec


def target_fields(target_id: str) -> dict[str, Any]:
    """``linux-x86_64-cuda12.4`` -> the recipe's ``target`` object (a test table's shorthand)."""
    platform, arch, accelerator = target_id.split("-")
    if accelerator.startswith("cuda"):
        return {"platform": platform, "arch": arch, "accelerator": "cuda", "cudaVersion": accelerator[4:]}
    return {"platform": platform, "arch": arch, "accelerator": accelerator}


def target_spec(target_id: str) -> TargetSpec:
    """The validated target ``target_id`` names; the Target model refuses an unsupported one."""
    spec = Target.model_validate(target_fields(target_id)).spec
    assert spec.target_id == target_id, f"{target_id!r} is not a canonical target ID"
    return spec
