from __future__ import annotations

from scrollcase.errors import Problem
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
