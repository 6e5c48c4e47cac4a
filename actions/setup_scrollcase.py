"""The setup every scrollcase action shares: find scrollcase's sources, then build or reuse its venv.

Each ``action.yml`` runs this with the Python that actions/setup-python set up (never put on PATH),
from the folder that holds ``pyproject.toml`` and ``actions/`` (the repository root, or a mirror of
it in a one-repository-per-action copy):

    python actions/setup_scrollcase.py locate    # step outputs: root, workdir, venv, python, key, cache,
                                                 # results
    python actions/setup_scrollcase.py install   # the venv at $RUNNER_TEMP/scrollcase-venv, unless
                                                 # this job already has one for the same key

``install`` uses uv (a dependency of scrollcase anyway): the ``uv`` on PATH if there is one, else uv
installed first into the new venv by setup-python's pip (one wheel, no dependencies), which then
installs scrollcase and its dependencies in a few seconds instead of pip's 20-30.  uv does not read
pip's settings, so ``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS`` and ``PIP_NO_INDEX``
(a mirror, an offline wheelhouse) are passed on as uv's options unless a ``UV_`` variable says otherwise.
Without a pip that can install uv (older than 22.3, or no uv wheel for the runner), pip installs
everything as before.

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
import re
import shutil
import subprocess
import sys
import tomllib
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
    subprocess.run([base, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    uv = _uv(base, python, uv_requirement(root), env)
    if uv is not None:
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", str(python), *uv_index_args(env), str(root)],
            check=True,
            env={**env, "UV_NO_PROGRESS": "1"},
        )
        how = "uv"
    else:
        _pip_install(base, venv, python, [str(root)])
        how = "pip"
    (venv / MARKER).write_text(key + "\n", encoding="utf-8")
    return f"scrollcase: installed {root} into {venv} with {how} ({key})"


def uv_requirement(root: Path) -> str:
    """scrollcase's own requirement on uv (pyproject.toml), so the uv that installs it is one it accepts."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    found = [r for r in project.get("dependencies", []) if re.match(r"uv\s*($|[<>=!~;\[])", r)]
    return found[0].split(";")[0].strip() if found else "uv"


def uv_index_args(env: Mapping[str, str]) -> list[str]:
    """pip's index settings as uv options (uv reads only its own ``UV_`` variables)."""
    args: list[str] = []
    if env.get("PIP_INDEX_URL") and not (env.get("UV_INDEX_URL") or env.get("UV_DEFAULT_INDEX")):
        args += ["--index-url", env["PIP_INDEX_URL"]]
    if not env.get("UV_EXTRA_INDEX_URL") and not env.get("UV_INDEX"):
        for url in env.get("PIP_EXTRA_INDEX_URL", "").split():
            args += ["--extra-index-url", url]
    if not env.get("UV_FIND_LINKS"):
        for location in env.get("PIP_FIND_LINKS", "").split():
            args += ["--find-links", location]
    if env.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
        args.append("--no-index")
    return args


def _uv(base: str, python: Path, requirement: str, env: Mapping[str, str]) -> str | None:
    """A uv to install with: the one on PATH, else one pip puts into the new venv; None when neither works."""
    on_path = shutil.which("uv", path=env.get("PATH"))
    if on_path:
        return on_path
    if _pip_version(base) < (22, 3):  # --python: the base's pip installs into a venv without its own
        return None
    pip = [base, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check", "--quiet"]
    done = subprocess.run([*pip, "--no-deps", "--no-compile", requirement], check=False)
    uv = python.parent / ("uv.exe" if python.suffix == ".exe" else "uv")
    return str(uv) if done.returncode == 0 and uv.exists() else None


def _pip_install(base: str, venv: Path, python: Path, requirements: list[str]) -> None:
    """pip alone: setup-python's pip into the venv (no ensurepip: seconds per job), or the venv's own."""
    pip_args = ["install", "--disable-pip-version-check", "--quiet", "--no-compile", *requirements]
    if _pip_version(base) >= (22, 3):
        subprocess.run([base, "-m", "pip", "--python", str(python), *pip_args], check=True)
    else:
        subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", *pip_args], check=True)


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
