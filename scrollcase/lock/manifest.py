"""Reading a recipe's pixi.toml into a small frozen model, with line numbers for messages.

Only what scrollcase needs is modelled: channels, platforms (plain and the per-platform table form
``{ platform = "linux-64", cuda = "12.4" }``), system requirements, and conda/PyPI dependencies of
the default feature plus ``[target.<subdir>]`` overrides.  Features (``[feature.<name>]``) are not
modelled: a recipe has one environment, the default one.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollcase.errors import ManifestError, Problem
from scrollcase.io.files import ReadErrors, read_text
from scrollcase.lock.read import normalize_name
from scrollcase.targets.classify import SYSTEM_REQUIREMENT

PYPI_SOURCES = ("url", "git", "path")  # a PyPI dependency with one of these keys comes from no index


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
class PypiDependency:
    """One ``[pypi-dependencies]`` entry: PEP 440 specifiers for an index, or a direct source."""

    name: str  # as written in pixi.toml
    version: str | None = None  # the specifiers as written ("*", ">=2.5,<2.7", "==2.6.0"); None: not given
    index: str | None = None  # the ``index`` URL; None: PyPI's default index
    source: str | None = None  # "url", "git" or "path" when the package comes from no index
    table: str = "pypi-dependencies"  # where it was declared, e.g. "target.win-64.pypi-dependencies"

    @property
    def key(self) -> str:
        return f"{self.table}.{self.name}"


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

    def pypi_dependencies_for(self, subdir: str) -> dict[str, PypiDependency]:
        """``[pypi-dependencies]`` with ``[target.<selector>.pypi-dependencies]`` applied for ``subdir``,
        keyed by normalized name (``Torch`` and ``torch`` are one package)."""
        tables: list[tuple[str, Mapping[str, Any]]] = [("pypi-dependencies", self.pypi_dependencies)]
        for selector, table in self.targets.items():
            entries = table.get("pypi-dependencies")
            if _selector_matches(selector, subdir) and isinstance(entries, Mapping):
                tables.append((f"target.{selector}.pypi-dependencies", entries))
        return {
            normalize_name(name): _pypi_dependency(self, name, value, where)
            for where, entries in tables
            for name, value in entries.items()
        }

    def cuda_requirement(self, subdir: str) -> tuple[str | None, str]:
        """The declared CUDA system requirement for ``subdir`` and where it was declared."""
        for entry in self.platforms:
            if entry.subdir == subdir and entry.cuda:
                return entry.cuda, "workspace.platforms"
        cuda = self.system_requirements.get(SYSTEM_REQUIREMENT)
        if cuda is not None:
            return str(cuda), "system-requirements.cuda"
        return None, ""

    def line_of(self, key: str, table: str | None = None) -> int | None:
        """1-based line where ``key`` is set inside ``[table]`` (``None``: the top level).

        Understands quoted and dotted keys, ``[project]`` as the old name of ``[workspace]``, and
        skips multi-line strings and arrays so a key inside them is never mistaken for a setting.
        A table that only exists as a header (``[system-requirements]``) is found with key ``""``.
        """
        return _line_in(self.text, key, table)


def _line_in(text: str, key: str, table: str | None) -> int | None:
    lines = key_lines(text)
    for candidate in _table_aliases(table or ""):
        found = lines.get((candidate, key))
        if found is not None:
            return found
    return None


def _table_aliases(table: str) -> tuple[str, ...]:
    if table == "workspace" or table.startswith("workspace."):
        return (table, "project" + table[len("workspace") :])
    return (table,)


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")
_KEY = re.compile(rf"^\s*((?:{_KEY_PART.pattern})(?:\s*\.\s*(?:{_KEY_PART.pattern}))*)\s*=")


def _dotted(text: str) -> list[str]:
    return [part.strip("\"'") for part in _KEY_PART.findall(text)]


@functools.lru_cache(maxsize=64)
def key_lines(text: str) -> dict[tuple[str, str], int]:
    """(table, key) -> first line for every key set in ``text``; a header records (table, "")."""
    out: dict[tuple[str, str], int] = {}
    table = ""
    depth = 0  # open [ or { of a value still spanning lines
    in_string: str | None = None  # the delimiter of an open multi-line string
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        if depth == 0:
            header = _HEADER.match(line)
            if header:
                table = ".".join(_dotted(header.group(1)))
                out.setdefault((table, ""), number)
                continue
            key = _KEY.match(line)
            if key:
                parts = _dotted(key.group(1))
                for split in range(len(parts)):  # a.b.c = 1 also sets a (and a.b) here
                    inner = ".".join([table, *parts[:split]]).strip(".")
                    out.setdefault((inner, ".".join(parts[split:])), number)
                    out.setdefault((inner, parts[split]), number)
        in_string, depth = _scan_value(line, depth)
    return out


def _scan_value(line: str, depth: int) -> tuple[str | None, int]:
    """Track bracket depth and an opened multi-line string across one line (outside strings)."""
    i = 0
    while i < len(line):
        for delim in ('"""', "'''"):
            if line.startswith(delim, i):
                close = line.find(delim, i + 3)
                if close < 0:
                    return delim, depth
                i = close + 3
                break
        else:
            char = line[i]
            if char == "#":
                break
            if char in "\"'":
                close = i + 1
                while close < len(line) and line[close] != char:
                    close += 2 if char == '"' and line[close] == "\\" else 1
                i = close + 1
                continue
            depth += 1 if char in "[{" else -1 if char in "]}" else 0
            i += 1
    return None, max(depth, 0)


