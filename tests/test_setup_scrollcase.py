"""actions/setup_scrollcase.py, the one copy of the actions' setup: the key, the paths, the outputs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.action_harness import setup_script
from tests.support.tools import tool

ROOT = Path(__file__).resolve().parents[1]
setup = setup_script()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "scrollcase" / "data").mkdir(parents=True)
    (src / "actions").mkdir()
    (src / "pyproject.toml").write_text("[project]\nname = 'scrollcase'\n")
    (src / "scrollcase" / "__init__.py").write_text("")
    (src / "scrollcase" / "data" / "recipe.json").write_text("{}")
    shutil.copy2(ROOT / "actions" / "setup_scrollcase.py", src / "actions" / "setup_scrollcase.py")
    return src


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "ARM64",
        "GITHUB_WORKSPACE": str(tmp_path),
        **extra,
    }


def test_locate_names_the_venv_the_key_and_the_workdir(root: Path, tmp_path: Path) -> None:
    (tmp_path / "boxes").mkdir()
    out = setup.locate(root, env(tmp_path, INPUT_WORKING_DIRECTORY="boxes"))
    version = ".".join(map(str, sys.version_info[:3]))
    assert out["key"].startswith(f"scrollcase-venv-Linux-ARM64-{version}-") and len(out["key"].split("-")[-1]) == 20
    assert out["venv"] == str(tmp_path / "temp" / "scrollcase-venv")
    assert out["python"] == str(tmp_path / "temp" / "scrollcase-venv" / "bin" / "python")
    assert out["workdir"] == str((tmp_path / "boxes").resolve()) and out["cache"] == "true"
    assert out["results"] == str(tmp_path / "temp" / "scrollcase-results")
    assert setup.locate(root, env(tmp_path, INPUT_CACHE="false"))["cache"] == "false"
    windows = setup.locate(root, env(tmp_path, RUNNER_OS="Windows"))
    assert windows["python"].endswith("Scripts/python.exe") and "-Windows-" in windows["key"]


def test_the_key_follows_every_package_file_but_not_bytecode(root: Path, tmp_path: Path) -> None:
    key = setup.locate(root, env(tmp_path))["key"]
    (root / "scrollcase" / "__pycache__").mkdir()
    (root / "scrollcase" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert setup.locate(root, env(tmp_path))["key"] == key
    (root / "scrollcase" / "data" / "recipe.json").write_text("{ }")
    assert setup.locate(root, env(tmp_path))["key"] != key
    names = [p.relative_to(root).as_posix() for p in setup.source_files(root)]
    assert names == [
        "pyproject.toml",
        "scrollcase/__init__.py",
        "scrollcase/data/recipe.json",
        "actions/setup_scrollcase.py",
    ]


def test_a_venv_built_for_the_key_turns_the_cache_off(root: Path, tmp_path: Path) -> None:
    out = setup.locate(root, env(tmp_path))
    python = Path(out["python"])
    python.parent.mkdir(parents=True)
    python.write_text("")
    (Path(out["venv"]) / setup.MARKER).write_text(out["key"] + "\n")
    assert setup.locate(root, env(tmp_path))["cache"] == "false"
    (Path(out["venv"]) / setup.MARKER).write_text("scrollcase-venv-other\n")
    assert setup.locate(root, env(tmp_path))["cache"] == "true"


def test_main_writes_outputs_and_refuses_a_missing_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "output"
    for name, value in env(tmp_path, GITHUB_OUTPUT=str(output)).items():
        monkeypatch.setenv(name, value)
    assert setup.main(["locate"]) == 0
    lines = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert set(lines) == {"root", "workdir", "venv", "python", "key", "cache", "results"}
    assert lines["root"] == str(ROOT) and Path(lines["results"]).is_dir()
    monkeypatch.setenv("INPUT_WORKING_DIRECTORY", "no-such-folder")
    assert setup.main(["locate"]) == 1
    assert "::error title=working-directory::" in capsys.readouterr().out
    assert setup.main(["bogus"]) == 2


def test_pip_version(tmp_path: Path) -> None:
    assert setup._pip_version(sys.executable) >= (22, 3)
    assert setup._pip_version(str(tmp_path / "no-python")) == (0,)


@pytest.mark.slow
def test_the_script_is_strictly_typed() -> None:
    """It is not part of the package (mypy's `files`), so it is checked on its own, as ci.yml's lint does."""
    done = subprocess.run(
        [tool("mypy"), "--strict", "actions/setup_scrollcase.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_uv_requirement_is_scrollcases_own(root: Path) -> None:
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'scrollcase'\ndependencies = ['uvicorn>=1', 'uv>=0.9,<0.14 ; python_version >= \"3.11\"']\n"
    )
    assert setup.uv_requirement(root) == "uv>=0.9,<0.14"
    (root / "pyproject.toml").write_text("[project]\nname = 'scrollcase'\n")
    assert setup.uv_requirement(root) == "uv"
    assert setup.uv_requirement(ROOT).startswith("uv>=")  # the real one pins a range


def test_pips_index_settings_become_uvs_options() -> None:
    pip = {
        "PIP_INDEX_URL": "https://mirror.example/simple",
        "PIP_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple",
        "PIP_FIND_LINKS": "/wheels",
        "PIP_NO_INDEX": "true",
    }
    assert setup.uv_index_args(pip) == [
        "--index-url",
        "https://mirror.example/simple",
        "--extra-index-url",
        "https://a.example/simple",
        "--extra-index-url",
        "https://b.example/simple",
        "--find-links",
        "/wheels",
        "--no-index",
    ]
    own = {"UV_DEFAULT_INDEX": "x", "UV_INDEX": "y", "UV_FIND_LINKS": "z"}
    assert setup.uv_index_args({**pip, **own, "PIP_NO_INDEX": "0"}) == []  # uv's own settings win
    assert setup.uv_index_args({}) == []
