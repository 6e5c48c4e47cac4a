"""The self-test: the recipe's imports, files and pythonCode, run by the box's OWN interpreter.

Planning (:func:`plan_checks`) and mapping results (:func:`outcomes`, :func:`junit_cases`,
:func:`failure`) are pure; :func:`run_checks` is the thin executor.  Every check runs in its own
isolated process (``scrollcase.io.proc.run_python``: ``-I`` and no PYTHON* variables), so a module the
host has but the box lacks fails here exactly as it would on a user's machine.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scrollcase.errors import Problem, SelfTestError
from scrollcase.format.release import CheckOutcome, SelfTestReport
from scrollcase.io.proc import RunResult, run_python
from scrollcase.recipe.model import SelfTest
from scrollcase.reports.junit import JUnitCase

DEFAULT_TIMEOUT = 300.0
_PREFIX_CODE = "import sys; print(sys.prefix)"
_FILE_CODE = "import os, sys; p = sys.argv[1]; os.path.exists(p) or sys.exit('missing from the box: ' + p)"


@dataclass(frozen=True)
class Check:
    """One check: a name for reports, its kind, and the interpreter arguments that perform it."""

    name: str
    kind: str  # "entrypoint" | "import" | "file" | "code"
    args: tuple[str, ...]
    line: int | None = None  # line in recipe.json that declares it
    skip: str | None = None  # why this check is not run (e.g. an on-demand asset is not in the box)


@dataclass(frozen=True)
class CheckResult:
    check: Check
    run: RunResult
    problem: str | None  # None when the check passed

    @property
    def passed(self) -> bool:
        return self.problem is None


Runner = Callable[..., RunResult]


def plan_checks(
    self_test: SelfTest, entry_point: str, recipe_text: str | None = None, not_in_box: frozenset[str] = frozenset()
) -> list[Check]:
    """The checks to run, in order: the interpreter itself, each import, each file, the code.

    ``not_in_box`` are files deliberately left out (on-demand assets): their file checks are skipped.
    """
    found = _declaration_lines(recipe_text or "")

    def line(kind: str, name: str = "") -> int | None:
        return found.get((kind, name)) or found.get((kind, "")) or found.get(("root", ""))

    checks = [Check(f"entrypoint {entry_point}", "entrypoint", ("-c", _PREFIX_CODE), line("root"))]
    checks += [
        Check(f"import {name}", "import", ("-c", f"import {name}"), line("import", name)) for name in self_test.imports
    ]
    absent = "on-demand asset, fetched by the host app, not in the box"
    checks += [
        Check(
            f"file {path}",
            "file",
            ("-c", _FILE_CODE, path),
            line("file", path),
            skip=absent if path in not_in_box else None,
        )
        for path in self_test.files
    ]
    if self_test.pythonCode.strip():
        checks.append(Check("pythonCode", "code", ("-c", self_test.pythonCode), line("code")))
    return checks


def check_env(cuda: bool, box_root: Path, model_cache: Path) -> dict[str, str]:
    """Variables every check sees: the box's own locations, and the first GPU for CUDA targets."""
    env = {"SCROLLCASE_BOX_ROOT": str(box_root), "SCROLLCASE_MODEL_CACHE": str(model_cache)}
    if cuda:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    return env


def judge(check: Check, run: RunResult, env_dir: Path) -> str | None:
    """Why ``run`` failed ``check``, or None when it passed."""
    if run.timed_out:
        return f"timed out after {run.duration:.0f}s"
    if not run.ok:
        return _failed(run)
    if check.kind == "entrypoint":
        prefix = Path(run.stdout.strip())
        if _real(prefix) != _real(env_dir):
            return f"the interpreter runs with sys.prefix {prefix}, not the box's environment {env_dir}"
    return None


def run_checks(
    checks: Sequence[Check],
    python: Path,
    env_dir: Path,
    box_root: Path,
    *,
    env: Mapping[str, str],
    timeout: float = DEFAULT_TIMEOUT,
    runner: Runner = run_python,
) -> list[CheckResult]:
    """Run every check (a failure does not stop the others) with the box root as working directory."""
    results = []
    for check in checks:
        if check.skip:
            results.append(CheckResult(check, RunResult(check.args, 0, "", "", 0.0), None))
            continue
        run = runner(python, check.args, env=env, timeout=timeout, cwd=box_root)
        results.append(CheckResult(check, run, judge(check, run, env_dir)))
    return results


