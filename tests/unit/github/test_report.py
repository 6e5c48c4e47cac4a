from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from scrollcase.errors import GitHubError, Problem, RecipeError
from scrollcase.github import report
from scrollcase.github.report import RunnerEnv
from tests.support.outputs import read_outputs


def test_annotation_escapes_data_and_properties() -> None:
    line = report.annotation(
        Problem(
            message="50% bad\nsecond line",
            file="recipes/a,b:c/recipe.json",
            line=3,
            column=7,
            key="target.cudaVersion",
            fix="use 12.4",
        ),
        title="Recipe: error",
    )
    assert line.startswith("::error file=recipes/a%2Cb%3Ac/recipe.json,line=3,col=7,title=Recipe%3A error::")
    assert "50%25 bad%0Asecond line%0Afix: use 12.4" in line
    assert "\n" not in line


def test_annotations_capped_per_level_with_one_counting_notice() -> None:
    problems = (
        [Problem(message=f"e{i}") for i in range(15)]
        + [Problem(message=f"w{i}", severity="warning") for i in range(12)]
        + [Problem(message="n", severity="notice")]
    )
    lines = report.annotation_lines(problems)
    assert sum(x.startswith("::error") for x in lines) == 10
    assert sum(x.startswith("::warning") for x in lines) == 10
    notices = [x for x in lines if x.startswith("::notice")]
    assert len(notices) == 2
    assert notices[-1].endswith(
        "7 more finding(s) not annotated here (GitHub shows 10 per level and step); see the step summary"
    )


def test_annotate_error_without_problems_uses_message() -> None:
    stream = io.StringIO()
    report.annotate_error(RecipeError("broken", fix="repair it"), stream)
    assert stream.getvalue() == "::error title=RecipeError::broken%0Afix: repair it\n"


def test_summary_escapes_cells() -> None:
    table = report.SummaryTable("T", ["a", "b"], [["x|y", "line1\nline2"]], lead="lead")
    text = report.render_summary([table])
    assert "### T\n\nlead\n\n| a | b |\n|---|---|\n| x\\|y | line1<br>line2 |\n" in text
    assert "Truncated" not in text


def test_summary_truncates_under_the_cap_with_a_note() -> None:
    rows = [[f"case-{i}", "x" * 200] for i in range(10_000)]  # ~2 MiB of rows
    text = report.render_summary([report.SummaryTable("big", ["case", "message"], rows)])
    assert len(text.encode()) <= report.SUMMARY_LIMIT_BYTES
    written = text.count("| case-")
    assert 4000 < written < 10_000
    assert f"**Truncated:** {10_000 - written} of 10000 row(s)" in text


def test_summary_room_counts_what_the_step_already_wrote(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("x" * 1000)
    env = RunnerEnv(summary_file=summary)
    assert report.summary_room(env) == report.SUMMARY_LIMIT_BYTES - 1000
    assert report.write_summary("more\n", env)
    assert summary.read_text().endswith("more\n")
    assert not report.write_summary("ignored", RunnerEnv())


def test_outputs_roundtrip_with_random_delimiters(tmp_path: Path) -> None:
    out = tmp_path / "output"
    out.touch()
    env = RunnerEnv(output_file=out)
    values = {"matrix": {"include": [{"a": 1}]}, "empty": False, "count": 3, "text": "two\nlines", "none": None}
    assert report.set_outputs(values, env)
    raw = out.read_text()
    delimiters = re.findall(r"<<(ghadelimiter_[0-9a-f-]+)", raw)
    assert len(delimiters) == len(set(delimiters)) == len(values)
    assert read_outputs(raw) == {
        "matrix": '{"include":[{"a":1}]}',
        "empty": "false",
        "count": "3",
        "text": "two\nlines",
        "none": "",
    }


def test_outputs_are_a_no_op_outside_actions() -> None:
    assert not report.set_outputs({"a": "b"}, RunnerEnv())


def test_bad_output_name_is_rejected() -> None:
    with pytest.raises(GitHubError):
        report.output_block("a=b", "x")


def test_unwritable_output_file_is_a_github_error(tmp_path: Path) -> None:
    with pytest.raises(GitHubError) as info:
        report.set_outputs({"a": "b"}, RunnerEnv(output_file=tmp_path / "missing-dir" / "out"))
    assert "GITHUB_OUTPUT" in (info.value.fix or "")


def test_runner_env_from_environ() -> None:
    env = RunnerEnv.from_environ(
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_OUTPUT": "/o",
            "GITHUB_REPOSITORY": "o/r",
            "GITHUB_SHA": "abc",
            "GITHUB_API_URL": "http://127.0.0.1:1/api",
        }
    )
    assert env.in_actions and env.output_file == Path("/o") and env.summary_file is None
    assert env.repository == "o/r" and env.sha == "abc" and env.api_url == "http://127.0.0.1:1/api"
    assert RunnerEnv.from_environ({}).api_url == "https://api.github.com"


def test_head_sha_prefers_the_pull_request_head(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"head": {"sha": "headsha"}}}))
    assert report.head_sha(RunnerEnv(event_file=event, sha="mergesha")) == "headsha"
    event.write_text(json.dumps({"ref": "refs/heads/main"}))
    assert report.head_sha(RunnerEnv(event_file=event, sha="pushsha")) == "pushsha"
