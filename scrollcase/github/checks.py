"""Check runs through PyGithub: every annotation, not just the 10 per level a step may print.

The GitHub API takes at most 50 annotations per request, so the run is created with the first batch
and each further batch is a PATCH; the last one also completes the run.  The client is injected:
:func:`make_client` builds one for a token and API URL, tests point it at a local stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from scrollcase.errors import GitHubError, Problem

ANNOTATIONS_PER_REQUEST = 50
# The API rejects check run text fields longer than this.
MAX_TEXT_CHARS = 65535
Conclusion = Literal["success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"]


@dataclass
class CheckRunRefusedError(GitHubError):
    """The API answered 403: the token may not write checks.

    GitHub gives pull requests from forks (and Dependabot's) a read-only ``GITHUB_TOKEN`` whatever the
    workflow's ``permissions:`` say, so this is expected there; callers degrade to annotations.
    """

    status: int = 403


class RepositoryLike(Protocol):
    def create_check_run(self, **kwargs: Any) -> Any: ...


class GithubLike(Protocol):
    def get_repo(self, full_name_or_id: str) -> Any: ...


@dataclass(frozen=True)
class CheckRunPlan:
    """Everything one check run will say, computed before any request is made."""

    name: str
    head_sha: str
    title: str
    summary: str
    conclusion: Conclusion
    batches: tuple[tuple[dict[str, object], ...], ...]

    @property
    def request_count(self) -> int:
        return max(1, len(self.batches))


@dataclass(frozen=True)
class CheckRunResult:
    id: int
    url: str
    annotations: int
    requests: int


def _level(problem: Problem) -> str:
    return {"error": "failure", "warning": "warning"}.get(problem.severity, "notice")


def check_annotation(problem: Problem, fallback_path: str) -> dict[str, object]:
    """One API annotation; GitHub requires a path and a line, so file-less problems get the fallback."""
    line = problem.line if problem.line is not None and problem.line > 0 else 1
    message = problem.message if problem.fix is None else f"{problem.message}\nfix: {problem.fix}"
    if problem.key:
        message = f"{problem.key}: {message}"
    return {
        "path": problem.file or fallback_path,
        "start_line": line,
        "end_line": line,
        "annotation_level": _level(problem),
        "message": message[:MAX_TEXT_CHARS],
        "title": (problem.key or problem.severity)[:255],
    }


def plan_check_run(
    name: str, head_sha: str, problems: Sequence[Problem], summary: str, fallback_path: str, title: str | None = None
) -> CheckRunPlan:
    """Split ``problems`` into API batches and decide the conclusion (failure on any error)."""
    annotations = [check_annotation(p, fallback_path) for p in problems]
    batches = tuple(
        tuple(annotations[i : i + ANNOTATIONS_PER_REQUEST]) for i in range(0, len(annotations), ANNOTATIONS_PER_REQUEST)
    )
    errors = sum(1 for p in problems if p.severity == "error")
    conclusion: Conclusion = "failure" if errors else "success"
    default_title = f"{errors} failure(s)" if errors else "all checks passed"
    if len(summary) > MAX_TEXT_CHARS:
        note = "\n\n(truncated: see the JUnit artifact)"
        summary = summary[: MAX_TEXT_CHARS - len(note)] + note
    return CheckRunPlan(
        name=name,
        head_sha=head_sha,
        title=title or default_title,
        summary=summary,
        conclusion=conclusion,
        batches=batches,
    )


def _output(plan: CheckRunPlan, batch: Sequence[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {"title": plan.title, "summary": plan.summary}
    if batch:
        out["annotations"] = list(batch)
    return out


def publish_check_run(repo: RepositoryLike, plan: CheckRunPlan, api_url: str = "the GitHub API") -> CheckRunResult:
    """Create the check run with the first batch, PATCH the rest, complete it with the last; ``api_url``
    names the API in the error when it cannot be reached."""
    batches = list(plan.batches) or [()]
    try:
        if len(batches) == 1:
            run = repo.create_check_run(
                name=plan.name,
                head_sha=plan.head_sha,
                status="completed",
                conclusion=plan.conclusion,
                output=_output(plan, batches[0]),
            )
        else:
            run = repo.create_check_run(
                name=plan.name, head_sha=plan.head_sha, status="in_progress", output=_output(plan, batches[0])
            )
            for batch in batches[1:-1]:
                run.edit(output=_output(plan, batch))
            run.edit(status="completed", conclusion=plan.conclusion, output=_output(plan, batches[-1]))
    except Exception as exc:  # PyGithub raises GithubException and requests errors alike
        raise _api_error(exc, api_url) from None
    return CheckRunResult(
        id=int(run.id),
        url=str(run.html_url or ""),
        annotations=sum(len(b) for b in plan.batches),
        requests=len(batches),
    )


_ALREADY_REPORTED = "the annotations and the step summary already hold every result"
_FIXES = {
    401: "the token was not accepted (expired, or for another GitHub host): pass the job's GITHUB_TOKEN as "
    "github-token, and on GitHub Enterprise Server its API URL (GITHUB_API_URL, --api-url)",
    404: "check GITHUB_REPOSITORY and the API URL; a fork's token cannot write checks upstream",
}


def _api_error(exc: Exception, api_url: str) -> GitHubError:
    """The error for a failed check-run request: a token without the permission (403) is told to get it; an
    API that never answered, or answered with its own failure (5xx), is not a permission problem."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int):  # no HTTP answer: requests' ConnectionError and Timeout are OSErrors
        what = "cannot reach" if isinstance(exc, OSError) else "no usable answer from"
        return GitHubError(
            f"{what} {api_url} to create the check run ({type(exc).__name__}): {exc}"[:500],
            fix="check the API URL (GITHUB_API_URL; --api-url on GitHub Enterprise Server) and that this runner "
            f"can reach it (a self-hosted runner's proxy or firewall), then rerun the job; {_ALREADY_REPORTED}",
        )
    message = f"creating the check run failed ({status}): {exc}"[:500]
    if status >= 500:
        fix = f"{api_url} failed on its side (an outage?): rerun the job later; {_ALREADY_REPORTED}"
        return GitHubError(message, fix=fix)
    fix = _FIXES.get(status, "give the job `permissions: checks: write` and pass its GITHUB_TOKEN as github-token")
    if status == 403:
        return CheckRunRefusedError(message, fix=fix + " (pull requests from forks always get a read-only token)")
    return GitHubError(message, fix=fix)


def make_client(token: str, base_url: str, seconds_between_writes: float = 1.0) -> Any:
    """A PyGithub client; imported here so nothing talks to GitHub at import time."""
    from github import Auth, Github

    # lazy: a repository handle costs no request; the check run POST is the first one.
    return Github(
        auth=Auth.Token(token),
        base_url=base_url.rstrip("/"),
        retry=None,
        lazy=True,
        seconds_between_writes=seconds_between_writes,
        seconds_between_requests=0,
    )


def repository(client: GithubLike, full_name: str) -> Any:
    """The repository handle (no request with a lazy client such as :func:`make_client`'s)."""
    return client.get_repo(full_name)
