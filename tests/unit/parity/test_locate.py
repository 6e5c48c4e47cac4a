"""Finding the recipe, release and interpreter for a parity run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.errors import BuildError, RecipeError, UsageError
from scrollcase.parity import locate
from scrollcase.recipe.loader import RecipeDir, parse_recipe

RECIPE = {
    "schemaVersion": 1,
    "recipeId": "tiny-windows-x86_64-cuda12.4",
    "recipeVersion": "1.0.0",
    "boxId": "tiny",
    "modelId": "tiny",
    "runtimeId": "tiny-rt",
    "version": "1.0.0",
    "sourceRevision": "v1",
    "target": {"platform": "windows", "arch": "x86_64", "accelerator": "cuda", "cudaVersion": "12.4"},
    "compatibility": {"minHostAppVersion": "1.0.0", "minNvidiaDriverVersion": "550", "minRamGb": 1},
    "pythonVersion": "3.11",
    "pixiVersion": "0.73.0",
    "pythonEntryPoint": "venv/python.exe",
    "modelCacheSubdir": "model-cache/tiny",
    "assetBaseUrl": "https://example.org",
    "assets": [],
    "selfTest": {"imports": [], "files": []},
}


def recipe_dir(tmp_path: Path, parity: bool = True) -> RecipeDir:
    data = dict(RECIPE)
    if parity:
        data["parity"] = {
            "script": "checks/parity.py",
            "accelerators": ["cpu", "cuda"],
            "tolerances": {"absolute": 1e-4, "relative": 1e-3, "minimumCosine": 0.9999},
        }
    return RecipeDir(tmp_path, parse_recipe(json.dumps(data)))


def test_accelerators_default_to_the_recipe_and_are_validated() -> None:
    assert locate.parse_accelerators(None, ["cpu", "cuda"]) == ["cpu", "cuda"]
    assert locate.parse_accelerators(" cuda , cpu ", ["cpu"]) == ["cuda", "cpu"]
    for bad in ("", "cpu,cpu", "cpu,tpu", ","):
        with pytest.raises(UsageError, match="is not a list of distinct accelerators"):
            locate.parse_accelerators(bad, ["cpu"])


def test_release_arguments_are_recognised_by_suffix() -> None:
    assert locate.is_release_arg("dist/tiny-1.0.0-linux-x86_64-cpu.release.json")
    assert not locate.is_release_arg("tiny-linux-x86_64-cpu")


def test_parity_block_and_script_are_required(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="has no parity block"):
        locate.parity_block(recipe_dir(tmp_path, parity=False))
    with pytest.raises(RecipeError, match=r"parity\.script 'checks/parity\.py' does not exist"):
        locate.parity_block(recipe_dir(tmp_path))
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "parity.py").write_text("")
    assert locate.parity_block(recipe_dir(tmp_path)).accelerators == ["cpu", "cuda"]


def test_the_box_interpreter_follows_the_entry_point_on_windows_layouts(tmp_path: Path) -> None:
    entry = recipe_dir(tmp_path).recipe.pythonEntryPoint
    with pytest.raises(BuildError, match=r"no interpreter at venv/python.exe"):
        locate.box_python(tmp_path, entry)
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "python.exe").write_bytes(b"")
    assert locate.box_python(tmp_path, entry) == tmp_path / "venv" / "python.exe"


def test_built_release_is_looked_up_by_name(tmp_path: Path) -> None:
    recipe = recipe_dir(tmp_path).recipe
    assert locate.built_release(recipe, tmp_path) is None
    (tmp_path / recipe.release_name).write_text("{}")
    expected = tmp_path / "tiny-1.0.0-windows-x86_64-cuda12.4.release.json"
    assert locate.built_release(recipe, tmp_path) == expected


def test_unreadable_release_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read release manifest"):
        locate.read_release(tmp_path / "missing.release.json")
