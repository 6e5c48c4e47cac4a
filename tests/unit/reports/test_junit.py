from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.errors import GitHubError
from scrollcase.github.paths import repo_relative
from scrollcase.reports.junit import JUnitCase, JUnitResult, junit_xml, parse_junit, result_problem, tally


def test_written_cases_read_back_with_file_and_line() -> None:
    xml = junit_xml(
        "self-test",
        [
            JUnitCase(
                "import torch", "selftest.import", passed=True, seconds=0.5, file="recipes/a/recipe.json", line=12
            ),
            JUnitCase(
                "pythonCode",
                "selftest.code",
                passed=False,
                message="CUDA runtime not usable",
                output="Traceback...",
                file="recipes/a/recipe.json",
                line=30,
            ),
            JUnitCase("metal", "parity", passed=True, skipped=True, message="no GPU here"),
        ],
        properties={"targetId": "linux-x86_64-cuda12.4"},
    )
    results = parse_junit(xml)
    assert [r.status for r in results] == ["passed", "failed", "skipped"]
    failed = results[1]
    assert failed.failed and failed.file == "recipes/a/recipe.json" and failed.line == 30
    assert failed.message == "CUDA runtime not usable" and failed.suite == "self-test"
    problem = result_problem(failed, "junit.xml")
    assert problem.file == "recipes/a/recipe.json" and problem.line == 30
    assert problem.message.startswith("selftest.code.pythonCode: CUDA runtime not usable")


def test_bare_testsuite_and_errors_are_read() -> None:
    results = parse_junit(
        '<testsuite name="s"><testcase name="c" classname="k" time="x">'
        '<error message="boom">trace</error></testcase></testsuite>'
    )
    assert results[0].status == "error" and results[0].failed and results[0].seconds == 0.0
    assert result_problem(results[0], "f.xml").file == "f.xml"


def test_invalid_xml_names_the_file() -> None:
    with pytest.raises(GitHubError) as info:
        parse_junit("<testsuites>", file="out/junit.xml")
    assert "out/junit.xml" in info.value.message


def test_repo_relative(tmp_path: Path) -> None:
    inside = tmp_path / "recipes" / "a" / "recipe.json"
    assert repo_relative(inside, tmp_path) == "recipes/a/recipe.json"
    assert repo_relative("/elsewhere/x.json", tmp_path) == "/elsewhere/x.json"


def _result(status: str) -> JUnitResult:
    return JUnitResult(suite="s", name="c", classname="k", status=status)


def test_tally_and_conclusion() -> None:
    counts = tally([_result("passed"), _result("failed"), _result("error"), _result("skipped")])
    assert (counts.total, counts.passed, counts.failed, counts.skipped) == (4, 1, 2, 1)
    assert counts.conclusion == "failure"
    assert tally([_result("passed")]).conclusion == "success"
    assert tally([], files=0).conclusion == "missing"
