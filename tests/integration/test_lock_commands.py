"""`lock`, `lock-check` and `inspect` end to end against real local conda channels (offline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.cli import main
from scrollcase.errors import HostError, LockError, SolveError
from scrollcase.lock import channels as lock_channels
from scrollcase.lock import solve as engine
from scrollcase.lock.read import load_lock
from scrollcase.recipe.loader import resolve_recipe
from scrollcase.targets.classify import classify_torch
from tests.integration.lock_channel_kit import make_channel, make_recipe

REPO = Path(__file__).resolve().parents[2]
CUDA_ID = "demo-linux-x86_64-cuda12.4"
CPU_ID = "demo-linux-x86_64-cpu"


@pytest.fixture(scope="module")
def channels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("channels")
    return {
        "full": make_channel(root / "full", cuda=("12.4", "12.8")).as_uri(),
        "cpu-only": make_channel(root / "cpu-only", cuda=()).as_uri(),
    }


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(lock_channels.OVERRIDES_ENV, raising=False)
    return tmp_path


def run_cli(*args: str) -> tuple[int, str]:
    """The CLI in-process; returns (exit code, stdout)."""
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def test_lock_picks_the_cuda_build_when_cuda_is_present(
    workspace: Path, channels: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # pytorch is pinned by version only: the __cuda virtual package alone decides the variant
    for cuda in ("12.4", None):
        folder = make_recipe(workspace / "recipes", channels["full"], cuda=cuda)
        toml = folder / "pixi.toml"
        text = toml.read_text()
        for build in ("cuda*", "cpu*"):
            text = text.replace(f'pytorch = {{ version = "2.*", build = "{build}" }}', 'pytorch = "2.*"')
        toml.write_text(text)
    capsys.readouterr()
    assert run_cli("lock", CUDA_ID)[0] == 0
    warned = capsys.readouterr().err  # solved all the same, but told what lock-check will say
    assert f"recipes/{CUDA_ID}/pixi.toml:11: warning: dependencies.pytorch: pytorch must be pinned" in warned
    assert f"refuse {CUDA_ID} until these are fixed" in warned
    assert run_cli("lock", CPU_ID)[0] == 0
    assert "warning" not in capsys.readouterr().err
    cuda_lock = load_lock(workspace / "recipes" / CUDA_ID / "pixi.lock")
    cpu_lock = load_lock(workspace / "recipes" / CPU_ID / "pixi.lock")
    assert cuda_lock.version == 7
    assert "__cuda=12.4" in cuda_lock.platforms["linux-64"].virtual_packages
    cuda_torch = classify_torch(cuda_lock.environments["default"].packages["linux-64"])
    cpu_torch = classify_torch(cpu_lock.environments["default"].packages["linux-64"])
    assert (cuda_torch.build, cuda_torch.accelerator) == ("cuda124_py311_h1_300", "cuda12.4")
    assert (cpu_torch.build, cpu_torch.accelerator) == ("cpu_mkl_py311_h2_100", "cpu")
    assert not list((workspace / "recipes").rglob("*.tmp"))
    # The lock came out right, but only because __cuda was there: lock-check (like validate) refuses the
    # pixi.toml that leaves the build to chance, at its line, and passes the CPU recipe.
    assert run_cli("lock-check", CPU_ID)[0] == 0
    (problem,) = lock_check_problems(CUDA_ID)
    toml = f"recipes/{CUDA_ID}/pixi.toml"
    assert (problem["file"], problem["key"]) == (toml, "dependencies.pytorch")
    assert problem["line"] == next(
        i for i, t in enumerate((workspace / toml).read_text().splitlines(), 1) if "pytorch" in t
    )
    assert "pytorch must be pinned to a CUDA build" in str(problem["message"])


def test_lock_check_refuses_pixi_toml_rules_beside_a_good_lock(workspace: Path, channels: dict[str, str]) -> None:
    """A lock solved from a right pixi.toml, then pixi.toml edited against the rules (the lock still satisfies
    every spec): lock-check reports each rule at its pixi.toml line, in one run, exit 4."""
    folder = make_recipe(workspace / "recipes", channels["full"])
    engine.lock_recipe(resolve_recipe(str(folder)))
    toml = folder / "pixi.toml"
    text = toml.read_text()
    edited = text.replace('build = "cuda*"', 'build = "*"').replace('cuda = "12.4"\n', "")
    assert edited.count("\n") == text.count("\n") - 1 and 'build = "*"' in edited
    toml.write_text(edited)
    problems = lock_check_problems(CUDA_ID)
    lines = edited.splitlines()
    found = {(str(p["key"]), lines[int(str(p["line"])) - 1].split("=")[0].strip()) for p in problems}
    assert found == {("system-requirements.cuda", "[system-requirements]"), ("dependencies.pytorch", "pytorch")}
    assert all(p["file"] == f"recipes/{CUDA_ID}/pixi.toml" for p in problems)


def test_locked_records_are_installable_records(workspace: Path, channels: dict[str, str]) -> None:
    folder = make_recipe(workspace / "recipes", channels["full"])
    path = engine.lock_recipe(resolve_recipe(str(folder)))
    records = engine.locked_records(path, "linux-64")
    assert sorted(str(r.name.normalized) for r in records) == ["cuda-version", "python", "pytorch"]
    assert all(str(r.url).startswith(channels["full"]) for r in records)
    assert all(r.sha256 for r in records)


def test_cpu_only_channel_fails_in_terms_of_the_recipe(workspace: Path, channels: dict[str, str]) -> None:
    folder = make_recipe(workspace / "recipes", channels["cpu-only"])
    (folder / "pixi.lock").write_text("keep me\n")
    with pytest.raises(SolveError) as info:
        engine.lock_recipe(resolve_recipe(str(folder)))
    text = info.value.render()
    assert CUDA_ID in text and "linux-x86_64-cuda12.4" in text
    assert 'pytorch[version="2.*", build="cuda*"]' in text and channels["cpu-only"] in text
    assert "__cuda=12.4" in text
    assert (folder / "pixi.lock").read_text() == "keep me\n"  # a failed solve leaves the old lock alone
    assert run_cli("lock", CUDA_ID)[0] == 4


def test_channel_override_from_the_environment(
    workspace: Path, channels: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_recipe(workspace / "recipes", "conda-forge")  # the manifest names conda-forge; no network here
    monkeypatch.setenv(lock_channels.OVERRIDES_ENV, f"conda-forge={channels['full']}")
    code, out = run_cli("lock", CUDA_ID, "--json")
    assert code == 0 and json.loads(out)["torch"]["accelerator"] == "cuda12.4"
    assert run_cli("lock-check")[0] == 0  # checked against the same override
    monkeypatch.delenv(lock_channels.OVERRIDES_ENV)
    assert run_cli("lock-check")[0] == 4  # without it the lock's channels differ from pixi.toml
    code, _ = run_cli("lock-check", "--channel-override", f"conda-forge={channels['full']}")
    assert code == 0


@pytest.fixture
def two_locked(workspace: Path, channels: dict[str, str]) -> Path:
    """A CUDA 12.4 recipe and a CUDA 12.8 recipe, both freshly locked."""
    recipes = workspace / "recipes"
    make_recipe(recipes, channels["full"], cuda="12.4")
    make_recipe(recipes, channels["full"], cuda="12.8", name="other")
    for rid in (CUDA_ID, "other-linux-x86_64-cuda12.8"):
        engine.lock_recipe(resolve_recipe(rid, recipes))
    return recipes


def lock_check_problems(*args: str) -> list[dict[str, object]]:
    code, out = run_cli("lock-check", "--json", *args)
    assert code == 4
    doc = json.loads(out)
    assert doc["error"] == "LockError"
    return list(doc["problems"])


def test_hand_edited_cpu_torch_under_cuda_target(two_locked: Path) -> None:
    lock = two_locked / CUDA_ID / "pixi.lock"
    lock.write_text(lock.read_text().replace("cuda124_py311_h1_300", "cpu_mkl_py311_h2_100"))
    problems = lock_check_problems(CUDA_ID)
    torch = [p for p in problems if p.get("key") == "torch"]
    assert len(torch) == 1 and "CPU build" in str(torch[0]["message"])
    assert torch[0]["file"] == f"recipes/{CUDA_ID}/pixi.lock"
    line = int(str(torch[0]["line"]))
    assert "cpu_mkl_py311_h2_100" in lock.read_text().splitlines()[line - 1]


def test_lock_for_the_wrong_cuda_version(two_locked: Path) -> None:
    shutil.copy(two_locked / "other-linux-x86_64-cuda12.8" / "pixi.lock", two_locked / CUDA_ID / "pixi.lock")
    problems = lock_check_problems(CUDA_ID)
    messages = " | ".join(str(p["message"]) for p in problems)
    assert "a build for cuda12.8" in messages and "CUDA 12.4" in messages


def test_stale_lock_after_manifest_edit(two_locked: Path) -> None:
    toml = two_locked / CUDA_ID / "pixi.toml"
    toml.write_text(toml.read_text() + 'numpy = "2.*"\n')
    (problem,) = lock_check_problems(CUDA_ID)
    assert "stale" in str(problem["message"]) and "numpy" in str(problem["message"])
    assert problem["file"] == f"recipes/{CUDA_ID}/pixi.toml" and problem["line"] == 13
    assert f"scrollcase lock {CUDA_ID}" in str(problem["fix"])


def test_missing_platform(two_locked: Path) -> None:
    lock = two_locked / CUDA_ID / "pixi.lock"
    lock.write_text(
        lock.read_text()
        .replace("- name: linux-64", "- name: linux-aarch64")
        .replace("      linux-64:", "      linux-aarch64:")
    )
    (problem,) = lock_check_problems(CUDA_ID)
    assert "does not cover the target platform linux-64" in str(problem["message"])


def test_truncated_and_invalid_locks(two_locked: Path) -> None:
    lock = two_locked / CUDA_ID / "pixi.lock"
    text = lock.read_text()
    lock.write_text(text[: text.index("\n- conda:", text.index("packages:\n- conda:") + 20)])
    other = two_locked / "other-linux-x86_64-cuda12.8" / "pixi.lock"
    other.write_text(other.read_text().replace("    channels:\n", "    channels: [oops\n"))
    problems = lock_check_problems()  # both recipes, one run
    by_file = {str(p["file"]): p for p in problems}
    assert "no record" in str(by_file[f"recipes/{CUDA_ID}/pixi.lock"]["message"])
    invalid = by_file["recipes/other-linux-x86_64-cuda12.8/pixi.lock"]
    # docs/locks.md: "invalid YAML is reported with its line": `channels: [oops` is line 11, and the
    # YAML reader stops on line 12, where the unclosed `[` finds no `,` or `]`.
    assert other.read_text().splitlines()[10] == "    channels: [oops"
    assert "did not find expected ',' or ']'" in str(invalid["message"])
    assert (invalid["line"], invalid["column"]) == (12, 10)


def test_missing_lock(two_locked: Path) -> None:
    (two_locked / CUDA_ID / "pixi.lock").unlink()
    (problem,) = lock_check_problems()
    assert "no committed lock" in str(problem["message"])


def test_cli_in_a_subprocess_annotates_and_inspects(two_locked: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GITHUB_ACTIONS": ""}
    lock = two_locked / CUDA_ID / "pixi.lock"
    lock.write_text(lock.read_text().replace("cuda124_py311_h1_300", "cpu_mkl_py311_h2_100"))
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "lock-check"],
        cwd=two_locked.parent,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 4
    assert f"recipes/{CUDA_ID}/pixi.lock:" in done.stderr and "CPU build" in done.stderr
    assert "Traceback" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "inspect", "--json", str(lock)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    doc = json.loads(done.stdout)
    assert doc == {
        "lockVersion": 7,
        "environments": [
            {
                "environment": "default",
                "platform": "linux-64",
                "subdir": "linux-64",
                "torch": {
                    "provider": "conda",
                    "version": "2.5.1",
                    "build": "cpu_mkl_py311_h2_100",
                    "accelerator": "cpu",
                },
            }
        ],
    }


def test_lock_refuses_a_pixi_too_old_for_the_format(workspace: Path, channels: dict[str, str]) -> None:
    folder = make_recipe(workspace / "recipes", channels["full"])
    recipe = folder / "recipe.json"
    recipe.write_text(recipe.read_text().replace('"pixiVersion": "0.73.0"', '"pixiVersion": "0.60.0"'))
    with pytest.raises(LockError, match="cannot read the lock format") as info:
        engine.lock_recipe(resolve_recipe(str(folder)))
    assert info.value.problems[0].key == "pixiVersion"
    assert not (folder / "pixi.lock").exists()


def test_use_pixi_needs_the_pinned_pixi(
    workspace: Path, channels: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_recipe(workspace / "recipes", channels["full"])
    bin_dir = workspace / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    code, _ = run_cli("lock", CUDA_ID, "--use-pixi")
    assert code == HostError.exit_code  # no pixi on PATH
    if os.name == "posix":  # a pixi of another version: refused before it runs anything
        pixi = bin_dir / "pixi"
        pixi.write_text("#!/bin/sh\necho 'pixi 0.40.0'\n")
        pixi.chmod(0o755)
        with pytest.raises(HostError, match=r"pixi 0\.40\.0, the recipe pins pixi 0\.73\.0"):
            from scrollcase.lock.solve import lock_with_pixi

            lock_with_pixi(resolve_recipe(CUDA_ID, workspace / "recipes"))


def test_lock_check_junit_read_back_and_reported_once(two_locked: Path, tmp_path: Path) -> None:
    """--junit: a passed case per sound recipe, a failed case per problem at its file and line; on GitHub
    lock-check leaves the annotations to `report junit` (one per problem, none twice) and its summary."""
    from junitparser import JUnitXml

    from tests.support.outputs import read_outputs

    lock = two_locked / CUDA_ID / "pixi.lock"
    lock.write_text(lock.read_text().replace("cuda124_py311_h1_300", "cpu_mkl_py311_h2_100"))
    junit, output, summary = tmp_path / "lock-check.xml", tmp_path / "output", tmp_path / "summary"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(two_locked.parent),
    }

    def scrollcase(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "scrollcase", *args],
            cwd=two_locked.parent,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )

    checked = scrollcase("lock-check", "--junit", str(junit))
    assert checked.returncode == 4, checked.stderr
    assert "::error" not in checked.stdout + checked.stderr  # the JUnit holds them: annotated once, below
    cases = [
        (suite.name, case.classname, case.name, case.is_passed, case)
        for suite in JUnitXml.fromfile(str(junit))
        for case in suite
    ]
    assert {suite for suite, *_ in cases} == {"lock-check"}
    passed = [c for c in cases if c[3]]
    assert [(c[1], c[2]) for c in passed] == [("other-linux-x86_64-cuda12.8", "lock-check")]
    assert passed[0][4]._elem.get("file") == "recipes/other-linux-x86_64-cuda12.8/pixi.lock"
    failed = [c for c in cases if not c[3]]
    assert failed and all(c[1] == CUDA_ID for c in failed)
    torch = next(c[4] for c in failed if "CPU build" in (c[4].result[0].message or ""))
    assert torch._elem.get("file") == f"recipes/{CUDA_ID}/pixi.lock"
    assert "cpu_mkl_py311_h2_100" in lock.read_text().splitlines()[int(torch._elem.get("line")) - 1]
    assert "fix: " in (torch.result[0].text or "")

    reported = scrollcase("report", "junit", str(junit), "--title", "scrollcase lock-check")
    assert reported.returncode == 0, reported.stderr
    errors = [a for a in reported.stdout.splitlines() if a.startswith("::error ")]
    assert len(errors) == len(failed)
    assert any(
        a.startswith(f"::error file=recipes/{CUDA_ID}/pixi.lock,line={torch._elem.get('line')},") for a in errors
    )
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("### scrollcase lock-check") and f"**1 passed, {len(failed)} failed, 0 skipped**" in text
    assert read_outputs(output.read_text(encoding="utf-8"))["conclusion"] == "failure"

    lock.write_text(lock.read_text().replace("cpu_mkl_py311_h2_100", "cuda124_py311_h1_300"))
    assert scrollcase("lock-check", "--junit", str(junit)).returncode == 0
    assert all(case.is_passed for suite in JUnitXml.fromfile(str(junit)) for case in suite)
