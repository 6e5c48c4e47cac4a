"""The one subprocess module: every child process scrollcase starts (git, pixi, patchelf, the demo's
channel indexer, a box's own interpreter) goes through :func:`run`, which never raises.

A box's interpreter runs isolated from the host Python (:func:`run_python`).  Isolation: ``-I``
(ignore PYTHON* variables, no user site, no script dir on sys.path) *and* an environment with every
PYTHON* variable removed, so neither the host's site-packages nor its PYTHONPATH can make a missing
import look present.  And ``-B``: a box may be installed read-only, so running it never writes
bytecode into it (the build ships ``.pyc`` for its modules; ``-I`` makes Python ignore
``PYTHONDONTWRITEBYTECODE``, so only the flag says it).  docs/archive.md#running-a-box is the contract
a host app follows.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Variables a box run keeps from the host: what the OS and the GPU driver need, nothing Python.
KEEP_ENV = (
    "PATH",
    "HOME",
    "USERPROFILE",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_HOME",
)


# How every box interpreter is started: isolated, and writing no bytecode (read-only installs).
BOX_PYTHON_FLAGS = ("-I", "-B")


@dataclass(frozen=True)
class RunResult:
    args: tuple[str, ...]
    returncode: int | None  # None when it timed out
    stdout: str
    stderr: str
    duration: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def isolated_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a box interpreter runs in: host basics, no PYTHON*, plus ``extra``."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if k in KEEP_ENV}
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    if extra:
        env.update(extra)
    return env


def run_python(
    python: Path,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    cwd: Path | None = None,
) -> RunResult:
    """Run ``python -I -B ARGS`` with a clean environment; never raises on failure or timeout."""
    return run([str(python), *BOX_PYTHON_FLAGS, *args], env=isolated_env(env), timeout=timeout, cwd=cwd)


def usable_cores() -> int:
    """How many processes (or GIL-free threads) this process may keep busy at once."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 300.0,
    cwd: Path | None = None,
) -> RunResult:
    """Run ``argv`` (``env``: the whole environment, None to inherit this one; ``timeout``: None waits
    for ever) with stdout and stderr captured as UTF-8 text; never raises on failure or timeout."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            list(argv),
            env=None if env is None else dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return RunResult(tuple(argv), None, _text(exc.stdout), _text(exc.stderr), time.monotonic() - start)
    except OSError as exc:
        return RunResult(tuple(argv), 127, "", f"cannot execute {argv[0]}: {exc.strerror}", time.monotonic() - start)
    return RunResult(tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")
