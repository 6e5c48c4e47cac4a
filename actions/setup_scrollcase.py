"""The setup every scrollcase action shares: find scrollcase's sources, then build or reuse its venv.

Each ``action.yml`` runs this with the Python that actions/setup-python set up (never put on PATH),
from the folder that holds ``pyproject.toml`` and ``actions/`` (the repository root, or a mirror of
it in a one-repository-per-action copy):

    python actions/setup_scrollcase.py locate    # step outputs: root, workdir, venv, python, key, cache,
                                                 # results
    python actions/setup_scrollcase.py install   # the venv at $RUNNER_TEMP/scrollcase-venv, unless
                                                 # this job already has one for the same key

``key`` names the runner OS and architecture, the exact Python version and a hash of everything
pip would install: ``pyproject.toml``, every file of the ``scrollcase`` package (its data too) and
this script.  A venv built earlier in the same job for the same key is reused as is, and ``cache``
is then ``false``, so a job of several scrollcase actions installs once and saves one cache entry.
Standard library only: scrollcase is not installed yet when this runs.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

MARKER = ".scrollcase-key"  # written into the venv once scrollcase is installed in it
SKIPPED_PARTS = {"__pycache__", ".mypy_cache", ".pytest_cache"}


def source_files(root: Path) -> Iterator[Path]:
    """What decides the venv's content, in a stable order."""
    yield root / "pyproject.toml"
    package = sorted(
        p
        for p in (root / "scrollcase").rglob("*")
        if p.is_file()
        and not SKIPPED_PARTS.intersection(p.relative_to(root).parts)
        and p.suffix not in (".pyc", ".pyo")
    )
    yield from package
    yield root / "actions" / "setup_scrollcase.py"


def digest(root: Path) -> str:
    sha = hashlib.sha256()
    for path in source_files(root):
        sha.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()[:20]


def venv_python(venv: Path, runner_os: str) -> Path:
    return venv / ("Scripts/python.exe" if runner_os == "Windows" else "bin/python")


def locate(root: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The step outputs of ``locate``; ``workdir`` is the working-directory input made absolute."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or Path.cwd())
    workdir = (workspace / env.get("INPUT_WORKING_DIRECTORY", ".")).resolve()
    temp = Path(env.get("RUNNER_TEMP") or root / ".scrollcase" / "runner-temp")
    runner_os = env.get("RUNNER_OS") or platform.system()
    venv = temp / "scrollcase-venv"
    python = venv_python(venv, runner_os)
    version = ".".join(map(str, sys.version_info[:3]))
    key = f"scrollcase-venv-{runner_os}-{env.get('RUNNER_ARCH', platform.machine())}-{version}-{digest(root)}"
    built = _marker(venv) == key and python.exists()
    return {
        "root": str(root),
        "workdir": str(workdir),
        "venv": str(venv),
        "python": str(python),
        "key": key,
        "cache": "true" if env.get("INPUT_CACHE", "true") == "true" and not built else "false",
        "results": str(temp / "scrollcase-results"),
    }


def _marker(venv: Path) -> str | None:
    try:
        return (venv / MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def install(root: Path, env: Mapping[str, str]) -> str:
    """Build the venv unless it already holds this key and runs scrollcase; says which it did."""
    found = locate(root, env)
    venv, python, key = Path(found["venv"]), Path(found["python"]), found["key"]
    if _marker(venv) == key and _runs(python):
        return f"scrollcase: reusing {venv} ({key})"
    base = env.get("SCROLLCASE_BASE_PYTHON") or sys.executable  # setup-python's interpreter
    # --no-compile: Python writes bytecode for the modules scrollcase imports, as it imports them.
    pip_args = ["install", "--disable-pip-version-check", "--quiet", "--no-compile", str(root)]
    if _pip_version(base) >= (22, 3):
        # The base's pip installs into a venv without one of its own: no ensurepip (seconds per job).
        subprocess.run([base, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
        subprocess.run([base, "-m", "pip", "--python", str(python), *pip_args], check=True)
    else:
        subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", *pip_args], check=True)
    (venv / MARKER).write_text(key + "\n", encoding="utf-8")
    return f"scrollcase: installed {root} into {venv} ({key})"


def _pip_version(python: str) -> tuple[int, ...]:
    """The version of ``python``'s pip, (0,) when it has none (``--python`` needs pip 22.3)."""
    try:
        done = subprocess.run(
            [python, "-m", "pip", "--version"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return (0,)
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 2:
        return (0,)
    try:
        return tuple(int(part) for part in words[1].split(".")[:2])
    except ValueError:
        return (0,)


def _runs(python: Path) -> bool:
    try:
        done = subprocess.run([str(python), "-c", "import scrollcase"], capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("locate", "install"):
        print("usage: setup_scrollcase.py locate|install", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[1]
    if argv[0] == "install":
        print(install(root, os.environ))
        return 0
    outputs = locate(root, os.environ)
    if not Path(outputs["workdir"]).is_dir():
        print(
            f"::error title=working-directory::{outputs['workdir']} is not a folder (working-directory: "
            f"{os.environ.get('INPUT_WORKING_DIRECTORY')!r}, relative to the repository root)"
        )
        return 1
    Path(outputs["results"]).mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{name}={value}\n" for name, value in outputs.items())
    output_file = os.environ.get("GITHUB_OUTPUT")
    if output_file:
        with Path(output_file).open("a", encoding="utf-8") as handle:
            handle.write(lines)
    else:
        print(lines, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
