"""Workflow commands (annotations), step summary and outputs for GitHub Actions."""

from __future__ import annotations

from typing import IO

from scrollcase.errors import Problem, ScrollcaseError


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(problem: Problem, title: str | None = None) -> str:
    """One ``::error``/``::warning``/``::notice`` workflow command for a problem."""
    props: list[str] = []
    if problem.file:
        props.append(f"file={_escape_property(problem.file)}")
    if problem.line is not None:
        props.append(f"line={problem.line}")
    if problem.column is not None:
        props.append(f"col={problem.column}")
    if title:
        props.append(f"title={_escape_property(title)}")
    text = problem.message if problem.fix is None else f"{problem.message}\nfix: {problem.fix}"
    if problem.key:
        text = f"{problem.key}: {text}"
    head = f"::{problem.severity}"
    if props:
        head += " " + ",".join(props)
    return f"{head}::{_escape_data(text)}"


def annotate_error(error: ScrollcaseError, stream: IO[str]) -> None:
    problems = list(error.problems) or [Problem(message=error.message, fix=error.fix)]
    for problem in problems:
        print(annotation(problem, title=type(error).__name__), file=stream)
