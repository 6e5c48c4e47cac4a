"""Resolving ``[pypi-dependencies]`` with uv for one target, after the conda solve — as pixi does.

:func:`plan_resolution` is pure: it turns the manifest, the target and the conda records the solver
chose into exactly what uv is told — the target's wheel platform and the exact Python of the conda
solve, the conda-installed Python packages held at their conda versions (and never emitted, so they are
never reinstalled from PyPI), and the accelerator's constraints (targets/<accelerator>.py) that let the
resolver pick only wheels built for the recipe's accelerator runtime.  :func:`resolve` is the thin
executor that runs ``uv pip compile`` and reads its ``pylock.toml``.  A failure is explained in the
recipe's terms: which requirement, which target, which accelerator constraint.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.errors import ManifestError, Problem, SolveError
from scrollcase.io import proc
from scrollcase.lock.manifest import PixiManifest, PypiDependency, _load_toml
from scrollcase.lock.read import normalize_name as normalize
from scrollcase.targets import registry
from scrollcase.targets.vocabulary import DEFAULT_GLIBC, DEFAULT_MACOS, TargetSpec

_OPERATORS = ("==", "!=", "<", ">", "~=", "===")


@dataclass(frozen=True)
class PypiRequirement:
    """One PyPI requirement as pixi.toml states it, and where."""

    name: str
    requirement: str  # PEP 508, e.g. ``torch>=2.5,<2.7`` or ``transformers[torch]``
    index: str | None
    table: str  # ``pypi-dependencies`` or ``target.linux-64.pypi-dependencies``
    line: int | None = None

    @property
    def key(self) -> str:
        return f"{self.table}.{self.name}"


def _specifier(dep: PypiDependency, file: str, line: int | None) -> str:
    text = (dep.version or "").strip()
    if text in ("", "*"):
        return ""
    if not text.startswith(_OPERATORS):
        raise ManifestError(
            f"{file}: {dep.key} = {text!r} has no version operator",
            problems=[
                Problem(
                    message="pixi (and PEP 440) need an operator before the version",
                    file=file,
                    line=line,
                    key=dep.key,
                    value=text,
                    fix=f'write "=={text}" (or ">={text}")',
                )
            ],
        )
    return text


def _refuse_source(dep: PypiDependency, file: str, line: int | None) -> ManifestError:
    return ManifestError(
        f"{file}: {dep.key} is a {dep.source} requirement; boxes install hash-pinned wheels only",
        problems=[
            Problem(
                message=f"{dep.source} requirements have no wheel with a sha256 to pin",
                file=file,
                line=line,
                key=dep.key,
                value=dep.source,
                fix=f"build a wheel of {dep.name}, publish it to an index you control and depend on "
                f'it by version ({dep.name} = {{ version = "==X.Y", index = "URL" }}), '
                "or use the conda-forge package",
            )
        ],
    )


def _extras(manifest: PixiManifest, dep: PypiDependency) -> str:
    table: object = manifest.pypi_dependencies
    if dep.table != "pypi-dependencies":
        selector = dep.table.split(".")[1]
        table = (manifest.targets.get(selector) or {}).get("pypi-dependencies")
    value = table.get(dep.name) if isinstance(table, Mapping) else None
    extras = value.get("extras") if isinstance(value, Mapping) else None
    return f"[{','.join(str(e) for e in extras)}]" if extras else ""


def pypi_requirements(manifest: PixiManifest, subdir: str) -> list[PypiRequirement]:
    """The PyPI requirements for ``subdir`` (target tables applied); ManifestError for what a box cannot hold."""
    out = []
    for dep in manifest.pypi_dependencies_for(subdir).values():
        line = manifest.line_of(dep.name, dep.table)
        if dep.source is not None:
            raise _refuse_source(dep, manifest.file, line)
        requirement = dep.name + _extras(manifest, dep) + _specifier(dep, manifest.file, line)
        out.append(
            PypiRequirement(dep.name, requirement, dep.index.rstrip("/") if dep.index else None, dep.table, line)
        )
    return out


DEFAULT_INDEX = "https://pypi.org/simple"
PROJECT_NAME = "scrollcase-lock"  # the throwaway project uv resolves; its name never reaches a message
UV_TIMEOUT = 900.0
# conda names whose PyPI name differs (the rest are the same name, PEP 503 normalised).
CONDA_TO_PYPI = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch", "py-opencv": "opencv-python"}
_NOT_PYPI = frozenset({"python", "python_abi", "pip", "setuptools", "wheel"})


def pypi_name(conda_name: str) -> str:
    """The PyPI project a conda package is (conda ``pytorch`` is PyPI ``torch``), normalised."""
    return normalize(CONDA_TO_PYPI.get(conda_name, conda_name))


@dataclass(frozen=True)
class PypiPlan:
    """Everything uv is told, so a failure can be explained in the recipe's terms."""

    recipe_id: str
    target_id: str
    subdir: str
    python_platform: str  # uv's --python-platform
    python_version: str  # the exact Python the conda solve chose
    requirements: tuple[PypiRequirement, ...]
    constraints: tuple[str, ...]  # held conda packages and the accelerator's runtime constraints
    held: tuple[str, ...]  # PyPI names conda installs: never emitted
    index_url: str
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    exclude_newer: str | None = None
    environment: tuple[tuple[str, str], ...] = ()  # e.g. MACOSX_DEPLOYMENT_TARGET
    manifest_file: str = "pixi.toml"
    cuda: str | None = None
    accelerator: str = "cpu"

    @property
    def indexes(self) -> tuple[str, ...]:
        """The environment's indexes as pixi records them (default first, then extras)."""
        return (self.index_url, *self.extra_index_urls)


