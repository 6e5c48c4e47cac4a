"""The one error hierarchy of scrollcase.

Library code raises these; only the CLI (``scrollcase.cli``) turns them into an exit code and a
rendering (plain text locally, workflow annotations on GitHub).  Every error can carry a list of
:class:`Problem` so that all mistakes in one file are reported in one run.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import overload

# What a fix says for the recipe's ID where the code that writes it does not know the recipe (reading a
# lock, say); the command that does names it (:func:`about_recipe`) before the user reads it.
RECIPE_ID = "<recipeId>"


@dataclass(frozen=True)
class Problem:
    """One actionable finding: where it is, what is wrong, how to fix it."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    key: str | None = None  # JSON path such as ``target.accelerator`` or a TOML key
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

    def for_recipe(self, recipe_id: str) -> Problem:
        """This problem with ``recipe_id`` where its fix says :data:`RECIPE_ID`."""
        if not self.fix or RECIPE_ID not in self.fix:
            return self
        return replace(self, fix=self.fix.replace(RECIPE_ID, recipe_id))


@dataclass
class ScrollcaseError(Exception):
    """Base of every error scrollcase raises on purpose.  ``exit_code`` is what the CLI exits with; each
    subclass names its own in its class line (``class UsageError(ScrollcaseError, exit_code=2)``)."""

    message: str
    problems: Sequence[Problem] = field(default_factory=tuple)
    fix: str | None = None
    exit_code = 1
    kind = "error"

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code

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

    def name_recipe(self, recipe_id: str) -> None:
        """Put ``recipe_id`` where the fixes say :data:`RECIPE_ID` (written before the recipe was known),
        so every fix a user reads runs as printed."""
        self.problems = tuple(p.for_recipe(recipe_id) for p in self.problems)
        if self.fix:
            self.fix = self.fix.replace(RECIPE_ID, recipe_id)

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


class UsageError(ScrollcaseError, exit_code=2):
    """Bad command line: unknown recipe id, missing argument, conflicting options."""


class RecipeError(ScrollcaseError, exit_code=3):
    """recipe.json (or the recipe folder) is invalid."""


class ManifestError(ScrollcaseError, exit_code=3):
    """pixi.toml does not follow the rules for the recipe's target."""


class LockError(ScrollcaseError, exit_code=4):
    """pixi.lock is missing, unreadable, stale, or not the build the target promises."""


class SolveError(LockError):
    """The solver could not produce an environment for the recipe's target."""


class BuildError(ScrollcaseError, exit_code=5):
    """Installing, pruning, packing or writing the box failed."""


class SelfTestError(ScrollcaseError, exit_code=6):
    """The box's own interpreter failed one of the recipe's self-test checks."""


class ParityError(ScrollcaseError, exit_code=7):
    """Outputs on two accelerators disagree beyond the declared tolerances, or a run failed."""


class IntegrityError(ScrollcaseError, exit_code=8):
    """An archive or download does not match its size/sha256, or contains an unsafe entry."""


class StoreError(ScrollcaseError, exit_code=9):
    """The object store (S3 or a directory) failed or refused a request."""


class ConflictError(StoreError, exit_code=10):
    """A published key already holds different bytes: releases are immutable."""


class HostError(ScrollcaseError, exit_code=11):
    """This machine cannot build the target (cross-build, old driver, no disk), or cannot run the box
    ``scrollcase unpack`` is installing (no NVIDIA GPU, old driver, no compiled architecture for its GPUs)."""


class GitHubError(ScrollcaseError, exit_code=12):
    """Talking to GitHub (outputs, check runs, matrix limits) failed."""


class TrustError(ScrollcaseError, exit_code=13):
    """The store's signed metadata (TUF) or a signed proof refused what the store served: not signed by
    the trusted roles, older than what this host saw last (rollback), expired (freeze), or bytes whose
    length or hashes differ from the signed ones (mix-and-match, endless data).  Nothing was installed."""


