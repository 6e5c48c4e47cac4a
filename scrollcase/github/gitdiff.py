"""The one place scrollcase asks git which files changed (``git diff --name-only REF...HEAD``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from scrollcase.errors import HostError, UsageError
from scrollcase.io import proc

GIT_TIMEOUT_SECONDS = 60


def _git(args: list[str], cwd: Path) -> str:
    git = shutil.which("git")
    if git is None:
        raise HostError(
            "git is not installed or not on PATH", fix="install git, or run `scrollcase matrix` without --changed-since"
        )
    done = proc.run([git, *args], cwd=cwd, timeout=GIT_TIMEOUT_SECONDS)
    if done.timed_out:
        raise HostError(f"`git {' '.join(args)}` took longer than {GIT_TIMEOUT_SECONDS}s")
    if done.returncode != 0:
        raise UsageError(
            f"`git {' '.join(args)}` failed in {cwd}: {done.stderr.strip()[:400]}",
            fix="run inside the repository, and fetch the base ref first (actions/checkout with fetch-depth: 0)",
        )
    return done.stdout


def toplevel(cwd: Path) -> Path:
    """The root of the work tree ``cwd`` is in."""
    return Path(_git(["rev-parse", "--show-toplevel"], cwd).strip())


def has_commit(ref: str, cwd: Path) -> bool:
    """Whether ``ref`` names a commit this clone holds (a force-pushed ``before`` may be gone)."""
    git = shutil.which("git")
    if git is None or not ref or ref.startswith("-"):
        return False
    return proc.run([git, "cat-file", "-e", f"{ref}^{{commit}}"], cwd=cwd, timeout=GIT_TIMEOUT_SECONDS).ok


def changed_files(ref: str, cwd: Path) -> list[str]:
    """Repository-relative POSIX paths changed between the merge base of ``ref`` and HEAD."""
    if not ref or ref.startswith("-"):
        raise UsageError(
            f"--changed-since needs a git ref, got {ref!r}", fix="pass e.g. origin/main or the pull request's base SHA"
        )
    out = _git(["-c", "core.quotepath=off", "diff", "--name-only", "-z", f"{ref}...HEAD", "--"], cwd)
    return sorted(name for name in out.split("\0") if name)
