"""scrollcase from the adopter's seat: a model team's own repository, over a PR's life and two releases.

``tests/fixtures/adopter/repo`` is that repository: two CPU recipes and ONE workflow, ``boxes.yml``,
written from docs/github.md's "Adopting scrollcase" section alone, which uses scrollcase's actions by
name (``scrollcase/scrollcase/actions/<name>@v1``) as an adopter does.  Here act maps that name to a copy
of this checkout (``--local-repository``), the recipes get the demo's local channel and a file:// weights
folder (``@CHANNEL@``, ``@WEIGHTS@``, ``@PYTHON@``: the demo channel packages this machine's CPython) and
their locks from ``scrollcase lock``, as the team would commit them.

Every scenario is a fresh clone of that repository with one change, run under act with the one runner
set-up of the session (the ``act`` fixture: Python copy, wheelhouse) and one shared tool cache and cache
server, as a repository's runs share GitHub's.  Each asserts the outcome and the annotations, which must
name the adopter's own files and lines, and prints its wall time (``adopter scenario ...: N s``, also
appended to ``adopter-times.txt`` in pytest's base temp folder).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.github_api import FakeGitHub, fake_github
from tests.integration.test_act_workflows import job
from tests.support.act import ACT_TEST_MARKS, Act, ActRun, Annotation, git
from tests.support.adopter import ECHO, LINEAR, OWNER_REPO, Adopter, prepare

pytestmark = ACT_TEST_MARKS


@pytest.fixture(scope="session")
def adopter(act: Act, demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Adopter:
    return prepare(tmp_path_factory.mktemp("adopter"), demo_workspace / ".scrollcase" / "demo-channel", act)


Timer = Callable[[str, ActRun], None]
ACTIONS = "scrollcase/scrollcase/actions"


@pytest.fixture(scope="session")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Timer:
    """Prints a scenario's wall time and appends it to adopter-times.txt in pytest's base temp folder."""
    times = tmp_path_factory.getbasetemp() / "adopter-times.txt"

    def record(name: str, run: ActRun) -> None:
        line = f"adopter scenario {name}: {run.seconds:.1f} s (act exit {run.returncode})"
        with times.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
        print(f"\n{line}", file=sys.__stdout__, flush=True)

    return record


# --- events and changes ------------------------------------------------------------------------


@dataclass(frozen=True)
class PullRequest:
    repo: Path
    base: str
    head: str

    def event(self, fork: bool = False) -> dict[str, Any]:
        head_repo = "someone/boxes" if fork else OWNER_REPO
        return {
            "action": "synchronize",
            "number": 3,
            "pull_request": {
                "number": 3,
                "head": {"sha": self.head, "ref": "change", "repo": {"fork": fork, "full_name": head_repo}},
                "base": {"sha": self.base, "ref": "main", "repo": {"full_name": OWNER_REPO}},
            },
        }


def pull_request(adopter: Adopter, dest: Path, change: Callable[[Path], None]) -> PullRequest:
    repo = adopter.clone(dest)
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "change")
    change(repo)
    git(repo, "commit", "-q", "-am", "a change")
    return PullRequest(repo, base, git(repo, "rev-parse", "HEAD"))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def recipe_file(recipe: str, name: str = "recipe.json") -> str:
    return f"recipes/{recipe}/{name}"


def line_of(repo: Path, path: str, pattern: str, after: str | None = None) -> int:
    """The 1-based line of ``path`` holding ``pattern`` (the first one after a line holding ``after``)."""
    lines = (repo / path).read_text(encoding="utf-8").splitlines()
    start = next(n for n, text in enumerate(lines) if after in text) if after else 0
    return next(n for n, text in enumerate(lines[start:], start + 1) if pattern in text)


def errors(run: ActRun) -> list[Annotation]:
    return [a for a in run.annotations() if a.level == "error"]


def described(annotations: list[Annotation]) -> list[tuple[str, str, dict[str, str]]]:
    return [(a.level, a.message, dict(a.properties)) for a in annotations]


def matrix_recipes(run: ActRun) -> list[str]:
    matrix = json.loads(run.step_outputs(job(run, "matrix"), "m")["matrix"])
    return [entry["recipeId"] for entry in matrix["include"]]


def build_jobs(run: ActRun) -> set[str]:
    return {e["job"] for e in run.entries if e.get("jobID") == "build"}


@pytest.fixture
def github_api() -> Iterator[FakeGitHub]:
    with fake_github() as api:
        yield api


# --- pull requests ------------------------------------------------------------------------------


def test_a_pull_request_changing_one_recipe_builds_and_checks_only_that_one(
    adopter: Adopter, timed: Timer, tmp_path: Path, github_api: FakeGitHub
) -> None:
    pr = pull_request(
        adopter, tmp_path / "boxes", lambda repo: edit(repo / recipe_file(LINEAR), "models@4f2a9c1", "models@77e0b3d")
    )
    run = adopter.run(pr.repo, "pull_request", pr.event(), env={"GITHUB_API_URL": github_api.url})
    timed("pull request changing one recipe", run)
    assert run.returncode == 0, run.log()
    assert matrix_recipes(run) == [LINEAR]  # the other recipe is neither checked nor built
    build = job(run, "build", LINEAR)
    assert build_jobs(run) == {build} and run.failed_steps(build) == [], run.log()
    assert run.step_outputs(build, "build")["self-test"] == "passed"
    assert [a for a in run.annotations() if a.level in ("error", "warning")] == []
    posts = [r for r in github_api.check_run_requests() if r.method == "POST"]
    assert [(r.body["name"], r.body["head_sha"]) for r in posts] == [(f"self-test ({LINEAR})", pr.head)]


def test_a_pull_request_from_a_fork_passes_with_one_warning_for_the_refused_check_run(
    adopter: Adopter, timed: Timer, tmp_path: Path
) -> None:
    pr = pull_request(adopter, tmp_path / "boxes", lambda repo: edit(repo / recipe_file(ECHO), "models@4f2a9c1", "f@1"))
    with fake_github(refuse_writes=403) as api:
        run = adopter.run(pr.repo, "pull_request", pr.event(fork=True), env={"GITHUB_API_URL": api.url})
    timed("pull request from a fork (403 on check runs)", run)
    assert run.returncode == 0, run.log()
    assert matrix_recipes(run) == [ECHO]
    build = job(run, "build", ECHO)
    assert run.failed_steps(build) == [] and run.step_outputs(build, "build")["self-test"] == "passed"
    warnings = [a for a in run.annotations() if a.level in ("error", "warning")]
    assert [a.level for a in warnings] == ["warning"], described(run.annotations())
    assert "read-only GITHUB_TOKEN" in warnings[0].message
    assert [r.method for r in api.check_run_requests()] == ["POST"]  # tried once, refused


def test_a_broken_recipe_is_red_with_its_error_on_the_recipe_json_line(
    adopter: Adopter, timed: Timer, tmp_path: Path, github_api: FakeGitHub
) -> None:
    def silence(repo: Path) -> None:
        path = repo / recipe_file(ECHO)
        recipe = json.loads(path.read_text(encoding="utf-8"))
        recipe["selfTest"]["pythonCode"] = "raise SystemExit('the echo is silent')"
        path.write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")

    pr = pull_request(adopter, tmp_path / "boxes", silence)
    run = adopter.run(pr.repo, "pull_request", pr.event(), env={"GITHUB_API_URL": github_api.url})
    timed("broken recipe", run)
    assert run.returncode != 0
    assert run.failed_steps(job(run, "build", ECHO)) == [f"{ACTIONS}/build@v1"], run.log()
    (error,) = errors(run)
    where = (recipe_file(ECHO), str(line_of(pr.repo, recipe_file(ECHO), '"pythonCode"')))
    assert (error.file, error.properties.get("line")) == where, described(run.annotations())
    assert "the echo is silent" in error.message
    (post,) = [r for r in github_api.check_run_requests() if r.method == "POST"]
    assert post.body["conclusion"] == "failure"
    assert [a["path"] for a in post.body["output"]["annotations"]] == [recipe_file(ECHO)]


def test_a_stale_lock_is_red_at_the_pixi_toml_line_that_made_it_stale(
    adopter: Adopter, timed: Timer, tmp_path: Path
) -> None:
    manifest = recipe_file(LINEAR, "pixi.toml")
    pr = pull_request(adopter, tmp_path / "boxes", lambda repo: edit(repo / manifest, 'numpy = "*"', 'numpy = "<1"'))
    run = adopter.run(pr.repo, "pull_request", pr.event())
    timed("stale lock", run)
    assert run.returncode != 0
    assert run.failed_steps(job(run, "build", LINEAR)) == [f"{ACTIONS}/lock-check@v1"], run.log()
    found = [(a.file, a.properties.get("line")) for a in errors(run)]
    assert found == [(manifest, str(line_of(pr.repo, manifest, "numpy")))], described(run.annotations())
    assert f"run `scrollcase lock {LINEAR}`" in errors(run)[0].message  # the fix names the real recipe ID


def test_stale_weights_are_red_at_the_asset_line_of_recipe_json(adopter: Adopter, timed: Timer, tmp_path: Path) -> None:
    """New weights, their sha256 updated and the size forgotten: the error names recipe.json's size line."""
    v2 = (adopter.weights / "weights-v2.json").read_bytes()

    def new_weights(repo: Path) -> None:
        path = repo / recipe_file(LINEAR)
        recipe = json.loads(path.read_text(encoding="utf-8"))
        recipe["assets"][0].update(path="weights-v2.json", sha256=hashlib.sha256(v2).hexdigest())
        path.write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")

    pr = pull_request(adopter, tmp_path / "boxes", new_weights)
    run = adopter.run(pr.repo, "pull_request", pr.event())
    timed("stale weights", run)
    assert run.returncode != 0
    found = errors(run)
    size_line = line_of(pr.repo, recipe_file(LINEAR), '"size"', after='"assets"')
    assert [(a.file, a.properties.get("line")) for a in found] == [(recipe_file(LINEAR), str(size_line))], described(
        run.annotations()
    )
    assert f'set "size": {len(v2)}' in found[0].message and "interrupted" not in found[0].message