def outcomes(results: Sequence[CheckResult]) -> SelfTestReport:
    checks = [
        CheckOutcome(
            name=r.check.name,
            kind=r.check.kind,  # type: ignore[arg-type]
            passed=r.passed,
            durationSeconds=round(r.run.duration, 3),
            message=r.problem or (f"skipped: {r.check.skip}" if r.check.skip else ""),
        )
        for r in results
    ]
    return SelfTestReport(passed=all(c.passed for c in checks), checks=checks)


def junit_cases(results: Sequence[CheckResult], recipe_file: str | None, suite: str) -> list[JUnitCase]:
    return [
        JUnitCase(
            name=r.check.name,
            classname=f"{suite}.{r.check.kind}",
            passed=r.passed,
            message=r.problem or r.check.skip or "",
            skipped=r.check.skip is not None,
            output=_output(r.run),
            seconds=r.run.duration,
            file=recipe_file,
            line=r.check.line,
        )
        for r in results
    ]


def failure(results: Sequence[CheckResult], recipe_file: str | None, where: str) -> SelfTestError | None:
    """The error for failed checks (each with its stderr), or None when all passed."""
    failed = [r for r in results if not r.passed]
    if not failed:
        return None
    problems = [
        Problem(
            message=f"{r.check.name}: {r.problem}",
            file=recipe_file,
            line=r.check.line,
            key="selfTest",
            value=_details(r),
            fix=_FIXES[r.check.kind],
        )
        for r in failed
    ]
    return SelfTestError(
        f"self-test failed in {where}: {len(failed)} of {len(results)} check(s) failed", problems=problems
    )


def _details(result: CheckResult) -> str | None:
    """The captured stderr, unless it says nothing more than the problem line itself."""
    text = _tail(result.run.stderr).strip()
    return text if text and text != result.problem else None


# How to fix a failed check, by its kind.
_FIXES = {
    "import": "add the package that provides this module to pixi.toml, re-lock, or remove the import",
    "file": "bundle the file (assets with --weights bundled) or correct selfTest.files",
    "code": "fix the box (or the pythonCode) so the code runs cleanly with the box's interpreter",
    "entrypoint": "check pythonEntryPoint and that the environment installs python",
}


def _declaration_lines(text: str) -> dict[tuple[str, str], int]:
    """Best-effort 1-based lines in recipe.json of the selfTest field and each entry in it."""
    lines = text.splitlines()
    out: dict[tuple[str, str], int] = {}
    start = next((i for i, line in enumerate(lines) if '"selfTest"' in line), None)
    if start is None:
        return out
    out[("root", "")] = start + 1
    section = ""
    for i in range(start, len(lines)):
        line = lines[i]
        for key, kind in (('"imports"', "import"), ('"files"', "file"), ('"pythonCode"', "code")):
            if key in line:
                section = kind
                out.setdefault((kind, ""), i + 1)
        if section in ("import", "file"):
            for literal in _string_literals(line):
                out.setdefault((section, literal), i + 1)
        if line.strip().startswith("}") and i > start:
            break
    return out


def _string_literals(line: str) -> list[str]:
    found: list[str] = []
    decoder = json.JSONDecoder()
    i = 0
    while (i := line.find('"', i)) != -1:
        try:
            value, end = decoder.raw_decode(line, i)
        except ValueError:
            break
        if isinstance(value, str):
            found.append(value)
        i = end
    return found


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _failed(run: RunResult) -> str:
    """Why a process that did not exit 0 failed: a signal by its name (``-11``: SIGSEGV, a crash that
    prints nothing), else its last line of stderr (the exception), else its exit status."""
    said = _last_line(run.stderr)
    code = run.returncode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name} (the process crashed or was killed)" + (f"; its last words: {said}" if said else "")
    return said or f"exited with status {code}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _tail(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _output(run: RunResult) -> str:
    parts = []
    if run.stdout.strip():
        parts.append("stdout:\n" + _tail(run.stdout))
    if run.stderr.strip():
        parts.append("stderr:\n" + _tail(run.stderr))
    return "\n".join(parts)
