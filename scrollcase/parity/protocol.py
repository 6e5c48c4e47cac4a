"""The parity protocol: how a script is told what to run on, and how its run is judged.  Pure.

A run is ``python -I SCRIPT --accelerator ACC --output-dir DIR`` with ``SCROLLCASE_ACCELERATOR=ACC``
and ``SCROLLCASE_PARITY_OUTPUT=DIR`` in the environment (plus ``CUDA_VISIBLE_DEVICES=0`` for cuda).
The script saves ``DIR/outputs.npz`` and ``DIR/meta.json`` (``{"accelerator": what it really ran
on, ...}``).  ``meta.json`` is required for every accelerator but cpu: without it a silent CPU
fallback could not be told apart from a GPU run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollcase.format.release import ParityOutcome
from scrollcase.io.proc import RunResult
from scrollcase.targets import registry

RUN_OUTPUT = "<run>"  # the ``output`` name of an outcome about the script run itself
STDERR_TAIL_LINES = 20
MAX_META_CHARS = 64 * 1024
# Names a script may use for the device it ran on (gpu, mps) are each accelerator's aliases (targets/).


@dataclass(frozen=True)
class ParityRun:
    """One planned execution of the parity script."""

    accelerator: str
    script: Path
    output_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def args(self) -> tuple[str, ...]:
        """Arguments after ``python -I``."""
        return (str(self.script), "--accelerator", self.accelerator, "--output-dir", str(self.output_dir))


def plan_runs(
    script: Path, accelerators: Sequence[str], output_root: Path, box_dir: Path | None = None
) -> list[ParityRun]:
    """One run per accelerator, each with its own fresh output folder under ``output_root``."""
    runs = []
    for accelerator in accelerators:
        out = output_root / accelerator
        env = {"SCROLLCASE_ACCELERATOR": accelerator, "SCROLLCASE_PARITY_OUTPUT": str(out)}
        env.update(registry.accelerator(accelerator).device_env)
        if box_dir is not None:
            env["SCROLLCASE_BOX_DIR"] = str(box_dir)
        runs.append(ParityRun(accelerator, script, out, env))
    return runs


def parse_meta(text: str | None, where: str) -> tuple[dict[str, Any], str | None]:
    """meta.json content (or None when absent) -> (metadata, problem)."""
    if text is None:
        return {}, None
    if len(text) > MAX_META_CHARS:  # it is copied into the release manifest
        return {}, f"{where} is {len(text)} characters; at most {MAX_META_CHARS} are allowed"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}"
    if not isinstance(data, dict):
        return {}, f"{where} must hold a JSON object, got {type(data).__name__}"
    if "accelerator" in data and not isinstance(data["accelerator"], str):
        return data, f'{where}: "accelerator" must be a string, got {data["accelerator"]!r}'
    return data, None


def judge_run(
    run: ParityRun, result: RunResult, meta_text: str | None, has_outputs: bool, timeout: float
) -> tuple[ParityOutcome, dict[str, Any]]:
    """Did the script run, save outputs, and run where it was asked to?  -> (outcome, metadata)."""
    meta, meta_problem = parse_meta(meta_text, f"{run.output_dir.name}/meta.json")
    problem = (
        _run_problem(run, result, timeout, has_outputs)
        or meta_problem
        or _device_problem(run.accelerator, meta, meta_text is not None)
    )
    message = problem or f"ran on {_ran_on(meta) or run.accelerator} in {result.duration:.1f} s"
    return ParityOutcome(
        accelerator=run.accelerator,
        output=RUN_OUTPUT,
        kind="run",
        passed=problem is None,
        message=message,
        durationSeconds=round(result.duration, 3),
    ), meta


def _run_problem(run: ParityRun, result: RunResult, timeout: float, has_outputs: bool) -> str | None:
    if result.timed_out:
        return f"the parity script timed out after {timeout:g} s on {run.accelerator}" + _tail(result.stderr)
    if not result.ok:
        return f"the parity script crashed on {run.accelerator} (exit code {result.returncode})" + _tail(result.stderr)
    if not has_outputs:
        return (
            f"the parity script saved no outputs on {run.accelerator}: expected "
            f"{run.output_dir}/outputs.npz (or .npy files there)"
        )
    return None


def _ran_on(meta: Mapping[str, Any]) -> str | None:
    value = meta.get("accelerator")
    return registry.device_aliases().get(value.lower(), value) if isinstance(value, str) else None


def _device_problem(asked: str, meta: Mapping[str, Any], have_meta: bool) -> str | None:
    ran_on = _ran_on(meta)
    if ran_on is None:
        if asked == "cpu":
            return None
        what = 'meta.json has no "accelerator"' if have_meta else "no meta.json was saved"
        return (
            f"{what}: a {asked} run must report the device it really ran on, otherwise a silent "
            "CPU fallback cannot be detected"
        )
    if ran_on != asked:
        device = f" ({meta['device']})" if meta.get("device") else ""
        return (
            f"asked to run on {asked} but the script reports it ran on {meta['accelerator']}{device}: a silent fallback"
        )
    return None


def _tail(stderr: str) -> str:
    lines = stderr.rstrip().splitlines()[-STDERR_TAIL_LINES:]
    return ("; stderr:\n" + "\n".join(lines)) if lines else "; no stderr"