class InternalError(ScrollcaseError, exit_code=70):
    """A bug in scrollcase: an exception no check anticipated.  The CLI prints its traceback too."""


@contextmanager
def about_recipe(recipe_id: str) -> Iterator[None]:
    """Errors raised inside name ``recipe_id`` in their fixes (see :meth:`ScrollcaseError.name_recipe`)."""
    try:
        yield
    except ScrollcaseError as error:
        error.name_recipe(recipe_id)
        raise


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
        TrustError,
        InternalError,
    )
}


@overload
def describe_path(path: Path | str) -> str: ...
@overload
def describe_path(path: None) -> None: ...
def describe_path(path: Path | str | None) -> str | None:
    """Render a path for messages, the one renderer: a relative path as given (what the user typed;
    nothing is resolved, so it is cheap enough to call for every file); an absolute one relative to the
    working directory when it is inside it (also through a symlink, such as macOS's /tmp), else as given.
    Always with forward slashes, on Windows too: messages and JSON read the same on every runner."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        cwd = Path.cwd()
    except OSError:  # the working folder was deleted: nothing to be relative to
        return p.as_posix()
    if p.is_relative_to(cwd):
        return p.relative_to(cwd).as_posix()
    try:
        return p.resolve().relative_to(cwd.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return p.as_posix()


def collect(problems: Iterable[Problem]) -> tuple[Problem, ...]:
    """Sort problems by file and line so reports read top to bottom."""
    return tuple(sorted(problems, key=lambda p: (p.file or "", p.line or 0, p.column or 0)))


# errnos that say a path given on the command line cannot be used as given: a usage error (exit 2).
_PATH_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EEXIST,
        errno.ENOTEMPTY,
        errno.EINVAL,
        errno.EXDEV,
    }
)
_DISK_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
_ACCESS_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def from_os_error(exc: OSError) -> ScrollcaseError:
    """A located error for an OSError that no command turned into one: the path(s) and the reason.

    A path that cannot be used as given (missing, a file where a folder is needed, a name too long, a
    symlink loop) is a UsageError (exit 2); a full disk, missing permissions and every other failure
    of the operating system are a ScrollcaseError (exit 1).
    """
    reason = exc.strerror or str(exc) or type(exc).__name__
    where = describe_path(os.fsdecode(exc.filename)) if exc.filename is not None else None
    other = describe_path(os.fsdecode(exc.filename2)) if exc.filename2 is not None else None
    target = f"{where} -> {other}" if where and other else where
    message = f"cannot use {target}: {reason}" if target else f"operating system error: {reason}"
    code = errno.errorcode.get(exc.errno or 0)
    problems = (Problem(message=reason, file=where, value=code),) if where else ()
    if exc.errno in _PATH_ERRNOS:
        return UsageError(
            message,
            problems=problems,
            fix="check the path: a folder where a folder is needed, a file where a file is, "
            "no symlink loop, names under 255 bytes",
        )
    if exc.errno in _DISK_ERRNOS:
        return ScrollcaseError(message, problems=problems, fix="free disk space (or use another folder) and rerun")
    if exc.errno in _ACCESS_ERRNOS:
        return ScrollcaseError(message, problems=problems, fix="check the permissions of the path, or use another")
    return ScrollcaseError(message, problems=problems, fix="check the path and the machine, then rerun")


def from_value_error(exc: ValueError) -> UsageError:
    """A ValueError that escaped a command: almost always a value from the command line or the
    environment that a library refused (an empty path, an invalid URL)."""
    return UsageError(
        f"invalid value: {exc}",
        fix="check the command line's arguments and the environment "
        "variables it reads (set SCROLLCASE_DEBUG=1 for a traceback)",
    )


class ResultShownError(ScrollcaseError):
    """``error``, raised after a command printed its result in ``--json`` mode: that one JSON document
    already says what failed, so :func:`main` exits with ``error``'s code and prints nothing more."""

    def __init__(self, error: ScrollcaseError) -> None:
        super().__init__(error.message, error.problems, error.fix)
        self.exit_code = error.exit_code
