"""Workflow commands (annotations), step summary and outputs for GitHub Actions.

Rendering is pure (``annotation_lines``, ``render_summary``, ``output_block``); the few writers take the
runner's environment as a :class:`RunnerEnv` so tests pass temp files instead of touching ``os.environ``.

Commands that want to expose step outputs call :func:`set_outputs`; it is a no-op outside Actions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from actions_toolkit.file_command import prepare_key_value_message

from scrollcase.errors import GitHubError, LockError, ParityError, Problem, ScrollcaseError, SelfTestError
from scrollcase.github.paths import located
from scrollcase.reports.junit import JUnitResult, Tally, read_junit

if TYPE_CHECKING:  # its models take a third of a second to build; `scrollcase matrix` never needs them
    from scrollcase.format.release import ReleaseManifest

# GitHub shows at most 10 annotations of each level per step; the rest vanish silently.
ANNOTATIONS_PER_LEVEL = 10
# GitHub rejects a step summary over 1 MiB; keep a margin for the truncation note.
SUMMARY_LIMIT_BYTES = 1024 * 1024
SUMMARY_NOTE_RESERVE = 512

# str, numbers, bool, None, or anything JSON-serialisable (lists, dicts).
OutputValue = object


@dataclass(frozen=True)
class RunnerEnv:
    """The parts of a GitHub Actions step environment scrollcase reads."""

    in_actions: bool = False
    output_file: Path | None = None
    summary_file: Path | None = None
    event_file: Path | None = None
    workspace: Path | None = None
    repository: str | None = None
    sha: str | None = None
    api_url: str = "https://api.github.com"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RunnerEnv:
        env = os.environ if environ is None else environ

        def path(name: str) -> Path | None:
            value = env.get(name)
            return Path(value) if value else None

        return cls(
            in_actions=env.get("GITHUB_ACTIONS") == "true",
            output_file=path("GITHUB_OUTPUT"),
            summary_file=path("GITHUB_STEP_SUMMARY"),
            event_file=path("GITHUB_EVENT_PATH"),
            workspace=path("GITHUB_WORKSPACE"),
            repository=env.get("GITHUB_REPOSITORY") or None,
            sha=env.get("GITHUB_SHA") or None,
            api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
        )


# --- annotations ---------------------------------------------------------------------------------


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
    if problem.value is not None:
        text += f"\ngot: {problem.value}"
    if problem.key:
        text = f"{problem.key}: {text}"
    head = f"::{_level(problem)}"
    if props:
        head += " " + ",".join(props)
    return f"{head}::{_escape_data(text)}"


def _level(problem: Problem) -> str:
    return problem.severity if problem.severity in ("error", "warning", "notice") else "error"


def annotation_lines(
    problems: Iterable[Problem],
    title: str | None = None,
    per_level: int = ANNOTATIONS_PER_LEVEL,
    where_else: str = "the step summary",
) -> list[str]:
    """Workflow commands for ``problems``, at most ``per_level`` errors and warnings.

    GitHub drops annotations past 10 per level and step without a word, so the rest are counted in
    one notice that says where to find them.  Notices share that budget with the counting notice.
    """
    shown: dict[str, int] = {"error": 0, "warning": 0, "notice": 0}
    budget = {"error": per_level, "warning": per_level, "notice": per_level - 1}
    lines: list[str] = []
    hidden = 0
    for problem in problems:
        level = _level(problem)
        if shown[level] < budget[level]:
            shown[level] += 1
            lines.append(annotation(problem, title))
        else:
            hidden += 1
    if hidden:
        lines.append(
            f"::notice title=More findings::{hidden} more finding(s) not annotated here "
            f"(GitHub shows {per_level} per level and step); see {where_else}"
        )
    return lines


def annotate(
    problems: Sequence[Problem], stream: IO[str], title: str | None = None, where_else: str = "the step summary"
) -> None:
    """Print the workflow commands, each file named relative to the repository root."""
    for line in annotation_lines(located(problems), title=title, where_else=where_else):
        print(line, file=stream)


def annotate_error(error: ScrollcaseError, stream: IO[str], junit: Path | None = None) -> None:
    """Annotate a failed command's error, unless ``junit`` (its --junit report) already holds it.

    A self-test or parity failure writes one JUnit case per failed check before it raises; `scrollcase
    report junit` (the actions' Report step, or any JUnit reporter) annotates those cases, so the
    command itself only logs the error: one annotation per failure, not two.
    """
    if junit is not None and reported_in_junit(error, junit):
        print(f"(the failed cases are in {junit}: `scrollcase report junit` annotates them)", file=stream)
        return
    problems = list(error.problems) or [Problem(message=error.message, fix=error.fix)]
    annotate(problems, stream, title=type(error).__name__, where_else="the log above")


def reported_in_junit(error: ScrollcaseError, junit: Path) -> bool:
    """Whether ``error`` is a self-test, parity or lock-check failure whose failed cases are in the JUnit file."""
    if not isinstance(error, SelfTestError | ParityError | LockError):
        return False
    try:
        results = read_junit(junit)
    except GitHubError:
        return False
    return any(r.failed for r in results)


# --- step summary --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryTable:
    """A markdown section: a heading, an optional lead paragraph and a table."""

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    lead: str = ""


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def _table_head(table: SummaryTable) -> str:
    head = f"### {table.title}\n\n"
    if table.lead:
        head += table.lead + "\n\n"
    head += "| " + " | ".join(_cell(c) for c in table.columns) + " |\n"
    return head + "|" + "|".join("---" for _ in table.columns) + "|\n"


def render_summary(tables: Sequence[SummaryTable], max_bytes: int = SUMMARY_LIMIT_BYTES) -> str:
    """Markdown for the step summary, cut row by row to fit ``max_bytes`` with a note saying so."""
    budget = max(0, max_bytes - SUMMARY_NOTE_RESERVE)
    parts: list[str] = []
    used = 0
    total_rows = sum(len(t.rows) for t in tables)
    written = 0
    for table in tables:
        head = _table_head(table)
        if used + len(head.encode()) > budget:
            break
        parts.append(head)
        used += len(head.encode())
        for row in table.rows:
            line = "| " + " | ".join(_cell(c) for c in row) + " |\n"
            if used + len(line.encode()) > budget:
                break
            parts.append(line)
            used += len(line.encode())
            written += 1
        parts.append("\n")
        used += 1
    if written < total_rows:
        parts.append(
            f"> **Truncated:** {total_rows - written} of {total_rows} row(s) left out to stay under "
            f"GitHub's {max_bytes // 1024} KiB step summary limit; the JUnit files hold them all.\n"
        )
    return "".join(parts)


def write_summary(markdown: str, env: RunnerEnv) -> bool:
    """Append to ``GITHUB_STEP_SUMMARY``; False when not running in Actions."""
    if env.summary_file is None:
        return False
    _append(env.summary_file, markdown, f"cannot write the step summary {env.summary_file}", "GITHUB_STEP_SUMMARY")
    return True


def _append(file: Path, text: str, failure: str, variable: str, newline: str | None = None) -> None:
    """Append to a file the runner reads after the step; GitHubError when it cannot be written."""
    try:
        with file.open("a", encoding="utf-8", newline=newline) as handle:
            handle.write(text)
    except OSError as exc:
        raise GitHubError(f"{failure}: {exc.strerror}", fix=f"{variable} must name a writable file") from None


def summary_room(env: RunnerEnv) -> int:
    """Bytes still allowed in this step's summary (GitHub caps the whole file, not one write)."""
    if env.summary_file is None or not env.summary_file.exists():
        return SUMMARY_LIMIT_BYTES
    return max(0, SUMMARY_LIMIT_BYTES - env.summary_file.stat().st_size)


# --- outputs -------------------------------------------------------------------------------------


def output_text(value: OutputValue) -> str:
    """How a value appears as a step output: booleans as true/false, structures as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def output_block(name: str, value: OutputValue) -> str:
    """``name<<DELIM ... DELIM`` with a random delimiter (actions-toolkit), safe for any value."""
    if not name or any(c in name for c in "\r\n=<"):
        raise GitHubError(f"invalid step output name {name!r}", fix="use letters, digits, '-' and '_'")
    try:
        block: str = prepare_key_value_message(name, output_text(value))
    except Exception as exc:  # actions-toolkit raises bare Exception for a delimiter clash
        raise GitHubError(f"cannot encode output {name!r}: {exc}") from None
    return block + "\n"


def set_outputs(values: Mapping[str, OutputValue], env: RunnerEnv | None = None) -> bool:
    """Write step outputs when ``GITHUB_OUTPUT`` is set; returns whether anything was written.

    Commands call this unconditionally: outside Actions it does nothing.
    """
    runner = env if env is not None else RunnerEnv.from_environ()
    if runner.output_file is None or not values:
        return False
    text = "".join(output_block(name, value) for name, value in values.items())
    _append(runner.output_file, text, f"cannot write step outputs to {runner.output_file}", "GITHUB_OUTPUT", "\n")
    return True


# --- pull request head ----------------------------------------------------------------------------


def head_sha(env: RunnerEnv) -> str | None:
    """The commit a check run belongs to: a PR's head, not the merge commit GITHUB_SHA names."""
    if env.event_file is not None and env.event_file.is_file():
        try:
            event = json.loads(env.event_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            event = {}
        pull = event.get("pull_request") if isinstance(event, dict) else None
        if isinstance(pull, dict):
            sha = (pull.get("head") or {}).get("sha")
            if isinstance(sha, str) and sha:
                return sha
    return env.sha


# --- results as GitHub shows them ---------------------------------------------------------------

STATUS_ICONS = {"passed": "✅ passed", "failed": "❌ failed", "error": "❌ error", "skipped": "⏭ skipped"}


def summary_table(title: str, results: Sequence[JUnitResult], counts: Tally) -> SummaryTable:
    """Failures first, so a truncated summary still shows what broke."""
    ordered = sorted(results, key=lambda r: (not r.failed, r.status == "skipped"))
    rows = [
        [
            r.suite,
            f"{r.classname}.{r.name}" if r.classname else r.name,
            STATUS_ICONS[r.status],
            f"{r.seconds:.2f}s",
            (r.message or "")[:500],
        ]
        for r in ordered
    ]
    lead = f"**{counts.passed} passed, {counts.failed} failed, {counts.skipped} skipped** of {counts.total}"
    return SummaryTable(title=title, columns=["Suite", "Case", "Status", "Time", "Message"], rows=rows, lead=lead)


def _gate(report_passed: bool | None) -> str:
    return "not run" if report_passed is None else ("passed" if report_passed else "failed")


def release_outputs(manifest: ReleaseManifest, release_path: Path) -> dict[str, object]:
    """Step outputs for a release manifest; the archive lies next to it (build's --out folder)."""
    return {
        "release": str(release_path),
        "archive": str(release_path.with_name(manifest.archive.name)),
        "sbom": str(release_path.with_name(manifest.sbom.name)) if manifest.sbom else "",
        "sha256": manifest.archive.sha256,
        "size": manifest.archive.size,
        "box-id": manifest.boxId,
        "version": manifest.version,
        "target-id": manifest.targetId,
        "recipe-id": manifest.recipeId,
        "archive-key": manifest.keys.archive,
        "release-key": manifest.keys.release,
        "self-test": _gate(manifest.selfTest.passed if manifest.selfTest else None),
        "parity": _gate(manifest.parity.passed if manifest.parity else None),
    }
