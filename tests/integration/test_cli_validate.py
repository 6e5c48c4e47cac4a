"""validate, schema and doctor through the real CLI in a subprocess, on real folders and tools."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest

from tests.recipe_samples import cpu_recipe, cuda_recipe, pixi_toml, to_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "recipes"
POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="fake tools are shell scripts")
LINUX_X86_64 = sys.platform == "linux" and platform.machine().lower() in ("x86_64", "amd64")


def cli(*args: str, cwd: Path, path: str | None = None, github: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(REPO)
    if path is not None:
        env["PATH"] = path
    if github:
        env["GITHUB_ACTIONS"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write_recipe(
    root: Path,
    data: dict[str, object],
    *,
    folder: str | None = None,
    parity: bool = True,
    manifest: str | None = None,
) -> Path:
    recipe_dir = root / "recipes" / (folder or str(data["recipeId"]))
    recipe_dir.mkdir(parents=True)
    (recipe_dir / "recipe.json").write_text(to_text(data), encoding="utf-8")
    if manifest is not None:
        (recipe_dir / "pixi.toml").write_text(manifest, encoding="utf-8")
    if parity:
        (recipe_dir / "checks").mkdir()
        (recipe_dir / "checks" / "parity.py").write_text("# fixture\n", encoding="utf-8")
    return recipe_dir


def copy_examples(root: Path) -> Path:
    """The repo's example recipes, with a parity script where the parity engineer's is not here yet."""
    target = root / "recipes"
    shutil.copytree(EXAMPLES, target)
    for folder in target.iterdir():
        script = folder / "checks" / "parity.py"
        if not script.exists():
            script.parent.mkdir(exist_ok=True)
            script.write_text("# stand-in\n", encoding="utf-8")
    return target


def test_validate_examples_ok(tmp_path: Path) -> None:
    copy_examples(tmp_path)
    done = cli("validate", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len([line for line in lines if line.startswith("OK    recipes/tiny-mlp-")]) == 5
    assert "OK    recipes/torch-mlp-linux-x86_64-cuda12.4/recipe.json (torch-mlp-linux-x86_64-cuda12.4)" in lines
    assert lines[-1] == "6 of 6 recipe(s) valid"


def test_validate_reports_every_problem_with_lines(tmp_path: Path) -> None:
    good = write_recipe(tmp_path, cpu_recipe(), manifest=pixi_toml(cpu_recipe()))
    bad = cuda_recipe()
    bad["boxId"] = "My-Model"
    bad["target"]["cudaversion"] = "12.4"
    bad["parity"]["tolerances"]["minimumCosine"] = 1.5
    write_recipe(tmp_path, bad, folder="my-model-linux-x86_64-cuda12.4", parity=False, manifest="")
    done = cli("validate", cwd=tmp_path, github=True)
    assert done.returncode == 3
    assert f"OK    recipes/{good.name}/recipe.json ({good.name})" in done.stdout
    assert "FAIL  recipes/my-model-linux-x86_64-cuda12.4/recipe.json: 3 problem(s)" in done.stdout
    text = to_text(bad)
    line_of_box = next(i for i, line in enumerate(text.splitlines(), 1) if '"boxId"' in line)
    assert f"recipes/my-model-linux-x86_64-cuda12.4/recipe.json:{line_of_box}:12: error: boxId:" in done.stderr
    assert "did you mean 'cudaVersion'" in done.stderr
    assert "fix: " in done.stderr
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 3
    assert all("file=recipes/my-model-linux-x86_64-cuda12.4/recipe.json,line=" in a for a in annotations)


def test_validate_refuses_pixi_toml_rules_and_annotates_their_lines(tmp_path: Path) -> None:
    """The CUDA recipe's pixi.toml takes any pytorch build, pins CUDA 12.8 and declares no CUDA; the CPU
    recipe's declares CUDA: a CPU runner's `validate` fails both, each annotation on its pixi.toml line."""
    cuda = (
        pixi_toml(cuda_recipe())
        .replace('[system-requirements]\ncuda = "12.4"\n\n', "")
        .replace('pytorch = { version = "2.*", build = "cuda*" }', 'pytorch = "2.*"')
        .replace('cuda-version = "12.4.*"', 'cuda-version = "12.8.*"')
    )
    cpu = pixi_toml(cpu_recipe()).replace("[dependencies]", '[system-requirements]\ncuda = "12.4"\n\n[dependencies]')
    write_recipe(tmp_path, cuda_recipe(), manifest=cuda)
    write_recipe(tmp_path, cpu_recipe(), manifest=cpu)
    done = cli("validate", cwd=tmp_path, github=True)
    assert done.returncode == 3
    assert [line for line in done.stdout.splitlines() if not line.startswith("::")] == [
        "FAIL  recipes/my-model-linux-x86_64-cpu/recipe.json (my-model-linux-x86_64-cpu): 1 problem(s)",
        "FAIL  recipes/my-model-linux-x86_64-cuda12.4/recipe.json (my-model-linux-x86_64-cuda12.4): 3 problem(s)",
        "0 of 2 recipe(s) valid",
    ]

    def at(text: str, needle: str) -> int:
        return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)

    cuda_file, cpu_file = (f"recipes/my-model-linux-x86_64-{t}/pixi.toml" for t in ("cuda12.4", "cpu"))
    expected = [
        (cpu_file, at(cpu, 'cuda = "12.4"'), "system-requirements.cuda: a cpu target must not require CUDA"),
        (cuda_file, at(cuda, "platforms"), "system-requirements.cuda: the CUDA version is not declared"),
        (cuda_file, at(cuda, "pytorch"), "dependencies.pytorch: pytorch must be pinned to a CUDA build"),
        (cuda_file, at(cuda, "cuda-version"), "dependencies.cuda-version: cuda-version must pin CUDA 12.4"),
    ]
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(annotations) == len(expected)
    for (file, line, message), annotation in zip(expected, annotations, strict=True):
        assert annotation.startswith(f"::error file={file},line={line},"), annotation
        assert message in annotation
        assert f"{file}:{line}: error: {message}" in done.stderr
    fixed = cli("validate", "--json", cwd=tmp_path)
    problems = [p for r in json.loads(fixed.stdout)["recipes"] for p in r["problems"]]
    assert [(p["file"], p["line"]) for p in problems] == [(f, n) for f, n, _ in expected]
    # lock-check, the job every recommended PR workflow runs, refuses them too: the same annotations,
    # beside the lock's own problem (none is committed here)
    locked = cli("lock-check", cwd=tmp_path, github=True)
    assert locked.returncode == 4
    on_toml = [a for a in locked.stdout.splitlines() if a.startswith("::error file=") and "pixi.toml," in a]
    assert [a.split(",title=")[0] for a in on_toml] == [f"::error file={f},line={n}" for f, n, _ in expected]
    assert all(message in a for (_, _, message), a in zip(expected, on_toml, strict=True))
    assert "recipes/my-model-linux-x86_64-cpu/pixi.lock: error: the recipe has no committed lock" in locked.stderr


def test_validate_json_output(tmp_path: Path) -> None:
    write_recipe(tmp_path, cpu_recipe(), manifest=pixi_toml(cpu_recipe()))
    missing = cuda_recipe()
    write_recipe(tmp_path, missing, parity=False)  # no pixi.toml, no checks/parity.py
    done = cli("validate", "--json", cwd=tmp_path)
    assert done.returncode == 3
    payload = json.loads(done.stdout)
    by_id = {r["recipeId"]: r for r in payload["recipes"]}
    assert by_id["my-model-linux-x86_64-cpu"]["ok"] is True and by_id["my-model-linux-x86_64-cpu"]["problems"] == []
    failed = by_id["my-model-linux-x86_64-cuda12.4"]
    assert failed["ok"] is False
    assert [p.get("key") for p in failed["problems"]] == [None, "parity.script"]
    assert failed["problems"][1]["line"] > 1 and failed["problems"][1]["fix"]
    assert set(failed) == {"path", "recipeId", "ok", "problems"}


def test_validate_paths_folder_file_and_root(tmp_path: Path) -> None:
    folder = write_recipe(tmp_path, cpu_recipe(), manifest=pixi_toml(cpu_recipe()))
    assert cli("validate", str(folder), cwd=tmp_path).returncode == 0
    assert cli("validate", str(folder / "recipe.json"), "--json", cwd=tmp_path).returncode == 0
    assert cli("validate", "recipes", cwd=tmp_path).returncode == 0
    nothing = cli("validate", cwd=tmp_path / "recipes")
    assert nothing.returncode == 2 and "no recipes found" in nothing.stderr


def test_validate_malformed_files(tmp_path: Path) -> None:
    for name, content in {"empty": b"", "latin1": b'{"boxId": "caf\xe9"}', "broken": b'{"a": 1,,}'}.items():
        (tmp_path / "recipes" / name).mkdir(parents=True)
        (tmp_path / "recipes" / name / "recipe.json").write_bytes(content)
    big = tmp_path / "recipes" / "big" / "recipe.json"
    big.parent.mkdir()
    with big.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    done = cli("validate", "--json", cwd=tmp_path)
    assert done.returncode == 3
    problems = {Path(r["path"]).parent.name: r["problems"][0] for r in json.loads(done.stdout)["recipes"]}
    assert "empty" in problems["empty"]["message"]
    assert "UTF-8" in problems["latin1"]["message"] and problems["latin1"]["column"] == 15
    assert (problems["broken"]["line"], problems["broken"]["column"]) == (1, 9)
    assert "larger than" in problems["big"]["message"]


def test_schema_command_is_usable_by_jsonschema(tmp_path: Path) -> None:
    out = tmp_path / "recipe.schema.json"
    done = cli("schema", "recipe", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    validator = jsonschema.Draft202012Validator(json.loads(out.read_text(encoding="utf-8")))
    for example in EXAMPLES.glob("*/recipe.json"):
        validator.validate(json.loads(example.read_text(encoding="utf-8")))
    bad = cuda_recipe()
    bad["target"]["cudaVersion"] = 12.4
    assert list(validator.iter_errors(bad))
    printed = cli("schema", "release", cwd=tmp_path)
    assert json.loads(printed.stdout)["title"] == "scrollcase release manifest"
    assert cli("schema", "nope", cwd=tmp_path).returncode == 2


# --- doctor -----------------------------------------------------------------------------------------

GOOD_CUDA_MANIFEST = (EXAMPLES / "tiny-mlp-linux-x86_64-cuda12.4" / "pixi.toml").read_text(encoding="utf-8")


def fake_tool(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    tool.chmod(0o755)


def cuda_doctor_setup(tmp_path: Path) -> Path:
    copy_examples(tmp_path)
    return tmp_path / "bin"


@POSIX_ONLY
@pytest.mark.parametrize(
    ("driver", "code", "line"),
    [
        ("550.54.14", 0, "pass  nvidia-driver  driver 550.54.14 >= 550.54.14"),
        ("550.120", 0, "pass  nvidia-driver  driver 550.120 >= 550.54.14"),
        (
            "535.183.01",
            11,
            "fail  nvidia-driver  driver 535.183.01 is older than minNvidiaDriverVersion 550.54.14",
        ),
    ],
)
def test_doctor_driver_check_with_fake_nvidia_smi(tmp_path: Path, driver: str, code: int, line: str) -> None:
    if not LINUX_X86_64:
        pytest.skip("the example CUDA recipe targets linux-x86_64")
    bin_dir = cuda_doctor_setup(tmp_path)
    fake_tool(bin_dir, "nvidia-smi", f'[ "$1" = "--query-gpu=driver_version" ] || exit 2\necho "{driver}"')
    done = cli(
        "doctor",
        "--recipe",
        "tiny-mlp-linux-x86_64-cuda12.4",
        "--min-free-gb",
        "0",
        cwd=tmp_path,
        path=str(bin_dir),
    )
    assert done.returncode == code, done.stdout + done.stderr
    assert line in done.stdout
    if code:
        assert "error: this machine cannot build linux-x86_64-cuda12.4" in done.stderr
        assert "upgrade the NVIDIA driver to 550.54.14 or newer" in done.stderr


@POSIX_ONLY
def test_doctor_broken_driver_and_pixi_mismatch_json(tmp_path: Path) -> None:
    bin_dir = cuda_doctor_setup(tmp_path)
    fake_tool(bin_dir, "nvidia-smi", 'echo "NVIDIA-SMI has failed" >&2; exit 9')
    fake_tool(bin_dir, "pixi", 'echo "pixi 0.70.0"')
    done = cli("doctor", "--recipe", "tiny-mlp-linux-x86_64-cuda12.4", "--json", cwd=tmp_path, path=str(bin_dir))
    assert done.returncode == 11
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["nvidia-driver"]["status"] == "fail" and "NVIDIA-SMI has failed" in checks["nvidia-driver"]["message"]
    assert checks["pixi"]["status"] == "warn" and "0.73.0" in checks["pixi"]["fix"]
    assert checks["pixi.toml"]["status"] == "pass"


def test_doctor_manifest_problems_exit_3_with_lines(tmp_path: Path) -> None:
    manifest = GOOD_CUDA_MANIFEST.replace('build = "cuda*"', 'build = "cpu*"').replace("tiny-mlp", "my-model")
    write_recipe(tmp_path, cuda_recipe(), manifest=manifest)
    done = cli("doctor", "--recipe", "my-model-linux-x86_64-cuda12.4", cwd=tmp_path, path=str(tmp_path))
    assert done.returncode == 3
    line = next(i for i, text in enumerate(manifest.splitlines(), 1) if text.startswith("pytorch"))
    assert f"recipes/my-model-linux-x86_64-cuda12.4/pixi.toml:{line}: error: dependencies.pytorch:" in done.stderr
    assert "fail  pixi.toml dependencies.pytorch" in done.stdout


def test_doctor_unknown_recipe_is_a_usage_error(tmp_path: Path) -> None:
    copy_examples(tmp_path)
    done = cli("doctor", "--recipe", "tiny-mlp-linux-x86_64-cuda12.5", cwd=tmp_path)
    assert done.returncode == 2
    assert "did you mean 'tiny-mlp-linux-x86_64-cuda12." in done.stderr and "known recipes:" in done.stderr


def test_doctor_on_this_machine(tmp_path: Path) -> None:
    """No GPU and no pixi here: the CPU example is buildable, the CUDA one is not, both readable."""
    copy_examples(tmp_path)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    cpu = cli("doctor", "--recipe", "tiny-mlp-linux-x86_64-cpu", cwd=tmp_path, path=str(empty))
    native = LINUX_X86_64
    assert "doctor tiny-mlp-linux-x86_64-cpu (target linux-x86_64-cpu)" in cpu.stdout
    assert "skip  pixi           no pixi on PATH" in cpu.stdout
    assert "skip  nvidia-driver  not a CUDA target (cpu)" in cpu.stdout
    assert cpu.returncode == (0 if native else 11), cpu.stderr
    cuda = cli("doctor", "--recipe", "tiny-mlp-linux-x86_64-cuda12.4", cwd=tmp_path, path=str(empty))
    assert cuda.returncode == 11
    assert "fail  nvidia-driver  nvidia-smi is not on PATH" in cuda.stdout
    assert "fix: build CUDA boxes on a machine with an NVIDIA GPU" in cuda.stdout
    metal = cli("doctor", "--recipe", "tiny-mlp-osx-arm64-metal", "--json", cwd=tmp_path, path=str(empty))
    checks = {c["name"]: c["status"] for c in json.loads(metal.stdout)["checks"]}
    assert checks["native"] == ("pass" if sys.platform == "darwin" else "fail")


def test_every_command_has_help_and_json() -> None:
    for command in ("validate", "schema", "doctor"):
        done = cli(command, "--help", cwd=REPO)
        assert done.returncode == 0 and "--json" in done.stdout, command
