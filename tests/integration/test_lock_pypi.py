"""`scrollcase lock` resolves [pypi-dependencies] with the real uv, from a local index, for the target's CUDA.

The index holds two torch releases the way PyPI does: 2.6.0 needs ``nvidia-cuda-runtime-cu12==12.4.127``,
2.15.0 needs the unsuffixed ``nvidia-cuda-runtime==13.2.86``.  Only the CUDA constraints decide which one a
recipe gets.  The conda part (python, numpy) comes from the demo channel made from this machine's CPython.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.demo.run import make_demo_channel
from scrollcase.errors import SolveError
from scrollcase.lock import solve as engine
from scrollcase.lock.read import load_lock
from scrollcase.recipe.loader import resolve_recipe
from scrollcase.targets.classify import classify_torch
from tests.integration.lock_channel_kit import recipe_json
from tests.support.pypi_index import make_index
from tests.support.wheels import make_wheel

pytestmark = pytest.mark.slow
NUMPY = importlib.metadata.version("numpy")  # what the demo channel packages as conda's numpy

PIXI_TOML = """\
[workspace]
name = "{name}"
channels = ["conda-forge"]
platforms = ["linux-64"]
{system}
[dependencies]
python = "{python}.*"
numpy = "*"

[pypi-dependencies]
torch = "{torch}"

[pypi-options]
index-url = "{index}"
"""


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_demo_channel(tmp_path_factory.mktemp("channel") / "demo", "linux-64").as_uri()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    files = tmp_path_factory.mktemp("wheels")
    wheels = [
        make_wheel(
            files,
            "torch",
            "2.6.0",
            {"torch/__init__.py": b"__version__ = '2.6.0'\n"},
            requires=("filelock", "numpy", 'nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux"'),
        ),
        make_wheel(
            files,
            "torch",
            "2.15.0",
            {"torch/__init__.py": b"__version__ = '2.15.0'\n"},
            requires=("filelock", 'nvidia-cuda-runtime==13.2.86; platform_system == "Linux"'),
        ),
        make_wheel(files, "nvidia-cuda-runtime-cu12", "12.4.127", {"nvidia/cuda_runtime/__init__.py": b""}),
        make_wheel(files, "nvidia-cuda-runtime", "13.2.86", {"nvidia/cuda_runtime/__init__.py": b""}),
        make_wheel(files, "filelock", "3.16.1", {"filelock/__init__.py": b""}),
        make_wheel(files, "numpy", NUMPY, {"numpy/__init__.py": b""}),
    ]
    return make_index(tmp_path_factory.mktemp("index"), wheels)


def _recipe(root: Path, channel: str, index: str, cuda: str | None, torch: str = "*") -> Path:
    recipe_id = f"demo-linux-x86_64-{'cuda' + cuda if cuda else 'cpu'}"
    folder = root / "recipes" / recipe_id
    folder.mkdir(parents=True)
    (folder / "recipe.json").write_text(recipe_json(recipe_id, "cuda" if cuda else "cpu", cuda))
    system = f'\n[system-requirements]\ncuda = "{cuda}"\n' if cuda else ""
    python = json.loads((folder / "recipe.json").read_text())["pythonVersion"]
    (folder / "pixi.toml").write_text(
        PIXI_TOML.format(name=recipe_id, system=system, python=python, torch=torch, index=index)
    )
    return folder


def _lock(folder: Path, channel: str) -> dict[str, str]:
    recipe_dir = resolve_recipe(str(folder))
    path = engine.lock_recipe(recipe_dir, channel_overrides={"conda-forge": channel})
    packages = load_lock(path).environments["default"].packages["linux-64"]
    return {p.name: p.version for p in packages if p.kind == "pypi"}


def test_cuda124_gets_the_torch_built_for_cuda124_and_conda_numpy_is_held(
    tmp_path: Path, channel: str, index: str
) -> None:
    folder = _recipe(tmp_path, channel, index, "12.4")
    pypi = _lock(folder, channel)
    assert pypi == {"torch": "2.6.0", "nvidia-cuda-runtime-cu12": "12.4.127", "filelock": "3.16.1"}
    lock = load_lock(folder / "pixi.lock")
    packages = lock.environments["default"].packages["linux-64"]
    assert classify_torch(packages).accelerator == "cuda12.4"
    torch = next(p for p in packages if p.name == "torch")
    text = (folder / "pixi.lock").read_text()
    assert f"- {index}" in text and "  requires_dist:\n  - filelock\n  - numpy\n" in text
    assert torch.filename == "torch-2.6.0-py3-none-any.whl"


def test_cuda132_gets_the_newer_torch(tmp_path: Path, channel: str, index: str) -> None:
    assert _lock(_recipe(tmp_path, channel, index, "13.2"), channel)["torch"] == "2.15.0"


def test_no_torch_for_the_cuda_is_explained_in_the_recipes_terms(tmp_path: Path, channel: str, index: str) -> None:
    folder = _recipe(tmp_path, channel, index, "12.8")
    with pytest.raises(SolveError, match=r"PyPI dependencies of demo-linux-x86_64-cuda12\.8") as info:
        _lock(folder, channel)
    problem = info.value.problems[0]
    assert problem.key == "pypi-dependencies.torch" and problem.file and problem.file.endswith("pixi.toml")
    assert "CUDA 12.8" in (problem.fix or "") and "nvidia-cuda-runtime" in problem.message
    assert not (folder / "pixi.lock").exists()


def test_a_cpu_target_refuses_cuda_torch(tmp_path: Path, channel: str, index: str) -> None:
    with pytest.raises(SolveError) as info:
        _lock(_recipe(tmp_path, channel, index, None), channel)
    assert "download.pytorch.org/whl/cpu" in (info.value.problems[0].fix or "")


def test_the_cli_locks_and_lock_check_agrees(tmp_path: Path, channel: str, index: str) -> None:
    folder = _recipe(tmp_path, channel, index, "12.4", torch="==2.6.0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    scrollcase = [sys.executable, "-m", "scrollcase"]
    override = ["--channel-override", f"conda-forge={channel}", "--recipes-root", str(folder.parent)]
    done = subprocess.run(
        [*scrollcase, "lock", folder.name, *override, "--json"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["torch"] == {
        "provider": "pypi",
        "version": "2.6.0",
        "build": None,
        "accelerator": "cuda12.4",
    }
    check = subprocess.run(
        [*scrollcase, "lock-check", folder.name, *override], capture_output=True, text=True, env=env, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