# --- releases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Released:
    repo: Path
    store: Path
    run: ActRun
    objects: dict[str, bytes]


def store_objects(store: Path) -> dict[str, bytes]:
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def push_tag(adopter: Adopter, repo: Path, store: Path, tag: str) -> ActRun:
    git(repo, "tag", tag)
    event = {"ref": f"refs/tags/{tag}", "before": "0" * 40, "after": git(repo, "rev-parse", "HEAD")}
    with fake_github() as api:  # the build steps' check runs, on the tagged commit
        run = adopter.run(
            repo, "push", event, variables={"SCROLLCASE_STORE": str(store)}, env={"GITHUB_API_URL": api.url}
        )
    assert sorted(r.body["name"] for r in api.check_run_requests() if r.method == "POST") == sorted(
        f"self-test ({recipe})" for recipe in matrix_recipes(run)
    ), run.log()
    return run


@pytest.fixture(scope="session")
def released(adopter: Adopter, timed: Timer, tmp_path_factory: pytest.TempPathFactory) -> Released:
    """Tag v1.0.0 of the adopter's main branch, published to a store folder (what later tags start from)."""
    folder = tmp_path_factory.mktemp("adopter-release")
    repo = adopter.clone(folder / "boxes")
    store = folder / "store"
    run = push_tag(adopter, repo, store, "v1.0.0")
    timed("tag v1.0.0", run)
    return Released(repo, store, run, store_objects(store))


