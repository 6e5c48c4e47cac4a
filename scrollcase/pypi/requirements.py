"""``[pypi-dependencies]`` of a pixi.toml as PEP 508 requirements for one target.  Pure.

The table itself is read once, by :meth:`PixiManifest.pypi_dependencies_for`; this turns each entry into
what uv is asked for.  ``path``, ``git`` and ``url`` requirements (and editable folders) are refused: a box
installs hash-pinned wheels only, and a folder or a git checkout has no hash to pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scrollcase.errors import ManifestError, Problem
from scrollcase.pixi.lockfile import normalize_name as normalize
from scrollcase.pixi.manifest import PixiManifest, PypiDependency

__all__ = ["PypiRequirement", "normalize", "pypi_requirements"]
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
