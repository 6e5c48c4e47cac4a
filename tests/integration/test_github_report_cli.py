"""`scrollcase report junit|release` and `scrollcase matrix` as a workflow step runs them: a real
subprocess, real GITHUB_* files, a real git repository, a local GitHub API stand-in."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from junitparser import Attr, IntAttr, JUnitXml, TestCase

from scrollcase.github.report import SUMMARY_LIMIT_BYTES
from scrollcase.reports.junit import JUnitCase, write_junit
from tests.github_helpers import write_recipe
from tests.integration.github_api import fake_github
from tests.support.outputs import read_outputs

ROOT = Path(__file__).resolve().parents[2]


def step_env(tmp: Path, **extra: str) -> dict[str, str]:
    (tmp / "gh").mkdir(exist_ok=True)
    files = {name: tmp / "gh" / name.lower() for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    for path in files.values():
        path.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(tmp),
            **{k: str(v) for k, v in files.items()},
            **extra,
        }
    )
    return env


def scrollcase(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def outputs(env: dict[str, str]) -> dict[str, str]:
    return read_outputs(Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8"))


class LocatedCase(TestCase):
    """junitparser's TestCase plus the file/line attributes GitHub-aware readers use."""

    file = Attr()
    line = IntAttr()


def self_test_cases(failed: int, passed: int = 2) -> list[JUnitCase]:
    return [
        JUnitCase(
            f"check-{i}",
            "selftest.code",
            passed=False,
            message=f"assertion {i} failed",
            output=f"Traceback {i}",
            file="recipes/box-linux-x86_64-cpu/recipe.json",
            line=i + 1,
        )
        for i in range(failed)
    ] + [
        JUnitCase(f"import-{i}", "selftest.import", passed=True, seconds=0.25, properties={"module": f"m{i}"})
        for i in range(passed)
    ]


def test_junit_written_is_what_an_independent_reader_sees(tmp_path: Path) -> None:
    path = write_junit(
        tmp_path / "out" / "self-test.xml", "self-test", self_test_cases(3), properties={"targetId": "linux-x86_64-cpu"}
    )
    xml = JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    assert suite.name == "self-test" and suite.tests == 5 and suite.failures == 3
    cases = list(suite.iterchildren(LocatedCase))
    assert [c.name for c in cases] == ["check-0", "check-1", "check-2", "import-0", "import-1"]
    assert [(c.file, c.line) for c in cases[:3]] == [("recipes/box-linux-x86_64-cpu/recipe.json", n) for n in (1, 2, 3)]
    assert cases[0].result[0].message == "assertion 0 failed"
    assert cases[3].is_passed and cases[3].time == 0.25
    assert {p.name: p.value for p in suite.properties()} == {"targetId": "linux-x86_64-cpu"}
    assert not list(tmp_path.joinpath("out").glob(".*tmp"))  # atomic write left no temp file


def test_report_junit_annotates_summarises_outputs_and_creates_a_check_run(tmp_path: Path) -> None:
    junit = write_junit(tmp_path / "junit" / "build.xml", "self-test", self_test_cases(120))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"head": {"sha": "c" * 40}}}))
    with fake_github() as api:
        env = step_env(
            tmp_path,
            GITHUB_API_URL=api.url,
            GITHUB_TOKEN="secret-token",
            GITHUB_REPOSITORY="octo/boxes",
            GITHUB_SHA="m" * 40,
            GITHUB_EVENT_PATH=str(event),
        )
        args = ["report", "junit", str(junit), "--check-run-name", "self-test (box)"]
        done = scrollcase(args, tmp_path, env)
    assert done.returncode == 0, done.stderr
    annotations = [x for x in done.stdout.splitlines() if x.startswith("::")]
    assert len([x for x in annotations if x.startswith("::error ")]) == 10
    assert annotations[0].startswith("::error file=recipes/box-linux-x86_64-cpu/recipe.json,line=1,")
    assert annotations[-1].startswith("::notice title=More findings::110 more finding(s)")
    assert "the check run" in annotations[-1]
    sent = api.check_run_requests()
    assert [r.method for r in sent] == ["POST", "PATCH", "PATCH"]
    assert sent[0].body["head_sha"] == "c" * 40  # the PR head, not the merge commit
    assert sum(len(r.body["output"]["annotations"]) for r in sent) == 120
    assert outputs(env) == {"total": "122", "passed": "2", "failed": "120", "skipped": "0", "conclusion": "failure"}
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "### self-test (box)" in summary and "**2 passed, 120 failed, 0 skipped** of 122" in summary
    assert summary.index("check-0") < summary.index("import-0")  # failures first