_ENTRY_FIXES = {
    "dependencies": 'write {name} = "1.*" or {name} = {{ version = "1.*", build = "..." }}',
    "pypi-dependencies": 'write {name} = ">=1.0" or {name} = {{ version = ">=1.0", index = "https://..." }}',
}
_SPEC_FIELDS = ("version", "build", "channel", "index")  # text wherever a dependency table gives them
_PLATFORMS_FIX = 'write platforms = ["linux-64"] or platforms = [{ platform = "linux-64", cuda = "12.4" }]'


def _entry_tables(data: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(kind, table, entries) of [dependencies], [pypi-dependencies] and their [target.<selector>.*] forms."""
    targets = data.get("target")
    selectors = targets.items() if isinstance(targets, Mapping) else []
    out = [(kind, kind, data.get(kind)) for kind in _ENTRY_FIXES]
    for selector, target in selectors:
        if isinstance(target, Mapping):
            out += [(kind, f"target.{selector}.{kind}", target.get(kind)) for kind in _ENTRY_FIXES]
    return [entry for entry in out if entry[2] is not None]


def _readable(value: Any) -> bool:
    """A dependency scrollcase can read: a spec string, or a table whose spec fields are strings."""
    if isinstance(value, Mapping):
        return all(isinstance(v, str) for k, v in value.items() if k in _SPEC_FIELDS)
    return isinstance(value, str)


@dataclass(frozen=True)
class _Where:
    file: str
    text: str

    def problem(self, table: str, name: str, value: Any, what: str, fix: str) -> Problem:
        text = self.text
        line = _line_in(text, name, table) or _line_in(text, "", table) or _line_in(text, table, None)
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        key = f"{table}.{name}" if name else table
        return Problem(message=f"must be {what}", file=self.file, line=line, key=key, value=shown, fix=fix)


def shape_problems(data: Mapping[str, Any], file: str, text: str) -> list[Problem]:
    """Every entry scrollcase cannot read, each at its line: dependency tables and entries that are neither
    a string nor a table of strings, platforms entries that are neither a subdir nor ``{ platform = ... }``,
    a [system-requirements] that is not a table."""
    where, out = _Where(file, text), []
    for kind, table, entries in _entry_tables(data):
        if not isinstance(entries, Mapping):
            out.append(where.problem(table, "", entries, "a table", f"write [{table}] with one name = spec per line"))
            continue
        for name, value in entries.items():
            if not _readable(value):
                fix = _ENTRY_FIXES[kind].format(name=name)
                out.append(where.problem(table, name, value, "a string or a table of strings", fix))
    workspace = data.get("workspace") or data.get("project") or {}
    platforms = workspace.get("platforms", [])
    if not isinstance(platforms, list):
        out.append(where.problem("workspace", "platforms", platforms, "a list", _PLATFORMS_FIX))
        platforms = []
    for item in platforms:
        if not (isinstance(item, str) or (isinstance(item, Mapping) and isinstance(item.get("platform"), str))):
            what = 'a conda subdir or a table with platform = "<subdir>"'
            out.append(where.problem("workspace", "platforms", item, what, _PLATFORMS_FIX))
    requirements = data.get("system-requirements")
    if requirements is not None and not isinstance(requirements, Mapping):
        fix = 'write [system-requirements] with cuda = "12.4" on its own line'
        out.append(where.problem("system-requirements", "", requirements, "a table", fix))
    return out


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
        return Dependency(
            name=name, version=value.get("version"), build=value.get("build"), channel=value.get("channel"), table=table
        )
    raise ManifestError(
        f"dependency {name!r} in [{table}] must be a string or a table",
        fix=f'write {name} = "1.*" or {name} = {{ version = "1.*", build = "..." }}',
    )


def _pypi_dependency(manifest: PixiManifest, name: str, value: Any, table: str) -> PypiDependency:
    if isinstance(value, str):
        return PypiDependency(name=name, version=value, table=table)
    if isinstance(value, Mapping):
        version, index = value.get("version"), value.get("index")
        source = next((key for key in PYPI_SOURCES if key in value), None)
        return PypiDependency(
            name=name,
            version=version if isinstance(version, str) else None,
            index=index if isinstance(index, str) else None,
            source=source,
            table=table,
        )
    fix = f'write {name} = ">=1.0" or {name} = {{ version = ">=1.0", index = "https://..." }}'
    message = f"PyPI dependency {name!r} in [{table}] must be a string or a table"
    problem = Problem(
        message="must be a string or a table",
        file=manifest.file,
        line=manifest.line_of(name, table),
        key=f"{table}.{name}",
        value=repr(value),
        fix=fix,
    )
    raise ManifestError(message, problems=[problem])


def _platforms(raw: Any) -> tuple[PlatformEntry, ...]:
    out: list[PlatformEntry] = []
    for item in raw or []:
        if isinstance(item, str):
            out.append(PlatformEntry(subdir=item, name=item))
        elif isinstance(item, Mapping) and isinstance(item.get("platform"), str):
            cuda = item.get(SYSTEM_REQUIREMENT)
            out.append(
                PlatformEntry(
                    subdir=item["platform"],
                    name=str(item.get("name", item["platform"])),
                    cuda=None if cuda is None else str(cuda),
                )
            )
        else:
            raise ManifestError(
                f"unsupported platforms entry {item!r}",
                fix='use "linux-64" or { platform = "linux-64", cuda = "12.4" }',
            )
    return tuple(out)


def toml11_to_toml10(text: str) -> str:
    """Rewrite TOML 1.1 inline tables (newlines, comments, trailing commas inside ``{}``), which pixi
    accepts since 0.73 but Python's tomllib (TOML 1.0) does not, into one-line TOML 1.0 form.
    Line breaks move to just after the table so later line numbers stay right."""
    out: list[str] = []
    depth, i, held = 0, 0, 0  # held: newlines removed inside the current inline table
    while i < len(text):
        char = text[i]
        for delim in ('"""', "'''", '"', "'"):
            if text.startswith(delim, i):
                end = _string_end(text, i, delim)
                out.append(text[i:end])
                i = end
                break
        else:
            if depth and char == "#":
                while i < len(text) and text[i] != "\n":
                    i += 1
                continue
            if depth and char == "\n":
                out.append(" ")
                held += 1
            elif char == "}" and depth:
                while out and out[-1].isspace():
                    out.pop()
                if out and out[-1] == ",":
                    out.pop()
                out.append(" }")
                depth -= 1
                if depth == 0:
                    out.append("\n" * held if held else "")
                    held = 0
                    while i + 1 < len(text) and text[i + 1] != "\n" and text[i + 1] in " \t":
                        i += 1
                    if held == 0 and out[-1] == "":
                        out.pop()
            else:
                depth += char == "{"
                out.append(char)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int, delim: str) -> int:
    i = start + len(delim)
    while i < len(text):
        if delim[0] == '"' and text[i] == "\\":
            i += 2
            continue
        if text.startswith(delim, i):
            return i + len(delim)
        if len(delim) == 1 and text[i] == "\n":
            return i
        i += 1
    return len(text)


