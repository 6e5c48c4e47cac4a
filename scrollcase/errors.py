"""The one error hierarchy of scrollcase.

Library code raises these; only the CLI (``scrollcase.cli``) turns them into an exit code and a
rendering (plain text locally, workflow annotations on GitHub).  Every error can carry a list of
:class:`Problem` so that all mistakes in one file are reported in one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One actionable finding: where it is, what is wrong, how to fix it."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    key: str | None = None  # JSON path such as ``target.cudaVersion`` or a TOML key
    value: str | None = None  # the offending value, already rendered for humans
    fix: str | None = None
    severity: str = "error"  # "error" | "warning" | "notice"

    def location(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def render(self) -> str:
        head = f"{self.location()}: {self.severity}: "
        if self.key:
            head += f"{self.key}: "
        text = head + self.message
        if self.value is not None:
            text += f" (got {self.value})"
        if self.fix:
            text += f"\n    fix: {self.fix}"
        return text

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ScrollcaseError(Exception):
    """Base of every error scrollcase raises on purpose.  ``exit_code`` is what the CLI exits with."""

    message: str
    problems: Sequence[Problem] = field(default_factory=tuple)
    fix: str | None = None
    exit_code = 1
    kind = "error"

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        lines = [self.message]
        lines.extend(p.render() for p in self.problems)
        if self.fix:
            lines.append(f"fix: {self.fix}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "error": type(self).__name__,
            "exitCode": self.exit_code,
            "message": self.message,
            "problems": [p.to_json() for p in self.problems],
        }
        if self.fix:
            out["fix"] = self.fix
        return out


class UsageError(ScrollcaseError):
    """Bad command line: unknown recipe id, missing argument, conflicting options."""

    exit_code = 2


class RecipeError(ScrollcaseError):
    """recipe.json (or the recipe folder) is invalid."""

    exit_code = 3


class ManifestError(ScrollcaseError):
    """pixi.toml does not follow the rules for the recipe's target."""

    exit_code = 3


class LockError(ScrollcaseError):
    """pixi.lock is missing, unreadable, stale, or not the build the target promises."""

    exit_code = 4


class SolveError(LockError):
    """The solver could not produce an environment for the recipe's target."""


class BuildError(ScrollcaseError):
    """Installing, pruning, packing or writing the box failed."""

    exit_code = 5


class SelfTestError(ScrollcaseError):
    """The box's own interpreter failed one of the recipe's self-test checks."""

    exit_code = 6


class ParityError(ScrollcaseError):
    """Outputs on two accelerators disagree beyond the declared tolerances, or a run failed."""

    exit_code = 7


class IntegrityError(ScrollcaseError):
    """An archive or download does not match its size/sha256, or contains an unsafe entry."""

    exit_code = 8


class StoreError(ScrollcaseError):
    """The object store (S3 or a directory) failed or refused a request."""

    exit_code = 9


class ConflictError(StoreError):
    """A published key already holds different bytes: releases are immutable."""

    exit_code = 10


class HostError(ScrollcaseError):
    """This machine cannot build the target (cross-build, old driver, no disk), or cannot run the box
    ``scrollcase unpack`` is installing (no NVIDIA GPU, old driver, no compiled architecture for its GPUs)."""

    exit_code = 11


class GitHubError(ScrollcaseError):
    """Talking to GitHub (outputs, check runs, matrix limits) failed."""

    exit_code = 12


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        ScrollcaseError,
        UsageError,
        RecipeError,
        ManifestError,
        LockError,
        SolveError,
        BuildError,
        SelfTestError,
        ParityError,
        IntegrityError,
        StoreError,
        ConflictError,
        HostError,
        GitHubError,
    )
}


def describe_path(path: Path | str | None) -> str | None:
    """Render a path for messages: relative to the working directory when it is inside it."""
    if path is None:
        return None
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


def collect(problems: Iterable[Problem]) -> tuple[Problem, ...]:
    """Sort problems by file and line so reports read top to bottom."""
    return tuple(sorted(problems, key=lambda p: (p.file or "", p.line or 0, p.column or 0)))
