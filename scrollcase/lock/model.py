"""What a pixi.lock reads into, and what the two readers share.

:class:`LockFile` and its records are the one model both readers produce (the fast scanner,
:mod:`scrollcase.lock.scan`, and the YAML reader, :mod:`scrollcase.lock.yamlread`); the shared
parts are how an environment entry resolves to a named package (:func:`resolve`), how a scalar is
unquoted and how YAML errors are reported.  Records are frozen dataclasses rather than pydantic
models on purpose: a lock holds tens of thousands of package entries and validating each would cost
more than reading the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import yaml

from scrollcase.errors import RECIPE_ID, LockError, Problem

Kind = Literal["conda", "pypi"]
FIX = f"regenerate it with `scrollcase lock {RECIPE_ID}` (or `pixi lock`) and commit it"
CONDA_SUFFIXES = (".conda", ".tar.bz2")


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """One package an environment locks for one platform."""

    kind: Kind
    location: str  # URL or path exactly as the lock writes it
    name: str  # normalized: lowercase, PyPI names with '-' separators
    version: str
    build: str | None = None  # conda build string; None for PyPI
    line: int | None = None  # 1-based line of the record under ``packages:``
    entry_line: int | None = None  # 1-based line of the entry in the environment's list

    @property
    def filename(self) -> str:
        return unquote(self.location.rstrip("/").rsplit("/", 1)[-1])


@dataclass(frozen=True)
class LockPlatform:
    name: str  # the key environments use (v7: lock-local names such as ``p1``)
    subdir: str
    virtual_packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockEnvironment:
    name: str
    channels: tuple[str, ...]
    indexes: tuple[str, ...]
    packages: Mapping[str, tuple[LockedPackage, ...]]  # platform name -> packages
    line: int | None = None


@dataclass(frozen=True)
class LockFile:
    file: str
    version: int
    platforms: Mapping[str, LockPlatform]
    environments: Mapping[str, LockEnvironment]

    def subdir_of(self, platform_name: str) -> str:
        platform = self.platforms.get(platform_name)
        return platform.subdir if platform else platform_name

    def platform_names(self, environment: str, subdir: str) -> list[str]:
        """Platform keys of ``environment`` that resolve to ``subdir`` (v7 may have several)."""
        env = self.environments.get(environment)
        if env is None:
            return []
        return [name for name in env.packages if self.subdir_of(name) == subdir]


# --- names from file names ------------------------------------------------------------------------


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def name_from_location(kind: str, location: str) -> tuple[str, str, str | None] | None:
    """(name, version, build) from a package file name, or None when the name does not tell."""
    filename = unquote(location.rstrip("/").rsplit("/", 1)[-1])
    if kind == "conda":
        for suffix in CONDA_SUFFIXES:
            if filename.endswith(suffix):
                parts = filename[: -len(suffix)].rsplit("-", 2)
                if len(parts) == 3 and all(parts):
                    return parts[0].lower(), parts[1], parts[2]
        return None
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) >= 5:
            return normalize_name(parts[0]), parts[1], None
        return None
    for suffix in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(suffix):
            stem, sep, version = filename[: -len(suffix)].rpartition("-")
            if sep and stem and version[:1].isdigit():
                return normalize_name(stem), version, None
    return None


# --- the shared parts -----------------------------------------------------------------------------


def load_yaml(text: str, file: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise LockError(
            f"{file} is not valid YAML (truncated or hand-edited?)",
            problems=[
                Problem(
                    message=str(problem),
                    file=file,
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                    fix=FIX,
                )
            ],
        ) from None


def scalar(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        value = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
        return str(value)
    return raw


@dataclass
class Record:
    kind: Kind
    location: str
    line: int
    name: str | None = None
    version: str | None = None
    build: str | None = None
    body: str = ""  # the record's unparsed fields (fast reader), read on demand


def resolve(record: Record | None, kind: Kind, location: str, entry_line: int | None, file: str) -> LockedPackage:
    """Name/version/build of one environment entry: the record's fields, else its file name."""
    if record is None:
        raise LockError(
            f"{file} lists a package with no record (truncated or hand-edited?)",
            problems=[
                Problem(
                    message=f"no record under `packages:` for {kind} {location}",
                    file=file,
                    line=entry_line,
                    value=location,
                    fix=FIX,
                )
            ],
        )
    parsed = name_from_location(kind, location)
    name = record.name or (parsed[0] if parsed else None)
    if name is None:
        raise LockError(
            f"{file} has a {kind} record without a name",
            problems=[
                Problem(
                    message=f"cannot tell the package name of {location}",
                    file=file,
                    line=record.line,
                    value=location,
                    fix=FIX,
                )
            ],
        )
    version = record.version or (parsed[1] if parsed else "")
    build = record.build or (parsed[2] if parsed else None)
    name = normalize_name(name) if kind == "pypi" else name.lower()
    return LockedPackage(kind, location, name, str(version), None if kind == "pypi" else build, record.line, entry_line)


def platforms_from(raw: Any, envs: Mapping[str, LockEnvironment]) -> dict[str, LockPlatform]:
    platforms: dict[str, LockPlatform] = {}
    for item in raw or []:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            name = item["name"]
            platforms[name] = LockPlatform(
                name, str(item.get("subdir") or name), tuple(str(v) for v in item.get("virtual-packages") or ())
            )
    for env in envs.values():
        for name in env.packages:
            platforms.setdefault(name, LockPlatform(name, name))
    return platforms