def _load_toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        if "{" not in text:
            raise
        try:
            return tomllib.loads(toml11_to_toml10(text))
        except tomllib.TOMLDecodeError:
            pass
        raise


def _channel(entry: Any) -> str:
    return entry if isinstance(entry, str) else str(entry.get("channel"))


def parse_manifest(text: str, file: str = "pixi.toml") -> PixiManifest:
    try:
        data = _load_toml(text)
    except tomllib.TOMLDecodeError as exc:
        # Python < 3.14 only puts the position in the message: "... (at line 3, column 7)".
        where = re.search(r"at line (\d+), column (\d+)", str(exc))
        line, column = (int(where.group(1)), int(where.group(2))) if where else (None, None)
        raise ManifestError(
            f"{file} is not valid TOML",
            problems=[
                Problem(
                    message=str(exc), file=file, line=line, column=column, fix="fix the TOML syntax at that position"
                )
            ],
        ) from None
    workspace = data.get("workspace") or data.get("project")
    if not isinstance(workspace, Mapping):
        fix = 'add [workspace] with name, channels = ["conda-forge"] and platforms'
        problem = Problem(message="missing [workspace]", file=file, line=1, fix=fix)
        raise ManifestError(f"{file} has no [workspace] table", problems=[problem])
    malformed = shape_problems(data, file, text)
    if malformed:
        count = "an entry" if len(malformed) == 1 else f"{len(malformed)} entries"
        raise ManifestError(f"{file} has {count} scrollcase cannot read", problems=malformed)
    deps = {name: _dependency(name, value, "dependencies") for name, value in (data.get("dependencies") or {}).items()}
    return PixiManifest(
        file=file,
        text=text,
        name=workspace.get("name"),
        channels=tuple(_channel(c) for c in workspace.get("channels", [])),
        platforms=_platforms(workspace.get("platforms")),
        system_requirements=dict(data.get("system-requirements") or {}),
        dependencies=deps,
        pypi_dependencies=dict(data.get("pypi-dependencies") or {}),
        targets={k: v for k, v in (data.get("target") or {}).items() if isinstance(v, Mapping)},
    )


_READ_MANIFEST = ReadErrors(
    ManifestError,
    missing_fix="create pixi.toml next to recipe.json (see docs/recipes.md)",
    unreadable="cannot read {path}: {exc}",
)


def load_manifest(path: Path, file: str | None = None) -> PixiManifest:
    """Read and parse ``path``; ``file`` is the name problems give it (default: ``path`` as written)."""
    return parse_manifest(read_text(path, _READ_MANIFEST), file=file or str(path))