def test_report_junit_on_a_read_only_token_degrades_to_annotations(tmp_path: Path) -> None:
    """Defect 1: a fork's pull request gets a read-only token, the check run is refused with 403, and the
    step used to fail (exit 12) before writing its outputs.  Now: one warning, the annotations, the
    summary and the outputs; the JUnit alone decides (``--strict`` fails on its failures, not on the 403)."""
    failing = write_junit(tmp_path / "junit" / "build.xml", "self-test", self_test_cases(3))
    passing = write_junit(tmp_path / "junit" / "ok.xml", "self-test", self_test_cases(0))
    runs: dict[str, tuple[subprocess.CompletedProcess[str], dict[str, str]]] = {}
    with fake_github(refuse_writes=403) as api:
        for name, junit, extra in (
            ("plain", failing, []),
            ("strict", failing, ["--strict"]),
            ("clean", passing, ["--strict"]),
        ):
            (tmp_path / name).mkdir()
            env = step_env(
                tmp_path / name,
                GITHUB_API_URL=api.url,
                GITHUB_TOKEN="read-only",
                GITHUB_REPOSITORY="octo/boxes",
                GITHUB_SHA="f" * 40,
            )
            args = ["report", "junit", str(junit), "--check-run-name", "self-test (box)", *extra]
            runs[name] = scrollcase(args, tmp_path, env), env
    done, env = runs["plain"]
    assert done.returncode == 0, done.stderr
    assert api.check_run_requests() and all(r.method == "POST" for r in api.check_run_requests())
    lines = done.stdout.splitlines()
    assert len([x for x in lines if x.startswith("::error ")]) == 3
    warnings = [x for x in lines if x.startswith("::warning")]
    assert len(warnings) == 1 and "read-only GITHUB_TOKEN" in warnings[0], done.stdout
    assert outputs(env) == {"total": "5", "passed": "2", "failed": "3", "skipped": "0", "conclusion": "failure"}
    assert "**2 passed, 3 failed, 0 skipped** of 5" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert runs["strict"][0].returncode == 1  # the failures decide, not the refused check run
    assert runs["clean"][0].returncode == 0, runs["clean"][0].stderr


def test_report_junit_strict_and_missing_ok(tmp_path: Path) -> None:
    junit = write_junit(tmp_path / "r.xml", "parity", self_test_cases(1, passed=0))
    env = step_env(tmp_path)
    assert scrollcase(["report", "junit", str(junit), "--strict"], tmp_path, env).returncode == 1
    missing_ok = ["report", "junit", str(tmp_path / "none.xml"), "--missing-ok", "--json"]
    done = scrollcase(missing_ok, tmp_path, env)
    assert done.returncode == 0 and json.loads(done.stdout)["total"] == 0
    assert json.loads(done.stdout)["conclusion"] == "missing"  # not "success": nothing was tested
    missing = scrollcase(["report", "junit", str(tmp_path / "none.xml")], tmp_path, env)
    assert missing.returncode == 12 and "none.xml does not exist" in missing.stderr


def test_report_junit_check_run_without_token_is_a_usage_error(tmp_path: Path) -> None:
    junit = write_junit(tmp_path / "r.xml", "parity", self_test_cases(0))
    done = scrollcase(["report", "junit", str(junit), "--check-run-name", "x"], tmp_path, step_env(tmp_path))
    assert done.returncode == 2 and "GITHUB_TOKEN" in done.stderr and "checks: write" in done.stderr


def test_summary_of_a_huge_report_stays_under_the_cap(tmp_path: Path) -> None:
    cases = [JUnitCase(f"case-{i:05d}", "bulk", passed=False, message="m" * 400) for i in range(4000)]
    junit = write_junit(tmp_path / "big.xml", "bulk", cases)
    env = step_env(tmp_path)
    Path(env["GITHUB_STEP_SUMMARY"]).write_text("# earlier output of this step\n" * 100, encoding="utf-8")
    assert scrollcase(["report", "junit", str(junit)], tmp_path, env).returncode == 0
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_bytes()
    assert len(summary) <= SUMMARY_LIMIT_BYTES
    assert b"**Truncated:**" in summary


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd, check=True, capture_output=True
    )


