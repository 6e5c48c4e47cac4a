from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from scrollcase.errors import GitHubError, Problem
from scrollcase.github import checks
from scrollcase.github.checks import ANNOTATIONS_PER_REQUEST, MAX_TEXT_CHARS, check_annotation, plan_check_run


def test_120_failures_make_three_batches() -> None:
    problems = [Problem(message=f"case {i} failed", file="recipes/x/recipe.json", line=i + 1) for i in range(120)]
    plan = plan_check_run("self-test", "a" * 40, problems, "summary", "junit.xml")
    assert [len(b) for b in plan.batches] == [50, 50, 20]
    assert plan.request_count == 3 and ANNOTATIONS_PER_REQUEST == 50
    assert plan.conclusion == "failure" and plan.title == "120 failure(s)"


def test_no_problems_is_success_in_one_request() -> None:
    plan = plan_check_run("parity", "b" * 40, [], "all good", "junit.xml")
    assert plan.batches == () and plan.request_count == 1 and plan.conclusion == "success"


def test_annotation_needs_path_and_line() -> None:
    a = check_annotation(Problem(message="m", fix="f", key="k", severity="warning"), "out/junit.xml")
    assert a == {
        "path": "out/junit.xml",
        "start_line": 1,
        "end_line": 1,
        "annotation_level": "warning",
        "message": "k: m\nfix: f",
        "title": "k",
    }


def test_long_summary_is_cut_to_the_api_limit() -> None:
    plan = plan_check_run("x", "c" * 40, [], "y" * (MAX_TEXT_CHARS + 10), "j.xml")
    assert len(plan.summary) == MAX_TEXT_CHARS and plan.summary.endswith("see the JUnit artifact)")


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def hanging_up_server() -> Iterator[str]:
    """A 127.0.0.1 server that accepts each connection and closes it without a byte of answer."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def send_check_run(api_url: str) -> GitHubError:
    """A real PyGithub client sending a check run to ``api_url``; the error it ends in."""
    client = checks.make_client("t0ken", api_url, seconds_between_writes=0)
    plan = plan_check_run("self-test", "a" * 40, [Problem(message="case failed")], "summary", "junit.xml")
    with pytest.raises(GitHubError) as info:
        checks.publish_check_run(checks.repository(client, "octo/boxes"), plan, api_url)
    return info.value


@pytest.mark.parametrize("where", ["refused", "hung up"])
def test_an_api_that_cannot_be_reached_is_not_a_permissions_problem(where: str) -> None:
    """Issue 30: a network failure said "give the job `permissions: checks: write`". It says what happened (the
    API named, never reached) and the fix (its URL, the runner's network), and is not a refusal (a fork's 403,
    which the caller turns into a warning)."""
    if where == "refused":
        url = f"http://127.0.0.1:{closed_port()}"
        error = send_check_run(url)
    else:
        with hanging_up_server() as url:
            error = send_check_run(url)
    assert not isinstance(error, checks.CheckRunRefusedError)
    assert error.message.startswith(f"cannot reach {url} to create the check run (ConnectionError)"), error.message
    assert error.fix is not None and "checks: write" not in error.fix and "permission" not in error.fix
    assert "GITHUB_API_URL" in error.fix and "proxy or firewall" in error.fix, error.fix