@dataclass(frozen=True)
class ResolvedWheel:
    name: str
    version: str
    url: str
    sha256: str
    size: int | None
    index: str | None  # a per-package index from pixi.toml; None: the environment's indexes


def python_platform(subdir: str, glibc: str = DEFAULT_GLIBC) -> tuple[str, dict[str, str]]:
    """uv's ``--python-platform`` for a conda subdir, and the variables it needs (macOS deployment target)."""
    manylinux = "manylinux_" + glibc.replace(".", "_")
    table = {
        "linux-64": (f"x86_64-{manylinux}", {}),
        "linux-aarch64": (f"aarch64-{manylinux}", {}),
        "win-64": ("x86_64-pc-windows-msvc", {}),
        "osx-arm64": ("aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": DEFAULT_MACOS["arm64"]}),
        "osx-64": ("x86_64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": DEFAULT_MACOS["x86_64"]}),
    }
    if subdir not in table:
        raise SolveError(
            f"no PyPI wheel platform is known for {subdir}", fix="use one of the targets in docs/recipes.md"
        )
    return table[subdir]


def accelerator_constraints(target: TargetSpec) -> tuple[str, ...]:
    """The accelerator's runtime constraints: CUDA targets lock exactly their CUDA's runtime wheel,
    the others none at all (targets/<accelerator>.py says which)."""
    return target.kind.pypi_constraints(target.cuda_version)


def _record_name(record: Any) -> str:
    name = record.name
    return str(getattr(name, "normalized", name))


def held_packages(records: Sequence[Any]) -> dict[str, str]:
    """PyPI name -> version of every Python package the conda solve installs (they depend on python)."""
    held: dict[str, str] = {}
    for record in records:
        name = _record_name(record)
        depends = {str(d).split()[0] for d in (record.depends or [])}
        if name in _NOT_PYPI or not depends & {"python", "python_abi"}:
            continue
        held[pypi_name(name)] = str(record.version)
    return held


def conda_python(records: Sequence[Any]) -> str:
    for record in records:
        if _record_name(record) == "python":
            return str(record.version)
    raise SolveError(
        "the conda solve holds no python, which [pypi-dependencies] need",
        fix='add python = "3.11.*" (the recipe\'s pythonVersion) to [dependencies]',
    )


