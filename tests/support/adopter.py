"""A model team's own repository that uses scrollcase's actions by name, made ready for act.

``tests/fixtures/adopter/repo`` holds it: two CPU recipes and ONE workflow, ``boxes.yml``, written from
docs/github.md's "Adopting scrollcase" section alone (``scrollcase/scrollcase/actions/<name>@v1``, the
SHA pin of the docs replaced by the tag act can map).  Three things differ per machine and are filled in
here: ``@CHANNEL@`` (the demo's local conda channel, which packages this machine's CPython),
``@PYTHON@`` (its major.minor) and ``@WEIGHTS@`` (a file:// folder standing in for the team's weights
server, a copy of ``tests/fixtures/adopter/weights``).  The locks are then written by
``scrollcase lock``, as the team would commit them, and the result is the first commit of ``main``.

Used by tests/integration/test_adopter.py and benchmarks/bench_adopter.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import act as act_support
from tests.support.act import Act, ActRun, git

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "adopter"
WORKFLOW = ".github/workflows/boxes.yml"
OWNER_REPO = "models-team/boxes"
LINEAR = "linear-linux-x86_64-cpu"
ECHO = "echo-linux-x86_64-cpu"
# What act maps `uses: scrollcase/scrollcase/actions/<name>@v1` to: a copy of this checkout.
SCROLLCASE_REF = "scrollcase/scrollcase@v1"
# Folders of this checkout the actions never read (they install pyproject.toml + scrollcase/).
NOT_IN_THE_ACTION_COPY = ("tests", "benchmarks", "docs", "recipes", ".github")
# act's line for a finished step: "✅  Success - Main Install scrollcase [5.9s]" (the JSON names only the outer step)
STEP_DONE = re.compile(r"(?:Success|Failure) - (Main|Post) (.+) \[[^\]]*\]\s*$")
REPOSITORY = {"full_name": OWNER_REPO, "name": "boxes", "owner": {"login": "models-team"}}


@dataclass(frozen=True)
class Adopter:
    """The adopter's repository at its first commit, and what act needs to run its workflow."""

    base: Path
    weights: Path
    repositories: dict[str, Path]
    act: Act

    def clone(self, dest: Path) -> Path:
        git(dest.parent, "clone", "-q", str(self.base), dest.name)
        git(dest, "remote", "set-url", "origin", f"https://github.com/{OWNER_REPO}.git")
        return dest

    def run(self, repo: Path, event_name: str, event: Mapping[str, Any], **kwargs: Any) -> ActRun:
        """``boxes.yml`` for one event, with the tool cache and cache server every run here shares."""
        return self.act.run(
            repo,
            WORKFLOW,
            event_name,
            {**event, "repository": REPOSITORY},
            secrets={"GITHUB_TOKEN": "ghs_adopter-token"},
            repositories=self.repositories,
            shared_servers=True,
            **kwargs,
        )


def substitute(folder: Path, values: Mapping[str, str]) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in (".json", ".toml"):
            text = path.read_text(encoding="utf-8")
            for placeholder, value in values.items():
                text = text.replace(placeholder, value)
            path.write_text(text, encoding="utf-8")


def lock(repo: Path, recipe: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "--quiet", "lock", recipe],
        cwd=repo,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(repo.parent)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scrollcase lock {recipe} failed in the adopter repository: {done.stderr}")


def prepare(folder: Path, channel: Path, act: Act) -> Adopter:
    """The adopter's repository under ``folder``, its weights server and the copy of scrollcase act maps."""
    if not (channel / "noarch" / "repodata.json").is_file():
        raise RuntimeError(f"{channel} is not a conda channel (no noarch/repodata.json): run `scrollcase demo`")
    weights = folder / "weights-server"
    shutil.copytree(FIXTURE / "weights", weights)
    base = folder / "boxes"
    shutil.copytree(FIXTURE / "repo", base)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    values = {"@CHANNEL@": channel.resolve().as_uri(), "@WEIGHTS@": weights.resolve().as_uri(), "@PYTHON@": python}
    substitute(base / "recipes", values)
    for recipe in (LINEAR, ECHO):
        lock(base, recipe)
    git(base, "init", "-q", "-b", "main")
    git(base, "add", "-A")
    git(base, "commit", "-q", "-m", "two boxes")
    scrollcase = folder / "scrollcase-action"
    act_support.copy_tree(scrollcase, act_support.working_tree_files(), skip=NOT_IN_THE_ACTION_COPY)
    repositories = {**act_support.local_repositories(ROOT), SCROLLCASE_REF: scrollcase}
    return Adopter(base, weights, repositories, act)


def step_seconds(run: ActRun, job: str, stage: str = "Main") -> dict[str, float]:
    """Seconds per step of ``job`` in ``stage`` (Main, Post) as act timed them, by the name act shows (a
    composite action's own steps by theirs, summed over the actions that share them)."""
    found: dict[str, float] = {}
    for entry in run.entries:
        done = STEP_DONE.search(entry.get("msg", ""))
        if entry.get("job") == job and "executionTime" in entry and done and done.group(1) == stage:
            found[done.group(2)] = found.get(done.group(2), 0.0) + entry["executionTime"] / 1e9
    return found
