"""`scrollcase validate` checks file:// assets (size, then sha256) up front, through the real CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.recipe_samples import cpu_recipe, to_text

REPO = Path(__file__).resolve().parents[2]
WEIGHTS = b"new weights " * 1000
CONFIG = b'{"layers": 2}'


def cli(*args: str, cwd: Path, github: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "PYTHONPATH", "GITHUB_WORKSPACE")}
    env["PYTHONPATH"] = str(REPO)
    if github:
        env["GITHUB_ACTIONS"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def write_recipe(root: Path, weights_sha: str, weights_size: int) -> dict[str, Any]:
    """A CPU recipe whose assets live in ``root/store`` (file://), weights declared as given."""
    store = root / "store" / "my-model"
    store.mkdir(parents=True, exist_ok=True)
    (store / "weights.bin").write_bytes(WEIGHTS)
    (store / "config.json").write_bytes(CONFIG)
    data = cpu_recipe()
    data["assetBaseUrl"] = (root / "store").as_uri()
    data["assets"][0].update(sha256=weights_sha, size=weights_size)
    data["assets"][1].update(sha256=hashlib.sha256(CONFIG).hexdigest(), size=len(CONFIG))
    folder = root / "recipes" / data["recipeId"]
    (folder / "checks").mkdir(parents=True, exist_ok=True)
    (folder / "checks" / "parity.py").write_text("")
    (folder / "pixi.toml").write_text(
        '[workspace]\nname = "m"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n\n'
        '[dependencies]\npython = "3.11.*"\npytorch = { version = "2.*", build = "cpu*" }\n'
    )
    (folder / "recipe.json").write_text(to_text(data))
    return data


def field_line(root: Path, recipe_id: str, index: int, field: str) -> int:
    text = (root / "recipes" / recipe_id / "recipe.json").read_text().splitlines()
    return [n for n, line in enumerate(text, 1) if f'"{field}":' in line][index]


def asset_problems(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    problems = json.loads(result.stdout)["recipes"][0]["problems"]
    return [p for p in problems if str(p.get("key", "")).startswith("assets")]


def test_a_wrong_local_asset_size_fails_validate_at_its_line(tmp_path: Path) -> None:
    data = write_recipe(tmp_path, hashlib.sha256(WEIGHTS).hexdigest(), len(WEIGHTS) + 1)
    result = cli("--json", "validate", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    [problem] = asset_problems(result)
    assert problem["file"] == f"recipes/{data['recipeId']}/recipe.json"
    assert problem["line"] == field_line(tmp_path, data["recipeId"], 0, "size")
    assert problem["key"] == "assets[0].size" and f'"size": {len(WEIGHTS)}' in problem["fix"]


def test_a_wrong_local_asset_digest_fails_validate_with_the_digest_to_write(tmp_path: Path) -> None:
    data = write_recipe(tmp_path, "0" * 64, len(WEIGHTS))
    result = cli("validate", cwd=tmp_path, github=True)
    assert result.returncode == 3
    line = field_line(tmp_path, data["recipeId"], 0, "sha256")
    annotation = f"::error file=recipes/{data['recipeId']}/recipe.json,line={line},"
    assert annotation in result.stdout + result.stderr
    assert hashlib.sha256(WEIGHTS).hexdigest() in result.stdout + result.stderr


def test_a_missing_local_asset_fails_validate_at_its_path_line(tmp_path: Path) -> None:
    data = write_recipe(tmp_path, hashlib.sha256(WEIGHTS).hexdigest(), len(WEIGHTS))
    (tmp_path / "store" / "my-model" / "weights.bin").unlink()
    result = cli("--json", "validate", cwd=tmp_path)
    [problem] = asset_problems(result)
    assert problem["key"] == "assets[0].path" and "no file at" in problem["message"]
    assert problem["line"] == field_line(tmp_path, data["recipeId"], 0, "path")


def test_local_assets_that_match_pass(tmp_path: Path) -> None:
    write_recipe(tmp_path, hashlib.sha256(WEIGHTS).hexdigest(), len(WEIGHTS))
    result = cli("--json", "validate", cwd=tmp_path)
    assert asset_problems(result) == [], result.stdout