def manifest_options(manifest: PixiManifest) -> tuple[dict[str, Any], str | None]:
    """``[pypi-options]`` and ``[workspace] exclude-newer`` of ``manifest``."""
    data = _load_toml(manifest.text)
    workspace = data.get("workspace") or data.get("project") or {}
    options = data.get("pypi-options") or {}
    newer = workspace.get("exclude-newer") if isinstance(workspace, Mapping) else None
    return (dict(options) if isinstance(options, Mapping) else {}), (str(newer) if newer else None)


def _find_links(options: Mapping[str, Any], manifest_dir: Path) -> tuple[str, ...]:
    out = []
    for entry in options.get("find-links") or []:
        if isinstance(entry, Mapping) and entry.get("path"):
            out.append((manifest_dir / str(entry["path"])).resolve().as_uri())
        elif isinstance(entry, Mapping) and entry.get("url"):
            out.append(str(entry["url"]))
    return tuple(out)


def plan_resolution(
    manifest: PixiManifest, target: TargetSpec, records: Sequence[Any], recipe_id: str, exclude_newer: str | None = None
) -> PypiPlan:
    """What to ask uv for ``target`` given the conda solve's ``records``."""
    requirements = tuple(pypi_requirements(manifest, target.subdir))
    held = held_packages(records)
    platform, env = python_platform(target.subdir)
    options, manifest_newer = manifest_options(manifest)
    constraints = tuple(f"{name}=={version}" for name, version in sorted(held.items()))
    return PypiPlan(
        recipe_id=recipe_id,
        target_id=target.target_id,
        subdir=target.subdir,
        python_platform=platform,
        python_version=conda_python(records),
        requirements=requirements,
        constraints=constraints + accelerator_constraints(target),
        held=tuple(sorted(held)),
        index_url=str(options.get("index-url") or DEFAULT_INDEX).rstrip("/"),
        extra_index_urls=tuple(str(u).rstrip("/") for u in options.get("extra-index-urls") or []),
        find_links=_find_links(options, Path(manifest.file).parent),
        exclude_newer=exclude_newer or manifest_newer,
        environment=tuple(sorted(env.items())),
        manifest_file=manifest.file,
        cuda=target.cuda_version,
        accelerator=target.accelerator,
    )


# ------------------------------------------------------------------------------------------ uv input


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def _index_names(plan: PypiPlan) -> dict[str, str]:
    urls = sorted({r.index for r in plan.requirements if r.index})
    return {url: f"pixi-index-{number}" for number, url in enumerate(urls, start=1)}


def project_toml(plan: PypiPlan) -> str:
    """A throwaway pyproject.toml carrying the requirements and their per-package indexes."""
    deps = ", ".join(_toml_string(r.requirement) for r in plan.requirements)
    major_minor = ".".join(plan.python_version.split(".")[:2])
    lines = [
        "[project]",
        f"name = {_toml_string(PROJECT_NAME)}",
        'version = "0"',
        f'requires-python = "=={major_minor}.*"',
        f"dependencies = [{deps}]",
        "",
    ]
    names = _index_names(plan)
    if names:
        lines.append("[tool.uv.sources]")
        lines += [
            f"{_toml_string(r.name)} = {{ index = {_toml_string(names[r.index])} }}"
            for r in plan.requirements
            if r.index
        ]
        for url, name in names.items():
            lines += [
                "",
                "[[tool.uv.index]]",
                f"name = {_toml_string(name)}",
                f"url = {_toml_string(url)}",
                "explicit = true",
            ]
    return "\n".join(lines) + "\n"


def uv_arguments(plan: PypiPlan, work: Path) -> list[str]:
    args = [
        "pip",
        "compile",
        str(work / "pyproject.toml"),
        "--format",
        "pylock.toml",
        "-o",
        str(work / "pylock.toml"),
        "--python-platform",
        plan.python_platform,
        "--python-version",
        plan.python_version,
        "--no-build",
        "--no-config",
        "--quiet",
        "--constraint",
        str(work / "constraints.txt"),
        "--index-url",
        plan.index_url,
    ]
    for url in plan.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in plan.find_links:
        args += ["--find-links", link]
    for name in plan.held:
        args += ["--no-emit-package", name]
    if plan.exclude_newer:
        args += ["--exclude-newer", plan.exclude_newer]
    return args


