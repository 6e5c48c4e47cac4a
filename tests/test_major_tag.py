"""scripts/major-tag (run by .github/workflows/major-tag.yml) against a real bare remote: v1 follows the newest
v1.y.z release, never moves back for a patch of an older line, and pre-release or malformed tags are refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "major-tag"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
ENV |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
ENV.pop("GITHUB_STEP_SUMMARY", None)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV, check=True)
    return done.stdout.strip()


def major_tag(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=repo, capture_output=True, text=True, env=env or ENV, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(remote))
    return work


def release(repo: Path, tag: str, *, annotated: bool = True) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", tag)
    git(repo, "tag", *(["-a", "-m", tag] if annotated else []), tag)
    git(repo, "push", "-q", "origin", "HEAD", tag)
    return git(repo, "rev-parse", "HEAD")


def remote_commit(repo: Path, tag: str) -> str:
    return git(repo, "ls-remote", "origin", f"refs/tags/{tag}").split("\t")[0]


def test_the_major_tag_follows_each_newer_release(repo: Path, tmp_path: Path) -> None:
    first = release(repo, "v1.0.0")
    summary = tmp_path / "summary.md"
    done = major_tag(repo, "v1.0.0", env={**ENV, "GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 0, done.stderr
    assert remote_commit(repo, "v1") == first
    assert summary.read_text(encoding="utf-8") == f"moved v1 to v1.0.0 ({first})\n"
    second = release(repo, "v1.1.0", annotated=False)
    assert major_tag(repo, "v1.1.0").returncode == 0
    assert remote_commit(repo, "v1") == second
    again = major_tag(repo, "v1.1.0")
    assert again.returncode == 0 and "v1 already points at v1.1.0" in again.stdout


def test_a_patch_of_an_older_line_leaves_the_major_tag(repo: Path) -> None:
    base = release(repo, "v1.0.0")
    newest = release(repo, "v1.1.0")
    assert major_tag(repo, "v1.1.0").returncode == 0
    git(repo, "checkout", "-q", "-b", "1.0.x", base)
    release(repo, "v1.0.1")
    done = major_tag(repo, "v1.0.1")
    assert done.returncode == 0, done.stderr
    assert "v1 stays at v1.1.0: v1.0.1 is older" in done.stdout
    assert remote_commit(repo, "v1") == newest


def test_a_new_major_gets_its_own_tag(repo: Path) -> None:
    one = release(repo, "v1.4.0")
    assert major_tag(repo, "v1.4.0").returncode == 0
    two = release(repo, "v2.0.0")
    assert major_tag(repo, "v2.0.0").returncode == 0
    assert (remote_commit(repo, "v1"), remote_commit(repo, "v2")) == (one, two)


def test_dry_run_pushes_nothing(repo: Path) -> None:
    release(repo, "v1.0.0")
    done = major_tag(repo, "v1.0.0", "--dry-run")
    assert done.returncode == 0 and done.stdout.startswith("would have moved v1 to v1.0.0")
    assert remote_commit(repo, "v1") == ""


@pytest.mark.parametrize("tag", ["v1.2.0-rc1", "v1.2", "1.2.3", "v1"])
def test_anything_but_a_release_tag_is_refused(repo: Path, tag: str) -> None:
    release(repo, "v1.0.0")
    done = major_tag(repo, tag)
    assert done.returncode == 1
    assert f"error: {tag} is not a release tag vX.Y.Z" in done.stderr
    assert remote_commit(repo, "v1") == ""
