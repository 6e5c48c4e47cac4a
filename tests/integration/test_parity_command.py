"""``scrollcase parity`` as a user runs it: a real CLI process, a real recipe folder, a real box archive.

The "box" interpreter is the test's own ``sys.executable`` (directly with --python, or behind a
``venv/bin/python`` wrapper packed into a real .tar.zst release that the command verifies and unpacks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from junitparser import Failure, JUnitXml

from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.release import ReleaseManifest, dump_release, object_keys, parse_release

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "parity" / "numpy_mlp.py"
RECIPE_ID = "tiny-linux-x86_64-cuda12.4"
SCRIPT = f"recipes/{RECIPE_ID}/checks/parity.py"


def recipe_json() -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "recipeId": RECIPE_ID,
        "recipeVersion": "1.0.0",
        "boxId": "tiny",
        "modelId": "tiny-mlp",
        "runtimeId": "tiny-runtime",
        "version": "1.0.0",
        "sourceRevision": "v1",
        "target": {"platform": "linux", "arch": "x86_64", "accelerator": "cuda", "cudaVersion": "12.4"},
        "compatibility": {"minHostAppVersion": "1.0.0", "minNvidiaDriverVersion": "550.54.14", "minRamGb": 1},
        "pythonVersion": "3.11",
        "pixiVersion": "0.73.0",
        "pythonEntryPoint": "venv/bin/python",
        "modelCacheSubdir": "model-cache/tiny",
        "assetBaseUrl": "https://assets.example.org/boxes",
        "assets": [],
        "selfTest": {"imports": ["numpy"], "files": [], "pythonCode": ""},
        "parity": {
            "script": "checks/parity.py",
            "accelerators": ["cpu", "cuda"],
            "tolerances": {"absolute": 1e-4, "relative": 1e-3, "minimumCosine": 0.9999},
        },
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    recipe = tmp_path / "recipes" / RECIPE_ID
    (recipe / "checks").mkdir(parents=True)
    (recipe / "recipe.json").write_text(json.dumps(recipe_json(), indent=2))
    shutil.copyfile(FIXTURE, recipe / "checks" / "parity.py")
    return tmp_path


def scenario(project: Path, data: dict[str, Any]) -> None:
    (project / SCRIPT).with_name("scenario.json").write_text(json.dumps(data))


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_ACTIONS", None)
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", "parity", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_gate_passes_and_writes_junit(project: Path) -> None:
    done = cli(project, RECIPE_ID, "--python", sys.executable, "--junit", "out/parity.xml")
    assert done.returncode == 0, done.stderr
    assert "parity passed" in done.stdout and "cuda         logits  pass" in done.stdout
    assert "parity: cuda: ok: ran on cuda" in done.stderr
    suite = next(iter(JUnitXml.fromfile(str(project / "out" / "parity.xml"))))
    cases = {case.name: case for case in suite}
    assert set(cases) == {"run on cpu", "run on cuda", "hidden", "logits"}
    logits = cases["logits"]
    assert logits.classname == f"parity.{RECIPE_ID}.cuda" and logits.is_passed
    assert logits._elem.get("file") == SCRIPT
    props = {p.get("name"): p.get("value") for p in logits._elem.iter("property")}
    assert float(props["cosine"]) > 0.9999 and float(props["maxAbsoluteError"]) < 1e-4


def test_gate_failure_exits_with_the_parity_code_and_names_the_script(project: Path) -> None:
    scenario(project, {"cuda": {"perturb": {"logits": [[1, 2], 0.01]}}})
    done = cli(project, RECIPE_ID, "--python", sys.executable, "--junit", "parity.xml")
    assert done.returncode == 7, done.stderr
    assert "parity FAILED (1 failure(s)):" in done.stdout
    assert "error: parity failed: 1 failure(s)" in done.stderr
    assert f"{SCRIPT}: error: cuda.logits: 1 of 160 element(s) exceed" in done.stderr
    assert "fix: keep the outputs with --keep-outputs DIR" in done.stderr
    cases = {case.name: case for case in next(iter(JUnitXml.fromfile(str(project / "parity.xml"))))}
    failure = cases["logits"].result[0]
    assert isinstance(failure, Failure) and "worst at [1, 2]" in (failure.message or "")
    assert cases["hidden"].is_passed


def test_json_output_is_one_document_even_on_failure(project: Path) -> None:
    scenario(project, {"cuda": {"lie": "cpu"}})
    done = cli(project, RECIPE_ID, "--python", sys.executable, "--json", "--quiet")
    assert done.returncode == 7 and done.stderr == ""
    data = json.loads(done.stdout)
    assert data["recipeId"] == RECIPE_ID and data["report"]["passed"] is False
    run = next(r for r in data["report"]["results"] if r["accelerator"] == "cuda")
    assert run["kind"] == "run" and "silent fallback" in run["message"]


def test_without_a_built_box_the_command_says_what_to_do(project: Path) -> None:
    done = cli(project, RECIPE_ID)
    assert done.returncode == 2
    assert f"no built release of {RECIPE_ID}" in done.stderr and "scrollcase build" in done.stderr


def test_accelerators_option_overrides_and_is_validated(project: Path) -> None:
    done = cli(project, RECIPE_ID, "--python", sys.executable, "--accelerators", "cuda,metal", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["report"]["reference"] == "cuda"
    bad = cli(project, RECIPE_ID, "--python", sys.executable, "--accelerators", "cpu,tpu")
    assert bad.returncode == 2 and "--accelerators 'cpu,tpu'" in bad.stderr


def test_compare_saved_outputs(project: Path) -> None:
    assert cli(project, RECIPE_ID, "--python", sys.executable, "--keep-outputs", "kept").returncode == 0
    ok = cli(
        project,
        "compare",
        "kept/cpu",
        "kept/cuda/outputs.npz",
        "--absolute",
        "1e-4",
        "--relative",
        "1e-3",
        "--minimum-cosine",
        "0.9999",
    )
    assert ok.returncode == 0, ok.stderr
    assert "parity passed" in ok.stdout
    tight = cli(
        project,
        "compare",
        "kept/cpu",
        "kept/cuda",
        "--absolute",
        "1e-12",
        "--relative",
        "1e-12",
        "--minimum-cosine",
        "0.9999",
        "--json",
    )
    assert tight.returncode == 7
    results = json.loads(tight.stdout)["report"]["results"]
    assert {r["output"] for r in results if not r["passed"]} == {"hidden", "logits"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compare", "a.npz", "b.npz", "--absolute", "1"], "needs --relative, --minimum-cosine"),
        (["compare", "a.npz"], "takes two output sets, got 1"),
        (["compare", "a", "b", "--absolute", "0", "--relative", "1", "--minimum-cosine", "1"], "invalid tolerances"),
        ([RECIPE_ID, "extra"], "unexpected arguments 'extra'"),
        (["compare", "a", "b", "--junit", "x.xml"], "--junit cannot be used with `parity compare`"),
        ([RECIPE_ID, "--absolute", "1"], "--absolute cannot be used with a parity run"),
    ],
)
def test_usage_errors(project: Path, args: list[str], message: str) -> None:
    done = cli(project, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_compare_of_missing_files_is_a_parity_error(project: Path) -> None:
    done = cli(
        project, "compare", "nope.npz", "nope2.npz", "--absolute", "1", "--relative", "1", "--minimum-cosine", "0.5"
    )
    assert done.returncode == 7 and "nope.npz does not exist" in done.stderr


def build_release(project: Path) -> Path:
    """A real box archive whose interpreter is a wrapper around this test's Python, plus its manifest."""
    box = project / "staging"
    (box / "venv" / "bin").mkdir(parents=True)
    wrapper = box / "venv" / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    dist = project / ".scrollcase" / "dist"
    archive_name = f"tiny-1.0.0-{'linux-x86_64-cuda12.4'}.tar.zst"
    packed = pack_tree(box, dist / archive_name)
    recipe = recipe_json()
    manifest = ReleaseManifest.model_validate(
        {
            **{
                k: recipe[k]
                for k in (
                    "boxId",
                    "modelId",
                    "runtimeId",
                    "version",
                    "sourceRevision",
                    "recipeId",
                    "recipeVersion",
                    "target",
                    "compatibility",
                    "pythonEntryPoint",
                    "modelCacheSubdir",
                )
            },
            "targetId": "linux-x86_64-cuda12.4",
            "weights": "bundled",
            "assets": [],
            "archive": {"name": archive_name, "size": packed.size, "sha256": packed.sha256},
            "keys": object_keys("tiny", "1.0.0", "linux-x86_64-cuda12.4", archive_name).model_dump(),
            "builtBy": {"scrollcase": "0.1.0", "pixi": "0.73.0", "lockSha256": "0" * 64, "pythonVersion": "3.11"},
        }
    )
    release = dist / archive_name.replace(".tar.zst", ".release.json")
    release.write_bytes(dump_release(manifest))
    return release