# ------------------------------------------------------------------------------------------ executor


def uv_binary() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def _uv_env(plan: PypiPlan) -> dict[str, str]:
    """The host's environment without uv/pip settings that would change the answer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(dict(plan.environment))
    return env


def resolve(plan: PypiPlan) -> list[ResolvedWheel]:
    """Run ``uv pip compile`` for ``plan``; the wheels it chose, or SolveError explaining why not."""
    if not plan.requirements:
        return []
    with tempfile.TemporaryDirectory(prefix="scrollcase-uv-") as scratch:
        work = Path(scratch)
        (work / "pyproject.toml").write_text(project_toml(plan), encoding="utf-8")
        (work / "constraints.txt").write_text("\n".join(plan.constraints) + "\n", encoding="utf-8")
        result = proc.run([uv_binary(), *uv_arguments(plan, work)], env=_uv_env(plan), timeout=UV_TIMEOUT, cwd=work)
        if not result.ok:
            raise resolution_error(plan, result.stderr or result.stdout, result.timed_out)
        text = (work / "pylock.toml").read_text(encoding="utf-8")
    return parse_pylock(text, plan)


def parse_pylock(text: str, plan: PypiPlan) -> list[ResolvedWheel]:
    """The wheels of uv's ``pylock.toml`` (PEP 751), with the per-package index each came from."""
    data = tomllib.loads(text)
    indexes = {normalize(r.name): r.index for r in plan.requirements if r.index}
    out = []
    for package in data.get("packages", []):
        wheels = package.get("wheels") or []
        name = str(package["name"])
        if not wheels:
            raise SolveError(
                f"uv locked {name} {package.get('version')} without a wheel for {plan.target_id}",
                problems=[
                    Problem(
                        message="only a source distribution is available",
                        file=plan.manifest_file,
                        key=f"pypi-dependencies.{name}",
                        fix=f"boxes install wheels only: pin a version that has a wheel for {plan.python_platform}",
                    )
                ],
            )
        wheel = wheels[0]
        out.append(
            ResolvedWheel(
                name=normalize(name),
                version=str(package["version"]),
                url=str(wheel["url"]),
                sha256=str(wheel["hashes"]["sha256"]),
                size=wheel.get("size"),
                index=indexes.get(normalize(name)),
            )
        )
    return sorted(out, key=lambda w: w.name)


_MENTION = re.compile(r"\b([A-Za-z0-9][A-Za-z0-9._-]*)(?=[=<>!~ ]|$)")


def resolution_error(plan: PypiPlan, output: str, timed_out: bool = False) -> SolveError:
    """uv's explanation, pinned to the pixi.toml requirements it names, with the accelerator's constraint
    spelled out."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    silent = "uv timed out" if timed_out else "uv failed without a message"
    explanation = "\n".join(lines[:40]).replace(PROJECT_NAME, "pixi.toml") or silent
    mentioned = {normalize(m) for m in _MENTION.findall(explanation)}
    named = [r for r in plan.requirements if normalize(r.name) in mentioned] or list(plan.requirements)
    allowed, where = registry.accelerator(plan.accelerator).resolve_hint(plan.target_id, plan.cuda)
    fix = f"{allowed}; pin releases that exist as wheels for {plan.python_platform} and Python {plan.python_version}"
    fix += where
    problems = [
        Problem(message=explanation, file=plan.manifest_file, line=r.line, key=r.key, value=r.requirement, fix=fix)
        for r in named[:3]
    ]
    return SolveError(
        f"cannot resolve the PyPI dependencies of {plan.recipe_id} for {plan.target_id}",
        problems=problems,
        fix=f"uv was asked for {plan.python_platform}, Python {plan.python_version}, indexes {', '.join(plan.indexes)}",
    )
