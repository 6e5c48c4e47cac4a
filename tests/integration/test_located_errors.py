"""Errors a recipe change causes are located where the user edited, through the real CLI: on the demo
recipe (a real local channel, a real lock solved by rattler, file:// weights) edited as a PR would."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scrollcase.demo.run import DEMO_CHANNEL_NAME, demo_target, make_demo_channel, write_demo_recipe
from scrollcase.lock import solve as engine
from scrollcase.recipe.loader import resolve_recipe

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_demo_channel(tmp_path_factory.mktemp("channel") / "demo", demo_target().subdir)


@pytest.fixture
def recipe(tmp_path: Path, channel: Path) -> Path:
    """The demo recipe under ``tmp_path/recipes``, locked against the local channel (an override)."""
    folder = write_demo_recipe(tmp_path / "recipes", demo_target(), tmp_path / "assets")
    engine.lock_recipe(resolve_recipe(str(folder)), channel_overrides={DEMO_CHANNEL_NAME: channel.as_uri()})
    return folder


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "SCROLLCASE_"))}
    clean["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def line_of(file: Path, pattern: str) -> int:
    return next(n for n, text in enumerate(file.read_text().splitlines(), 1) if re.search(pattern, text))


def override(channel: Path) -> dict[str, str]:
    return {"SCROLLCASE_CHANNEL_OVERRIDES": f"{DEMO_CHANNEL_NAME}={channel.as_uri()}"}


def test_a_stale_lock_after_a_pixi_toml_edit_names_the_edited_line(recipe: Path, channel: Path) -> None:
    toml = recipe / "pixi.toml"
    toml.write_text(toml.read_text().replace('numpy = "*"', 'numpy = ">=99"'))
    done = cli("lock-check", "--json", cwd=recipe.parents[1], env=override(channel))
    assert done.returncode == 4, done.stderr
    error = json.loads(done.stdout)
    [problem] = error["problems"]
    assert problem["file"] == f"recipes/{recipe.name}/pixi.toml"
    assert problem["line"] == line_of(toml, r"^numpy = ")
    assert "pixi.lock:" in problem["message"]  # the lock's record, as secondary information
    assert f"scrollcase lock {recipe.name}" in problem["fix"]
    # the run had channel overrides: re-locking without them would solve another channel
    assert f"scrollcase lock {recipe.name}" in error["fix"] and "SCROLLCASE_CHANNEL_OVERRIDES=" in error["fix"]
    assert "<recipeId>" not in done.stdout + done.stderr
    on_github = cli("lock-check", cwd=recipe.parents[1], env={**override(channel), "GITHUB_ACTIONS": "true"})
    annotation = f"::error file=recipes/{recipe.name}/pixi.toml,line={problem['line']}"
    assert annotation in on_github.stdout + on_github.stderr
    assert f"file=recipes/{recipe.name}/pixi.lock" not in on_github.stdout + on_github.stderr


def test_a_lock_from_a_mirror_checked_without_the_override_names_it(recipe: Path, channel: Path) -> None:
    done = cli("lock-check", "--json", cwd=recipe.parents[1])
    assert done.returncode == 4, done.stderr
    [problem] = json.loads(done.stdout)["problems"]
    assert (problem["file"], problem["key"]) == (f"recipes/{recipe.name}/pixi.toml", "workspace.channels")
    assert problem["line"] == line_of(recipe / "pixi.toml", r"^channels = ")
    assert f"SCROLLCASE_CHANNEL_OVERRIDES={DEMO_CHANNEL_NAME}={channel.as_uri()}/" in problem["fix"]


def test_a_missing_lock_names_the_recipe_in_each_fix(recipe: Path, channel: Path) -> None:
    (recipe / "pixi.lock").unlink()
    checked = cli("lock-check", cwd=recipe.parents[1], env=override(channel))
    built = cli("build", recipe.name, cwd=recipe.parents[1])
    for done in (checked, built):
        assert done.returncode == 4, done.stderr
        assert f"scrollcase lock {recipe.name}" in done.stderr and "<recipeId>" not in done.stderr


def test_a_garbled_lock_names_the_recipe_in_its_fix(recipe: Path, channel: Path) -> None:
    lock = recipe / "pixi.lock"
    lock.write_text(lock.read_text().replace("version:", "versio:", 1))
    done = cli("lock-check", cwd=recipe.parents[1], env=override(channel))
    assert done.returncode == 4
    assert f"scrollcase lock {recipe.name}" in done.stderr and "<recipeId>" not in done.stderr


def build_json(recipe: Path) -> tuple[int, Any]:
    done = cli("build", recipe.name, "--json", "--state-dir", str(recipe.parents[1] / "state"), cwd=recipe.parents[1])
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


@pytest.mark.slow
def test_new_weights_without_a_new_size_fail_the_first_build_at_the_size_line(recipe: Path) -> None:
    """The commonest change: new weights at the same path, recipe.json's size and sha256 not updated."""
    weights = recipe.parents[1] / "assets" / "weights.json"
    new = weights.read_bytes() + b" " * 100
    weights.write_bytes(new)
    code, error = build_json(recipe)
    assert code == 8, error
    [problem] = error["problems"]
    assert problem["file"] == f"recipes/{recipe.name}/recipe.json"
    assert problem["line"] == line_of(recipe / "recipe.json", r'"size":')
    assert f'"size": {len(new)}' in problem["fix"] and "interrupted" not in json.dumps(error)
    assert "nothing was installed" in error["message"]  # a stat before the install stage told it
    recipe_json = json.loads((recipe / "recipe.json").read_text())
    recipe_json["assets"][0]["size"] = len(new)
    (recipe / "recipe.json").write_text(json.dumps(recipe_json, indent=2))
    code, error = build_json(recipe)  # the size is right now; the digest is still the old file's
    assert code == 8, error
    [problem] = error["problems"]
    assert problem["line"] == line_of(recipe / "recipe.json", r'"sha256":')
    assert hashlib.sha256(new).hexdigest() in problem["fix"]
