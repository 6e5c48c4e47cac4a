"""Static rules of a recipe's pixi.toml against its recipe.json (SPEC §3, docs/recipes.md).

:func:`manifest_problems` is pure: a parsed :class:`PixiManifest` and :class:`Recipe` in, located
problems out.  :func:`recipe_manifest_problems` reads the file first; ``validate``, ``lock-check`` and
``doctor`` all call it, so each rule lives here once, with one message, whichever command reports it.
None of these rules depends on the machine: a CPU runner checks a CUDA recipe's pixi.toml as well as
a GPU one does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from rattler import Version, VersionSpec

from scrollcase.errors import ManifestError, Problem, collect, describe_path
from scrollcase.lock.manifest import Dependency, PixiManifest, PypiDependency, load_manifest
from scrollcase.lock.rattler_errors import rattler_exceptions
from scrollcase.recipe.model import Recipe
from scrollcase.targets.base import ManifestDependency

TORCH_PACKAGES = ("pytorch", "pytorch-gpu", "pytorch-cpu")


def _line(manifest: PixiManifest, key: str, table: str | None) -> int | None:
    """The line of ``key`` in ``[table]``; for a missing key, where it belongs: its table's header, else
    (no such table) the ``platforms`` line for a missing CUDA requirement (it may go there too) and the
    ``[workspace]`` header for anything else, so that every finding lands on a line of pixi.toml."""
    name = key.rsplit(".", 1)[-1] if key else ""
    places: list[tuple[str, str | None]] = [(name, table)] if name else []
    places += [("", table)] if table is not None else []
    places += [("platforms", "workspace")] if key == "system-requirements.cuda" else []
    for name_, table_ in [*places, ("", "workspace")]:
        line = manifest.line_of(name_, table_)
        if line is not None:
            return line
    return None


def _problem(manifest: PixiManifest, key: str, table: str | None, message: str, value: Any, fix: str) -> Problem:
    line = _line(manifest, key, table)
    return Problem(
        message=message,
        file=manifest.file,
        line=line,
        key=key,
        value=None if value is None else str(value),
        fix=fix,
    )


def pypi_torch(manifest: PixiManifest, subdir: str) -> PypiDependency | None:
    """The ``[pypi-dependencies]`` torch when torch comes from PyPI: declared there and no conda torch
    package is (a conda ``pytorch`` wins over a PyPI ``torch`` in one environment)."""
    if any(name in manifest.dependencies_for(subdir) for name in TORCH_PACKAGES):
        return None
    return manifest.pypi_dependencies_for(subdir).get("torch")


def platform_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """``platforms`` is exactly the target's conda subdir, plain or as ``{ platform = ..., cuda = ... }``."""
    subdir = recipe.target.spec.subdir
    shown = [p.subdir if p.cuda is None else f"{{platform={p.subdir}, cuda={p.cuda}}}" for p in manifest.platforms]
    if [p.subdir for p in manifest.platforms] != [subdir]:
        return [
            _problem(
                manifest,
                "workspace.platforms",
                "workspace",
                f"platforms must be exactly the target's conda subdir [{subdir!r}]",
                shown,
                f'set platforms = ["{subdir}"] (one recipe per target; other targets get their own recipe)',
            )
        ]
    return []


def _dep_problem(manifest: PixiManifest, dep: Dependency, message: str, fix: str) -> Problem:
    value = dep.match_spec()
    return _problem(manifest, f"{dep.table}.{dep.name}", dep.table, message, value, fix)


_PYTHON_OTHER = ("2.7.18", "3.0.0", "4.0.0")


