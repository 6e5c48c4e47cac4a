"""The one place scrollcase asks git which files changed (``git diff --name-only REF...HEAD``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from scrollcase.errors import HostError, UsageError

GIT_TIMEOUT_SECONDS = 60


def _git(args: list[str], cwd: Path) -> str:
    git = shutil.which("git")
    if git is None:
        raise HostError(
            "git is not installed or not on PATH", fix="install git, or run `scrollcase matrix` without --changed-since"
        )
    try:
        done = subprocess.run(
            [git, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
            encoding="utf-8",
        )
    except subprocess.TimeoutExpired:
        raise HostError(f"`git {' '.join(args)}` took longer than {GIT_TIMEOUT_SECONDS}s") from None
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
    try:
        done = subprocess.run(
            [git, "cat-file", "-e", f"{ref}^{{commit}}"],
            cwd=cwd,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def changed_files(ref: str, cwd: Path) -> list[str]:
    """Repository-relative POSIX paths changed between the merge base of ``ref`` and HEAD."""
    if not ref or ref.startswith("-"):
        raise UsageError(
            f"--changed-since needs a git ref, got {ref!r}", fix="pass e.g. origin/main or the pull request's base SHA"
        )
    out = _git(["-c", "core.quotepath=off", "diff", "--name-only", "-z", f"{ref}...HEAD", "--"], cwd)
    return sorted(name for name in out.split("\0") if name)