def test_matrix_changed_since_in_a_real_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    recipes = repo / "recipes"
    for target in ("linux-x86_64-cpu", "linux-x86_64-cuda12.4", "osx-arm64-metal"):
        write_recipe(recipes, "tiny-mlp", target)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "change")
    (recipes / "tiny-mlp-linux-x86_64-cuda12.4" / "pixi.lock").write_text("version: 6\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "lock")
    env = step_env(tmp_path)
    done = scrollcase(["matrix", "--changed-since", "main", "--json"], repo, env)
    assert done.returncode == 0, done.stderr
    matrix = json.loads(done.stdout)
    assert [e["recipeId"] for e in matrix["include"]] == ["tiny-mlp-linux-x86_64-cuda12.4"]
    assert matrix["include"][0]["runs-on"] == ["self-hosted", "linux", "x64", "gpu", "cuda-12.4"]
    out = outputs(env)
    assert json.loads(out["matrix"]) == matrix and out["empty"] == "false" and out["count"] == "1"

    # From a subfolder the recipe paths are still matched against repository-relative git paths.
    sub = scrollcase(
        ["matrix", "--changed-since", "main", "--recipes", "../recipes", "--json"], repo / "recipes", step_env(tmp_path)
    )
    assert [e["recipeId"] for e in json.loads(sub.stdout)["include"]] == ["tiny-mlp-linux-x86_64-cuda12.4"]

    runner_map = repo / ".github" / "runners.yml"
    runner_map.parent.mkdir()
    runner_map.write_text('version: 1\nrunners:\n  "*-cpu": [cpu-pool]\n')
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "runners")
    everything = scrollcase(
        ["matrix", "--changed-since", "main", "--runner-map", ".github/runners.yml", "--json"], repo, step_env(tmp_path)
    )
    entries = json.loads(everything.stdout)["include"]
    assert len(entries) == 3  # the runner map changed: every recipe
    assert next(e for e in entries if e["accelerator"] == "cpu")["runs-on"] == ["cpu-pool"]

    git(repo, "checkout", "-q", "main")
    env = step_env(tmp_path)
    none = scrollcase(["matrix", "--changed-since", "main"], repo, env)
    assert none.returncode == 0 and "no jobs" in none.stdout
    assert outputs(env) == {"matrix": '{"include":[]}', "empty": "true", "count": "0"}

    bad = scrollcase(["matrix", "--changed-since", "no-such-ref"], repo, step_env(tmp_path))
    assert bad.returncode == 2 and "fetch-depth: 0" in bad.stderr
    zeros = scrollcase(["matrix", "--changed-since", "0" * 40, "--json"], repo, step_env(tmp_path))
    assert len(json.loads(zeros.stdout)["include"]) == 3


def test_matrix_after_a_force_push_selects_every_recipe(tmp_path: Path) -> None:
    """Defect 8: a push's ``before`` commit that the clone does not have (force-pushed away) failed the job
    with exit 2; like the null SHA it now selects every recipe, with a warning that says why."""
    repo = tmp_path / "repo"
    for target in ("linux-x86_64-cpu", "osx-arm64-metal"):
        write_recipe(repo / "recipes", "tiny-mlp", target)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    env = step_env(tmp_path)
    gone = "5" * 40
    done = scrollcase(["matrix", "--changed-since", gone, "--json"], repo, env)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["include"]) == 2
    assert outputs(env)["count"] == "2"
    warnings = [x for x in done.stderr.splitlines() if x.startswith("::warning")]
    assert len(warnings) == 1 and gone in warnings[0], done.stderr
    typo = scrollcase(["matrix", "--changed-since", "origin/mian"], repo, step_env(tmp_path))
    assert typo.returncode == 2  # a ref that is not a SHA stays a usage error


def test_matrix_reports_every_broken_recipe_at_once(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    for target in ("linux-x86_64-cpu", "osx-arm64-metal"):
        folder = write_recipe(recipes, "box", target)
        data = json.loads((folder / "recipe.json").read_text())
        data["colour"] = "blue"
        (folder / "recipe.json").write_text(json.dumps(data))
    done = scrollcase(["matrix"], tmp_path, step_env(tmp_path))
    assert done.returncode == 3
    annotations = [x for x in done.stdout.splitlines() if x.startswith("::error")]
    assert len(annotations) == 2 and all("colour" in x for x in annotations)


def test_report_junit_when_the_api_cannot_be_reached_says_so(tmp_path: Path) -> None:
    """Issue 30: a check run whose API never answered told the user to add `permissions: checks: write`. The step
    fails naming the API it could not reach and the fix; the outputs and annotations were written first."""
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        api = f"http://127.0.0.1:{sock.getsockname()[1]}"
    junit = write_junit(tmp_path / "junit" / "build.xml", "self-test", self_test_cases(1))
    env = step_env(tmp_path, GITHUB_API_URL=api, GITHUB_TOKEN="t", GITHUB_REPOSITORY="octo/boxes", GITHUB_SHA="f" * 40)
    done = scrollcase(["report", "junit", str(junit), "--check-run-name", "self-test (box)"], tmp_path, env)
    assert done.returncode == 12, done.stderr
    assert f"cannot reach {api} to create the check run" in done.stderr, done.stderr
    assert "checks: write" not in done.stderr and "GITHUB_API_URL" in done.stderr
    assert outputs(env)["conclusion"] == "failure"
    assert len([x for x in done.stdout.splitlines() if x.startswith("::error file=")]) == 1, done.stdout