def archive_key(box: str, version: str) -> str:
    return f"boxes/{box}/{version}/linux-x86_64-cpu/{box}-{version}-linux-x86_64-cpu.tar.zst"


def test_tag_v1_0_0_builds_and_publishes_both_recipes(released: Released) -> None:
    run = released.run
    assert run.returncode == 0 and set(run.job_results().values()) == {"success"}, run.log()
    assert sorted(matrix_recipes(run)) == sorted([LINEAR, ECHO])
    assert json.loads(run.step_outputs(job(run, "matrix"), "m")["published"]) == []  # an empty store
    for box in ("linear", "echo"):
        assert archive_key(box, "1.0.0") in released.objects, sorted(released.objects)
        assert archive_key(box, "1.0.0").replace(".tar.zst", ".release.json") in released.objects
    assert errors(run) == []


def test_tag_v1_0_1_rebuilds_and_publishes_only_the_bumped_recipe(
    adopter: Adopter, timed: Timer, released: Released
) -> None:
    repo = released.repo
    edit(repo / recipe_file(LINEAR), '"version": "1.0.0"', '"version": "1.0.1"')
    git(repo, "commit", "-q", "-am", "linear 1.0.1")
    run = push_tag(adopter, repo, released.store, "v1.0.1")
    timed("tag v1.0.1 (one recipe bumped, one not)", run)
    assert run.returncode == 0 and set(run.job_results().values()) == {"success"}, run.log()
    assert matrix_recipes(run) == [LINEAR]  # echo 1.0.0 is in the store: not rebuilt...
    assert json.loads(run.step_outputs(job(run, "matrix"), "m")["published"]) == [ECHO]
    after = store_objects(released.store)
    new = sorted(set(after) - set(released.objects))
    assert archive_key("linear", "1.0.1") in new and all(k.startswith("boxes/linear/") for k in new), new
    # ...nor republished: every object of echo is as v1.0.0 wrote it, byte for byte
    assert {k: v for k, v in after.items() if k.startswith("boxes/echo/")} == {
        k: v for k, v in released.objects.items() if k.startswith("boxes/echo/")
    }
    assert errors(run) == []
