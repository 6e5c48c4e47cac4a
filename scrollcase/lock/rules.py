"""Static rules of a recipe's pixi.toml against its recipe.json (SPEC §3, docs/recipes.md).

:func:`manifest_problems` is pure: a parsed :class:`PixiManifest` and :class:`Recipe` in, located
problems out.  :func:`recipe_manifest_problems` reads the file first; ``validate``, ``lock-check`` and
``doctor`` all call it, so each rule lives here once, with one message, whichever command reports it.
None of these rules depends on the machine: a CPU runner checks a CUDA recipe's pixi.toml as well as
a GPU one does.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from rattler import Version, VersionSpec

from scrollcase.errors import ManifestError, Problem, collect, describe_path
from scrollcase.lock.manifest import Dependency, PixiManifest, PypiDependency, load_manifest
from scrollcase.lock.rattler_errors import rattler_exceptions
from scrollcase.recipe.model import Recipe
from scrollcase.targets.classify import cuda_tag, pytorch_index

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


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


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
    entry = manifest.platforms[0]
    if entry.cuda is not None and not recipe.target.spec.is_cuda:
        return [
            _problem(
                manifest,
                "workspace.platforms",
                "workspace",
                f"a {recipe.target.accelerator} target must not declare a CUDA system requirement",
                shown,
                f'use platforms = ["{subdir}"] without cuda',
            )
        ]
    return []


def cuda_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """CUDA declared as a system requirement AND as a cuda-version pin, both equal to cudaVersion (a
    PyPI torch needs no pin); other targets declare neither."""
    spec = recipe.target.spec
    declared, where = manifest.cuda_requirement(spec.subdir)
    legacy = manifest.system_requirements.get("cuda")
    pin = manifest.dependencies_for(spec.subdir).get("cuda-version")
    if not spec.is_cuda:
        return _no_cuda_problems(manifest, spec.accelerator, legacy, pin)
    cuda = spec.cuda_version or ""
    out = []
    if declared is None:
        out.append(
            _problem(
                manifest,
                "system-requirements.cuda",
                "system-requirements",
                "the CUDA version is not declared as a system requirement",
                None,
                f'add [system-requirements] cuda = "{cuda}" (or platforms = '
                f'[{{ platform = "{spec.subdir}", cuda = "{cuda}" }}])',
            )
        )
    elif _major_minor(declared) != cuda or declared.count(".") > 1:
        table = "system-requirements" if where.startswith("system") else "workspace"
        key = "system-requirements.cuda" if table == "system-requirements" else "workspace.platforms"
        out.append(
            _problem(
                manifest,
                key,
                table,
                f"the CUDA system requirement must be {cuda!r} (target.cudaVersion)",
                declared,
                f'declare cuda = "{cuda}"',
            )
        )
    if legacy is not None and declared is not None and str(legacy) != declared:
        out.append(
            _problem(
                manifest,
                "system-requirements.cuda",
                "system-requirements",
                "[system-requirements] cuda disagrees with the platforms entry",
                legacy,
                f'declare cuda = "{cuda}" once',
            )
        )
    return out + _cuda_pin_problems(manifest, pin, cuda, pypi_torch(manifest, spec.subdir) is not None)


def _no_cuda_problems(manifest: PixiManifest, accelerator: str, legacy: Any, pin: Dependency | None) -> list[Problem]:
    out = []
    if legacy is not None:
        out.append(
            _problem(
                manifest,
                "system-requirements.cuda",
                "system-requirements",
                f"a {accelerator} target must not require CUDA",
                legacy,
                "remove cuda from [system-requirements]",
            )
        )
    if pin is not None:
        out.append(
            _dep_problem(
                manifest, pin, f"a {accelerator} target must not pin cuda-version", "remove the cuda-version dependency"
            )
        )
    return out


def _cuda_pin_problems(manifest: PixiManifest, pin: Dependency | None, cuda: str, pypi: bool) -> list[Problem]:
    """cuda-version pins the target's CUDA; a PyPI torch needs no pin (its runtime wheel is the CUDA)."""
    if pin is None:
        if pypi:
            return []
        return [
            _problem(
                manifest,
                "dependencies.cuda-version",
                "dependencies",
                "cuda-version is not pinned, so the solver may pick another CUDA ABI",
                None,
                f'add cuda-version = "{cuda}.*" to [dependencies]',
            )
        ]
    if not re.fullmatch(rf"(==|=)?{re.escape(cuda)}(\.\*)?", (pin.version or "").replace(" ", "")):
        return [_dep_problem(manifest, pin, f"cuda-version must pin CUDA {cuda}", f'cuda-version = "{cuda}.*"')]
    return []


