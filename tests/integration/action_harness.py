"""Run a composite action's steps the way the GitHub runner does, on this machine.

Each ``run:`` step is a bash script (``bash --noprofile --norc -eo pipefail``) with the step's ``env:``
(expressions substituted from ``inputs``, ``steps.<id>.outputs`` and ``runner``), its own
GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files, GITHUB_EVENT_PATH, GITHUB_ACTION_PATH and RUNNER_TEMP.
``uses:`` steps (setup-python, cache) are not run: the caller supplies their outputs, and the harness
records the ``with:`` they were given.  ``if:`` conditions are evaluated with GitHub's rules for the
small expression language the actions use.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from tests.support.outputs import read_outputs

ROOT = Path(__file__).resolve().parents[2]
TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))"
    r"|(?P<func>always|success|failure|cancelled)\(\)|(?P<lit>true|false|null)"
    r"|(?P<path>[A-Za-z_][\w-]*(?:\.[\w-]+)*))"
)
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepRecord:
    name: str
    id: str | None
    status: str  # "success" | "failure" | "skipped"
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    summary: str = ""
    with_: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionResult:
    steps: list[StepRecord]
    outputs: dict[str, str]

    @property
    def failed(self) -> bool:
        return any(s.status == "failure" for s in self.steps)

    @property
    def annotations(self) -> list[str]:
        lines = [line for s in self.steps for line in (s.stdout + s.stderr).splitlines()]
        return [line for line in lines if line.startswith("::")]

    @property
    def summary(self) -> str:
        return "".join(s.summary for s in self.steps)

    def step(self, name: str) -> StepRecord:
        return next(s for s in self.steps if s.name == name)

    def log(self) -> str:
        return "\n".join(f"--- {s.name} [{s.status}]\n{s.stdout}\n{s.stderr}" for s in self.steps)


def _lookup(contexts: Mapping[str, Any], path: str) -> Any:
    value: Any = contexts
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return ""
        value = value[part]
    return value


def evaluate(expression: str, contexts: Mapping[str, Any], failed: bool = False) -> Any:
    """Evaluate an Actions expression (the subset the scrollcase actions use)."""
    python: list[str] = []
    position = 0
    text = expression.strip()
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"harness cannot evaluate {expression!r} at {text[position:]!r}")
        position = match.end()
        kind = match.lastgroup
        token = match.group(kind or "")
        if kind == "str":
            python.append(repr(token[1:-1].replace("''", "'")))
        elif kind == "op":
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(token, f" {token} "))
        elif kind == "func":
            python.append(repr({"always": True, "success": not failed, "failure": failed, "cancelled": False}[token]))
        elif kind == "lit":
            python.append({"true": "True", "false": "False", "null": "None"}[token])
        else:
            python.append(repr(_lookup(contexts, token)))
    return eval("".join(python), {"__builtins__": {}})


def substitute(value: Any, contexts: Mapping[str, Any]) -> str:
    """``${{ expr }}`` in a scalar replaced by its value, rendered the way the runner renders it."""

    def render(match: re.Match[str]) -> str:
        result = evaluate(match.group(1), contexts)
        if isinstance(result, bool):
            return "true" if result else "false"
        return "" if result is None else str(result)

    if isinstance(value, bool):
        return "true" if value else "false"
    return EXPRESSION.sub(render, str(value))


@dataclass
class Harness:
    """Everything a job gives a composite action: workspace, temp dir, event, stand-ins for uses:."""

    workspace: Path
    runner_temp: Path
    event: dict[str, Any] = field(default_factory=dict)
    uses_outputs: dict[str, Callable[[dict[str, str]], dict[str, str]]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    timeout: float = 300
    runner_os: str = "Linux"  # RUNNER_OS: "Windows" makes the actions use the Scripts/python.exe layout

    def base_env(self, action_dir: Path, files: Mapping[str, Path]) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RUNNER_", "INPUT_", "PYTHON", "VIRTUAL_ENV"))
        }
        event_path = self.runner_temp / "event.json"
        event_path.write_text(json.dumps(self.event), encoding="utf-8")
        env.update(
            {
                "GITHUB_ACTIONS": "true",
                "CI": "true",
                "GITHUB_WORKSPACE": str(self.workspace),
                "GITHUB_ACTION_PATH": str(action_dir),
                "GITHUB_EVENT_PATH": str(event_path),
                "GITHUB_REPOSITORY": "octo/boxes",
                "GITHUB_SHA": "0" * 39 + "1",
                "RUNNER_TEMP": str(self.runner_temp),
                "RUNNER_OS": self.runner_os,
                "RUNNER_ARCH": "X64",
                **{k: str(v) for k, v in files.items()},
                **self.extra_env,
            }
        )
        return env

    def run(self, action_dir: Path, inputs: Mapping[str, str]) -> ActionResult:
        spec = yaml.safe_load((action_dir / "action.yml").read_text(encoding="utf-8"))
        declared = spec.get("inputs") or {}
        unknown = set(inputs) - set(declared)
        if unknown:
            raise ValueError(f"inputs not declared by {action_dir.name}: {sorted(unknown)}")
        values = {name: str(inputs.get(name, (meta or {}).get("default", ""))) for name, meta in declared.items()}
        missing = [n for n, meta in declared.items() if (meta or {}).get("required") and not values[n]]
        if missing:
            raise ValueError(f"required inputs missing: {missing}")
        contexts: dict[str, Any] = {
            "inputs": values,
            "steps": {},
            "runner": {"temp": str(self.runner_temp), "os": self.runner_os, "arch": "X64"},
            "github": {"action_path": str(action_dir), "workspace": str(self.workspace), "event": self.event},
        }
        records: list[StepRecord] = []
        for index, step in enumerate(spec["runs"]["steps"]):
            record = self._step(index, step, action_dir, contexts, failed=any(r.status == "failure" for r in records))
            records.append(record)
            if record.id:
                contexts["steps"][record.id] = {"outputs": record.outputs, "outcome": record.status}
        declared_outputs = spec.get("outputs") or {}
        outputs = {name: substitute(meta["value"], contexts) for name, meta in declared_outputs.items()}
        return ActionResult(records, outputs)

    def _step(
        self, index: int, step: Mapping[str, Any], action_dir: Path, contexts: dict[str, Any], failed: bool
    ) -> StepRecord:
        name = step.get("name") or step.get("uses") or f"step {index}"
        record = StepRecord(name=name, id=step.get("id"), status="skipped")
        condition = step.get("if", "success()")
        if not any(f in str(condition) for f in ("always()", "failure()", "cancelled()")):
            condition = f"success() && ({condition})"
        if not evaluate(str(condition).replace("${{", "").replace("}}", ""), contexts, failed):
            return record
        if "uses" in step:
            record.with_ = {k: substitute(v, contexts) for k, v in (step.get("with") or {}).items()}
            providers = [p for prefix, p in self.uses_outputs.items() if step["uses"].startswith(prefix)]
            provider = providers[0] if providers else None
            if provider is None:
                raise ValueError(f"no stand-in for uses: {step['uses']}")
            record.outputs, record.status = provider(record.with_), "success"
            return record
        return self._run(index, step, action_dir, contexts, record)

    def _run(
        self, index: int, step: Mapping[str, Any], action_dir: Path, contexts: dict[str, Any], record: StepRecord
    ) -> StepRecord:
        assert step.get("shell") == "bash", f"{record.name}: the harness runs bash steps only"
        folder = self.runner_temp / "_steps" / str(index)
        folder.mkdir(parents=True, exist_ok=True)
        files = {
            "GITHUB_OUTPUT": folder / "output",
            "GITHUB_STEP_SUMMARY": folder / "summary",
            "GITHUB_ENV": folder / "env",
            "GITHUB_PATH": folder / "path",
        }
        for path in files.values():
            path.write_text("", encoding="utf-8")
        script = folder / "script.sh"
        script.write_text(step["run"], encoding="utf-8")
        record.env = {k: substitute(v, contexts) for k, v in (step.get("env") or {}).items()}
        env = {**self.base_env(action_dir, files), **record.env}
        cwd = substitute(step["working-directory"], contexts) if "working-directory" in step else self.workspace
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )
        record.stdout, record.stderr = done.stdout, done.stderr
        record.status = "success" if done.returncode == 0 else "failure"
        record.outputs = read_outputs(files["GITHUB_OUTPUT"].read_text(encoding="utf-8"))
        record.summary = files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")
        return record


def setup_script() -> ModuleType:
    """actions/setup_scrollcase.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("setup_scrollcase", ROOT / "actions" / "setup_scrollcase.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scrollcase_venv(runner_temp: Path, windows: bool = False, root: Path = ROOT) -> Path:
    """What a cache hit restores (or an earlier action of the job built): a venv whose python runs this
    checkout's scrollcase, marked with the key the setup script computes for ``root``.

    ``windows`` lays it out as a Windows venv does (``Scripts/python.exe``)."""
    relative = ("Scripts", "python.exe") if windows else ("bin", "python")
    python = runner_temp.joinpath("scrollcase-venv", *relative)
    python.parent.mkdir(parents=True, exist_ok=True)
    # It runs the tests' own interpreter, so `-m pip` through it would install into the venv running
    # the tests: refused, loudly.
    refuse_pip = 'if [ "$1 $2" = "-m pip" ]; then echo "stand-in venv: pip refused" >&2; exit 97; fi\n'
    python.write_text(f'#!/bin/sh\n{refuse_pip}PYTHONPATH="{ROOT}" exec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    env = {"RUNNER_TEMP": str(runner_temp), "RUNNER_OS": "Windows" if windows else "Linux", "RUNNER_ARCH": "X64"}
    key = setup_script().locate(root, env)["key"]
    (runner_temp / "scrollcase-venv" / ".scrollcase-key").write_text(key + "\n", encoding="utf-8")
    return python


def standard_uses(cache_hit: bool = True, base_python: str = sys.executable) -> dict[str, Callable[..., Any]]:
    """Stand-ins for the nested actions: setup-python gives a python-path, cache reports a hit."""
    return {
        "actions/setup-python@": lambda w: {
            "python-path": base_python,
            "python-version": ".".join(map(str, sys.version_info[:3])),
        },
        "actions/cache@": lambda w: {"cache-hit": "true" if cache_hit else "false"},
    }
