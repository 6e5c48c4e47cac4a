"""PyGithub against a local stand-in of the API: batching, payloads, errors."""

from __future__ import annotations

import pytest

from scrollcase.errors import GitHubError, Problem
from scrollcase.github import checks
from tests.integration.github_api import fake_github


def failures(n: int) -> list[Problem]:
    return [Problem(message=f"case {i} failed", file="recipes/a/recipe.json", line=i + 1) for i in range(n)]


def test_120_failures_are_sent_in_three_batched_requests() -> None:
    with fake_github() as api:
        client = checks.make_client("tok3n", api.url, seconds_between_writes=0)
        plan = checks.plan_check_run("self-test (a)", "f" * 40, failures(120), "summary", "junit.xml")
        result = checks.publish_check_run(checks.repository(client, "octo/boxes"), plan)
    sent = api.check_run_requests()
    assert [r.method for r in sent] == ["POST", "PATCH", "PATCH"]
    assert [r.path for r in sent] == [
        "/repos/octo/boxes/check-runs",
        "/repos/octo/boxes/check-runs/7",
        "/repos/octo/boxes/check-runs/7",
    ]
    assert [len(r.body["output"]["annotations"]) for r in sent] == [50, 50, 20]
    assert sent[0].body["head_sha"] == "f" * 40 and sent[0].body["status"] == "in_progress"
    assert sent[-1].body["status"] == "completed" and sent[-1].body["conclusion"] == "failure"
    first = sent[0].body["output"]["annotations"][0]
    assert first == {
        "path": "recipes/a/recipe.json",
        "start_line": 1,
        "end_line": 1,
        "annotation_level": "failure",
        "message": "case 0 failed",
        "title": "error",
    }
    lines = [a["start_line"] for r in sent for a in r.body["output"]["annotations"]]
    assert lines == list(range(1, 121))
    assert all("tok3n" in r.authorization for r in sent)
    assert len(api.requests) == 3  # lazy repository: no GET before the check run
    assert result.requests == 3 and result.annotations == 120 and result.id == 7


def test_a_clean_run_is_one_completed_request() -> None:
    with fake_github() as api:
        client = checks.make_client("t", api.url, seconds_between_writes=0)
        plan = checks.plan_check_run("parity", "e" * 40, [], "ok", "junit.xml")
        checks.publish_check_run(checks.repository(client, "octo/boxes"), plan)
    (only,) = api.check_run_requests()
    assert only.body["conclusion"] == "success" and "annotations" not in only.body["output"]


def test_api_refusal_is_a_github_error_with_a_fix() -> None:
    with fake_github() as api:
        client = checks.make_client("t", api.url + "/nothing-here", seconds_between_writes=0)
        plan = checks.plan_check_run("x", "d" * 40, failures(1), "s", "j.xml")
        with pytest.raises(GitHubError) as info:
            checks.publish_check_run(checks.repository(client, "octo/boxes"), plan)
    assert "404" in info.value.message and info.value.fix


@pytest.mark.parametrize(
    ("status", "fix_says"),
    [(502, "failed on its side"), (401, "token was not accepted"), (403, "permissions: checks: write")],
)
def test_each_answer_gets_its_own_fix(status: int, fix_says: str) -> None:
    """Only a refusal (403) asks for `permissions: checks: write`; GitHub's own failure and a token it does not
    accept say so. The 403 stays the refusal the caller turns into a warning."""
    with fake_github(refuse_writes=status) as api:
        client = checks.make_client("t", api.url, seconds_between_writes=0)
        plan = checks.plan_check_run("x", "d" * 40, failures(1), "s", "j.xml")
        with pytest.raises(GitHubError) as info:
            checks.publish_check_run(checks.repository(client, "octo/boxes"), plan, api.url)
    error = info.value
    assert f"({status})" in error.message and error.fix is not None and fix_says in error.fix, error.fix
    assert isinstance(error, checks.CheckRunRefusedError) == (status == 403)
    assert ("checks: write" in error.fix) == (status == 403)
    if status == 502:
        assert api.url in error.fix
