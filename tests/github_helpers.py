"""Shared fixtures for the GitHub suite: valid recipe folders generated through the real models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scrollcase.recipe.model import Recipe
from tests.support.targets import target_fields, target_spec


def recipe_data(box_id: str, target_id: str, version: str = "1.0.0") -> dict[str, Any]:
    """recipe.json content for ``box_id`` on ``target_id``, valid by construction."""
    spec = target_spec(target_id)
    target = target_fields(target_id)
    compatibility: dict[str, Any] = {"minHostAppVersion": "1.0.0", "minRamGb": 4}
    if spec.cuda_version:
        compatibility["minNvidiaDriverVersion"] = "550.54.14"
    data = {
        "schemaVersion": 1,
        "recipeId": f"{box_id}-{target_id}",
        "recipeVersion": "1.0.0",
        "boxId": box_id,
        "modelId": f"example-{box_id}",
        "runtimeId": f"{box_id}-runtime",
        "version": version,
        "sourceRevision": f"{box_id}-v{version}",
        "target": target,
        "compatibility": compatibility,
        "pythonVersion": "3.11",
        "pixiVersion": "0.73.0",
        "pythonEntryPoint": "venv/python.exe" if spec.platform == "windows" else "venv/bin/python",
        "modelCacheSubdir": f"model-cache/{box_id}",
        "assetBaseUrl": "https://assets.example.org/boxes",
        "assets": [],
        "selfTest": {"imports": ["json"], "files": [], "pythonCode": "print('ok')"},
    }
    Recipe.model_validate(data)  # a fixture that is not a valid recipe would test nothing
    return data


def recipe(box_id: str, target_id: str, version: str = "1.0.0") -> Recipe:
    return Recipe.model_validate(recipe_data(box_id, target_id, version))


def write_recipe(recipes_root: Path, box_id: str, target_id: str, version: str = "1.0.0") -> Path:
    """recipes/<recipeId>/recipe.json (+ a pixi.toml placeholder); returns the folder."""
    data = recipe_data(box_id, target_id, version)
    folder = recipes_root / str(data["recipeId"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return folder