def _dep_problem(manifest: PixiManifest, dep: Dependency, message: str, fix: str) -> Problem:
    value = dep.match_spec()
    return _problem(manifest, f"{dep.table}.{dep.name}", dep.table, message, value, fix)


def torch_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """pytorch pinned to a ``cuda*`` build for CUDA targets, and not to one for any other target."""
    spec = recipe.target.spec
    deps = manifest.dependencies_for(spec.subdir)
    torch = deps.get("pytorch")
    if spec.is_cuda:
        if "pytorch-gpu" in deps or torch is None:
            return []  # pytorch-gpu only has CUDA builds; a box without conda torch has nothing to pin
        if not (torch.build or "").startswith("cuda"):
            fix = f'pytorch = {{ version = "{torch.version or "2.*"}", build = "cuda*" }}'
            return [
                _dep_problem(
                    manifest,
                    torch,
                    'pytorch must be pinned to a CUDA build (build = "cuda*"), or the solver may pick a CPU build',
                    fix,
                )
            ]
        return []
    out = []
    if torch is not None and "cuda" in (torch.build or ""):
        out.append(
            _dep_problem(
                manifest,
                torch,
                f"a {spec.accelerator} target must not use a CUDA build of pytorch",
                f'pytorch = {{ version = "{torch.version or "2.*"}", build = "cpu*" }} (or no build pin)',
            )
        )
    if "pytorch-gpu" in deps:
        out.append(
            _dep_problem(
                manifest,
                deps["pytorch-gpu"],
                f"pytorch-gpu is CUDA-only; this is a {spec.accelerator} target",
                "use pytorch (or pytorch-cpu) instead",
            )
        )
    return out


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


def pypi_torch_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """A PyPI torch comes from an index with the target's kind of build: for Windows CUDA targets a
    PyTorch CUDA index (PyPI's default index has none), and a PyTorch index of the matching flavour."""
    spec = recipe.target.spec
    torch = manifest.pypi_dependencies_for(spec.subdir).get("torch")
    if torch is None or torch.source is not None:
        return []
    if torch.index is None:
        return _default_index_problems(manifest, torch, recipe)
    flavour = torch.index.rstrip("/").rsplit("/", 1)[-1]
    want = cuda_tag(spec.cuda_version or "") if spec.is_cuda else None
    if (want and flavour != want) or (not want and flavour.startswith("cu")):
        fix = f"use the {want} index" if want else "use the cpu index (or PyPI for macOS)"
        return [
            _problem(
                manifest,
                torch.key,
                torch.table,
                f"torch comes from the {flavour!r} index, which does not match {spec.target_id}",
                torch.index,
                fix,
            )
        ]
    return []


def _default_index_problems(manifest: PixiManifest, torch: PypiDependency, recipe: Recipe) -> list[Problem]:
    """PyPI's default index has no CUDA torch for Windows: a Windows CUDA box must name PyTorch's index."""
    spec = recipe.target.spec
    if not (spec.is_cuda and spec.is_windows) or pypi_torch(manifest, spec.subdir) is None:
        return []
    version = torch.version or "*"
    return [
        _problem(
            manifest,
            torch.key,
            torch.table,
            "torch comes from PyPI's default index, which has no CUDA build of torch for Windows (only a CPU "
            f"wheel, about 127 MB), so {spec.target_id} would ship CPU torch under a CUDA name",
            f"torch {version} from PyPI's default index",
            f'take torch from PyTorch\'s CUDA {spec.cuda_version} index: torch = {{ version = "{version}", '
            f'index = "{pytorch_index(spec.cuda_version)}" }}',
        )
    ]


def manifest_problems(manifest: PixiManifest, recipe: Recipe) -> list[Problem]:
    """Every static rule of pixi.toml for ``recipe``'s target; empty when the manifest follows the guide."""
    out: list[Problem] = []
    for rule in (platform_problems, cuda_problems, torch_problems, python_problems, pypi_torch_problems):
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