@pytest.mark.skipif(sys.platform == "win32", reason="the box wrapper is a POSIX shell script")
@pytest.mark.parametrize("target", ["release", "recipe"])
def test_release_is_unpacked_run_and_its_manifest_updated(project: Path, target: str) -> None:
    release = build_release(project)
    arg = str(release.relative_to(project)) if target == "release" else RECIPE_ID
    done = cli(project, arg, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["release"] == str(release.relative_to(project))
    manifest = parse_release(release.read_bytes())
    assert manifest.parity is not None and manifest.parity.passed
    assert [r.output for r in manifest.parity.results] == ["<run>", "<run>", "hidden", "logits"]
    assert manifest.parity.devices["cuda"]["accelerator"] == "cuda"
    parity = manifest.parity
    assert (parity.reference, parity.accelerators) == ("cpu", ["cpu", "cuda"])
    assert [(r.accelerator, r.kind, r.passed) for r in parity.results] == [
        ("cpu", "run", True),
        ("cuda", "run", True),
        ("cuda", "compare", True),
        ("cuda", "compare", True),
    ]
    hidden, logits = parity.results[2:]
    assert (hidden.elements, hidden.violations, logits.elements, logits.violations) == (1024, 0, 160, 0)
    assert hidden.maxAbsoluteError is not None and hidden.maxAbsoluteError <= parity.tolerances["absolute"]
    assert not list(release.parent.glob(".*.tmp"))


@pytest.mark.skipif(sys.platform == "win32", reason="the box wrapper is a POSIX shell script")
def test_a_tampered_archive_is_refused_before_running(project: Path) -> None:
    release = build_release(project)
    archive = release.parent / "tiny-1.0.0-linux-x86_64-cuda12.4.tar.zst"
    archive.write_bytes(archive.read_bytes() + b"x")
    done = cli(project, str(release))
    assert done.returncode == 8, done.stderr  # IntegrityError
    assert parse_release(release.read_bytes()).parity is None


@pytest.mark.skipif(sys.platform == "win32", reason="the box wrapper is a POSIX shell script")
def test_an_unpacked_box_and_a_recipe_elsewhere(project: Path) -> None:
    release = build_release(project)
    (project / "recipes").rename(project / "elsewhere")
    missing = cli(project, str(release))
    assert missing.returncode == 2 and f"no recipe '{RECIPE_ID}'" in missing.stderr
    done = cli(project, str(release), "--box", "staging", "--recipe-dir", f"elsewhere/{RECIPE_ID}")
    assert done.returncode == 0, done.stderr
    assert "unpacking" not in done.stderr and "staging/venv/bin/python" in done.stderr
    parity = parse_release(release.read_bytes()).parity
    assert parity is not None and parity.passed
    assert [r.output for r in parity.results] == ["<run>", "<run>", "hidden", "logits"]
    assert all(r.passed for r in parity.results)