@functools.lru_cache(maxsize=256)  # validate meets the same few specs in every recipe of a repository
def python_spec_matches(spec: str, major_minor: str) -> bool:
    """True when the conda version spec allows ``major_minor``.x and nothing outside that series."""
    major, minor = (int(p) for p in major_minor.split("."))
    try:
        parsed = VersionSpec(spec)
    except rattler_exceptions():  # InvalidVersionSpecError and kin: any failure means "no match"
        return False
    inside = [f"{major}.{minor}.{patch}" for patch in range(0, 30)] + [f"{major}.{minor}"]
    outside = [f"{major}.{minor - 1}.{p}" for p in (0, 30)] + [f"{major}.{minor + 1}.0", *_PYTHON_OTHER]
    return any(parsed.matches(Version(v)) for v in inside) and not any(parsed.matches(Version(v)) for v in outside)


def python_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """python is a conda dependency whose spec matches the recipe's pythonVersion series."""
    want = recipe.pythonVersion
    python = manifest.dependencies_for(recipe.target.spec.subdir).get("python")
    if python is None:
        return [
            _problem(
                manifest,
                "dependencies.python",
                "dependencies",
                "python is not a dependency",
                None,
                f'add python = "{want}.*" to [dependencies]',
            )
        ]
    if not python_spec_matches(python.version or "*", want):
        return [_dep_problem(manifest, python, f"python must match pythonVersion {want!r}", f'python = "{want}.*"')]
    return []


class _Manifest:
    """A parsed pixi.toml as the accelerators' rules read it (targets/base.py's ``ManifestView``)."""

    def __init__(self, manifest: PixiManifest, subdir: str) -> None:
        self._manifest = manifest
        self.system_requirements = manifest.system_requirements
        entries = manifest.platforms
        # A platforms entry other than exactly the target's is platform_problems' finding alone.
        only = [p.subdir for p in entries] == [subdir]
        self.platform_requirement = entries[0].cuda if only else None

    def requirement(self, subdir: str) -> tuple[str | None, str]:
        return self._manifest.cuda_requirement(subdir)

    def dependencies_for(self, subdir: str) -> dict[str, Dependency]:
        return self._manifest.dependencies_for(subdir)

    def pypi_dependencies_for(self, subdir: str) -> dict[str, PypiDependency]:
        return self._manifest.pypi_dependencies_for(subdir)

    def pypi_torch(self, subdir: str) -> PypiDependency | None:
        return pypi_torch(self._manifest, subdir)

    def problem(self, key: str, table: str | None, message: str, value: Any, fix: str) -> Problem:
        return _problem(self._manifest, key, table, message, value, fix)

    def dep_problem(self, dep: ManifestDependency, message: str, fix: str) -> Problem:
        return _problem(self._manifest, f"{dep.table}.{dep.name}", dep.table, message, dep.match_spec(), fix)


def accelerator_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """The target accelerator's own pixi.toml rules (targets/<accelerator>.py): for CUDA the system
    requirement, the cuda-version pin, a ``cuda*`` pytorch and PyTorch's index for its CUDA; for the
    others none of these."""
    spec = recipe.target.spec
    return spec.kind.manifest_problems(_Manifest(manifest, spec.subdir), spec)


def manifest_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """Every static rule of pixi.toml for ``recipe``'s target; empty when the manifest follows the guide."""
    out: list[Problem] = []
    for rule in (platform_problems, accelerator_problems, python_problems):
        out.extend(rule(manifest, recipe))
    return out


def recipe_manifest_problems(path: Path, recipe: Recipe, shown: str | None = None) -> list[Problem]:
    """Read the pixi.toml at ``path`` and apply every rule for ``recipe``'s target.  A file that cannot
    be read or parsed gives its own located problems instead (one recipe's broken file must not stop
    ``validate`` or ``lock-check`` from reporting the others).  Sorted by line, as the file reads.
    ``shown`` is the name problems give the file (default: :func:`describe_path` of ``path``)."""
    shown = shown or describe_path(path)
    try:
        manifest = load_manifest(path, shown)
    except ManifestError as error:
        unread = Problem(message=error.message, file=shown, fix=error.fix)
        return list(collect(error.problems)) or [unread]
    return list(collect(manifest_problems(manifest, recipe)))
