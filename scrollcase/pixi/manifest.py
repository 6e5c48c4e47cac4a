"""Reading a recipe's pixi.toml into a small frozen model, with line numbers for messages.

Only what scrollcase needs is modelled: channels, platforms (plain and the per-platform table form
``{ platform = "linux-64", cuda = "12.4" }``), system requirements, and conda/PyPI dependencies of
the default feature plus ``[target.<subdir>]`` overrides.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollcase.errors import ManifestError, Problem


@dataclass(frozen=True)
class PlatformEntry:
    subdir: str
    name: str
    cuda: str | None = None  # the per-platform form's CUDA system requirement


@dataclass(frozen=True)
class Dependency:
    name: str
    version: str | None = None
    build: str | None = None
    channel: str | None = None
    table: str = "dependencies"  # where it was declared, e.g. "target.linux-64.dependencies"

    def match_spec(self) -> str:
        """A conda MatchSpec string: ``name[version="..", build=".."]``."""
        fields = []
        if self.version and self.version != "*":
            fields.append(f'version="{self.version}"')
        if self.build:
            fields.append(f'build="{self.build}"')
        spec = self.name + (f"[{', '.join(fields)}]" if fields else "")
        return f"{self.channel}::{spec}" if self.channel else spec


@dataclass(frozen=True)
class PixiManifest:
    file: str
    text: str
    name: str | None
    channels: tuple[str, ...]
    platforms: tuple[PlatformEntry, ...]
    system_requirements: Mapping[str, Any]
    dependencies: Mapping[str, Dependency]
    pypi_dependencies: Mapping[str, Any]
    targets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def dependencies_for(self, subdir: str) -> dict[str, Dependency]:
        """Default-feature dependencies with ``[target.<selector>.dependencies]`` applied for ``subdir``."""
        deps = dict(self.dependencies)
        for selector, table in self.targets.items():
            if _selector_matches(selector, subdir):
                for name, value in (table.get("dependencies") or {}).items():
                    deps[name] = _dependency(name, value, f"target.{selector}.dependencies")
        return deps

    def cuda_requirement(self, subdir: str) -> tuple[str | None, str]:
        """The declared CUDA system requirement for ``subdir`` and where it was declared."""
        for entry in self.platforms:
            if entry.subdir == subdir and entry.cuda:
                return entry.cuda, "workspace.platforms"
        cuda = self.system_requirements.get("cuda")
        if cuda is not None:
            return str(cuda), "system-requirements.cuda"
        return None, ""

    def line_of(self, key: str, table: str | None = None) -> int | None:
        """1-based line where ``key`` (optionally inside ``[table]``) is set, best effort."""
        lines = self.text.splitlines()
        start = 0
        if table:
            header = re.compile(rf"^\s*\[{re.escape(table)}\]\s*(#.*)?$")
            for i, line in enumerate(lines):
                if header.match(line):
                    start = i + 1
                    break
            else:
                return None
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for i in range(start, len(lines)):
            if table and lines[i].lstrip().startswith("[") and i > start - 1 and not pattern.match(lines[i]):
                if re.match(r"^\s*\[[^\]]", lines[i]):
                    break
            if pattern.match(lines[i]):
                return i + 1
        return None


def _selector_matches(selector: str, subdir: str) -> bool:
    family = subdir.split("-")[0]
    families = {"linux": "linux", "win": "win", "osx": "osx"}
    if selector == subdir:
        return True
    if selector == "unix":
        return family in ("linux", "osx")
    return families.get(selector) == family


def _dependency(name: str, value: Any, table: str) -> Dependency:
    if isinstance(value, str):
        return Dependency(name=name, version=value, table=table)
    if isinstance(value, Mapping):
        return Dependency(name=name, version=value.get("version"), build=value.get("build"),
                          channel=value.get("channel"), table=table)
    raise ManifestError(f"dependency {name!r} in [{table}] must be a string or a table",
                        fix=f'write {name} = "1.*" or {name} = {{ version = "1.*", build = "..." }}')


def _platforms(raw: Any) -> tuple[PlatformEntry, ...]:
    out: list[PlatformEntry] = []
    for item in raw or []:
        if isinstance(item, str):
            out.append(PlatformEntry(subdir=item, name=item))
        elif isinstance(item, Mapping) and isinstance(item.get("platform"), str):
            cuda = item.get("cuda")
            out.append(PlatformEntry(subdir=item["platform"], name=str(item.get("name", item["platform"])),
                                     cuda=None if cuda is None else str(cuda)))
        else:
            raise ManifestError(f"unsupported platforms entry {item!r}",
                                fix='use "linux-64" or { platform = "linux-64", cuda = "12.4" }')
    return tuple(out)


def parse_manifest(text: str, file: str = "pixi.toml") -> PixiManifest:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        raise ManifestError(f"{file} is not valid TOML", problems=[Problem(
            message=str(exc), file=file, line=line, fix="fix the TOML syntax at that position")]) from None
    workspace = data.get("workspace") or data.get("project")
    if not isinstance(workspace, Mapping):
        raise ManifestError(f"{file} has no [workspace] table", problems=[Problem(
            message="missing [workspace]", file=file, line=1,
            fix='add [workspace] with name, channels = ["conda-forge"] and platforms')])
    deps = {name: _dependency(name, value, "dependencies")
            for name, value in (data.get("dependencies") or {}).items()}
    return PixiManifest(
        file=file,
        text=text,
        name=workspace.get("name"),
        channels=tuple(c if isinstance(c, str) else str(c.get("channel")) for c in workspace.get("channels", [])),
        platforms=_platforms(workspace.get("platforms")),
        system_requirements=dict(data.get("system-requirements") or {}),
        dependencies=deps,
        pypi_dependencies=dict(data.get("pypi-dependencies") or {}),
        targets={k: v for k, v in (data.get("target") or {}).items() if isinstance(v, Mapping)},
    )


def load_manifest(path: Path) -> PixiManifest:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist",
                            fix="create pixi.toml next to recipe.json (see docs: the pixi manifest)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    return parse_manifest(text, file=str(path))
