"""`lock` then `lock-check` round-trip on the project's own example recipes, against local channels.

The examples name conda-forge, which is out of reach here; the channel override points it at a local
channel holding the same package names (python, numpy, cuda-version, pytorch cpu and cuda builds) for
each recipe's subdir, so the solve and the checks are the real ones.
"""

from __future__ import annotations

import json
import shutil
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pytest

from scrollcase.cli import main
from scrollcase.lock import channels
from scrollcase.lock.read import load_lock
from scrollcase.recipe.loader import discover_recipes, load_recipe
from scrollcase.targets.classify import classify_torch
from tests.integration.lock_channel_kit import make_channel

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = discover_recipes(REPO / "recipes")


def run_cli(*args: str) -> tuple[int, str]:
    out = StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def conda_forge(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One local channel with every subdir the examples target."""
    root = tmp_path_factory.mktemp("conda-forge")
    subdirs = sorted({load_recipe(p).target.spec.subdir for p in EXAMPLES})
    for subdir in subdirs:
        make_channel(root, cuda=("12.4", "12.8"), subdir=subdir)
    return root.as_uri()


def test_there_are_examples_for_every_kind_of_target() -> None:
    ids = {p.name for p in EXAMPLES}
    assert {
        "tiny-mlp-linux-x86_64-cpu",
        "tiny-mlp-linux-x86_64-cuda12.4",
        "tiny-mlp-linux-x86_64-cuda12.8",
        "tiny-mlp-windows-x86_64-cuda12.4",
        "tiny-mlp-osx-arm64-metal",
    } <= ids


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_lock_then_lock_check_round_trip(
    example: Path, conda_forge: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(channels.OVERRIDES_ENV, f"conda-forge={conda_forge}")
    shutil.copytree(example, tmp_path / "recipes" / example.name)
    recipe = load_recipe(example)

    code, out = run_cli("lock", example.name, "--json")
    assert code == 0, out
    lock = load_lock(tmp_path / "recipes" / example.name / "pixi.lock")
    torch = classify_torch(lock.environments["default"].packages[recipe.target.spec.subdir])
    expected = f"cuda{recipe.target.cudaVersion}" if recipe.target.cudaVersion else "cpu"
    assert torch.accelerator == expected, json.loads(out)

    code, out = run_cli("lock-check", "--json")
    assert code == 0, out


def test_a_cuda_example_refuses_a_channel_without_gpu_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_only = make_channel(tmp_path / "cpu-only", cuda=())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(channels.OVERRIDES_ENV, f"conda-forge={cpu_only.as_uri()}")
    example = REPO / "recipes" / "tiny-mlp-linux-x86_64-cuda12.4"
    shutil.copytree(example, tmp_path / "recipes" / example.name)
    code, out = run_cli("lock", example.name, "--json")
    assert code == 4
    assert "pytorch" in json.loads(out)["message"] + json.dumps(json.loads(out)["problems"])
    assert not (tmp_path / "recipes" / example.name / "pixi.lock").exists()
