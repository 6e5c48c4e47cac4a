"""Reading pixi.lock files (format versions 3 to 7) into one frozen model, with line numbers.

Two readers produce the same :class:`LockFile`:

* a fast scanner for the layout pixi and rattler write (v4+): it reads the small header with
  PyYAML's CSafeLoader and walks the large ``environments``/``packages`` sections line by line, so a
  1 MB lock reads in milliseconds (lock-check runs over every recipe on each PR);
* a general reader on the full YAML document (CSafeLoader), used for v3 and whenever the scanner
  meets a layout it does not expect (hand edits, other writers).  It is also what reports YAML
  syntax errors with their line.

Records are frozen dataclasses rather than pydantic models on purpose: a lock holds tens of
thousands of package entries and validating each would cost more than reading the file.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import yaml

from scrollcase.errors import LockError, Problem
from scrollcase.io.files import ReadErrors, read_text

SUPPORTED_VERSIONS = (3, 4, 5, 6, 7)
Kind = Literal["conda", "pypi"]
_FIX = "regenerate it with `scrollcase lock <recipeId>` (or `pixi lock`) and commit it"
_CONDA_SUFFIXES = (".conda", ".tar.bz2")


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
        for suffix in _CONDA_SUFFIXES:
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


class _LayoutError(Exception):
    """The fast scanner met something it does not expect; the YAML reader takes over."""


def read_version(text: str, file: str) -> int:
    match = re.search(r"^version:\s*['\"]?(\d+)['\"]?\s*$", text[:4096], re.MULTILINE)
    if match is None:
        load_yaml(text, file)  # an invalid document is reported as such, with its line
        raise LockError(
            f"{file} is not a pixi lock file",
            problems=[Problem(message="no top-level `version:` key", file=file, line=1, key="version", fix=_FIX)],
        )
    version = int(match.group(1))
    if version not in SUPPORTED_VERSIONS:
        line = text.count("\n", 0, match.start()) + 1
        raise LockError(
            f"{file} has lock format version {version}",
            problems=[
                Problem(
                    message=f"scrollcase reads lock versions {SUPPORTED_VERSIONS[0]} to {SUPPORTED_VERSIONS[-1]}",
                    file=file,
                    line=line,
                    key="version",
                    value=str(version),
                    fix=_FIX,
                )
            ],
        )
    return version


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
                    fix=_FIX,
                )
            ],
        ) from None


def _scalar(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        value = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
        return str(value)
    return raw


@dataclass
class _Record:
    kind: Kind
    location: str
    line: int
    name: str | None = None
    version: str | None = None
    build: str | None = None
    body: str = ""  # the record's unparsed fields (fast reader), read on demand


def _resolve(record: _Record | None, kind: Kind, location: str, entry_line: int | None, file: str) -> LockedPackage:
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
                    fix=_FIX,
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
                    fix=_FIX,
                )
            ],
        )
    version = record.version or (parsed[1] if parsed else "")
    build = record.build or (parsed[2] if parsed else None)
    name = normalize_name(name) if kind == "pypi" else name.lower()
    return LockedPackage(kind, location, name, str(version), None if kind == "pypi" else build, record.line, entry_line)


# --- the fast scanner (v4+) -----------------------------------------------------------------------


_TOP_LEVEL = re.compile(r"\n(?=[^ \-\n])")
# A literal prefix lets the regex engine skip ahead (``^`` with MULTILINE is ten times slower).
_ENV_HEADER = re.compile(r"\n  ([^ \-#\n][^\n]*):(?=\n)")


def _section(text: str, key: str) -> tuple[int, int] | None:
    """(start, end) offsets of the body of top-level ``key:``; None when absent."""
    marker = f"\n{key}:\n"
    start = text.find(marker)
    if start < 0:
        return None
    body = start + len(marker)
    nxt = _TOP_LEVEL.search(text, body)
    return body, (nxt.start() + 1 if nxt else len(text))


_RawRecord = tuple[int, str]  # (line, the record's text after its first line)


def _scan_records(text: str, start: int, end: int) -> dict[tuple[str, str], _Record | _RawRecord]:
    """Every record under ``packages:`` by (kind, location), with its line and unparsed body.

    Records are split on ``\n- `` (C-speed); the few fields that name a package are read from a
    record's body only when an environment entry needs it (:func:`_named`), so the bulk of a lock
    (depends, hashes, licenses, records of other environments) is never parsed.
    """
    records: dict[tuple[str, str], _Record | _RawRecord] = {}
    body = text[start:end]
    if not body.startswith("- "):
        raise _LayoutError("packages: does not start with a record")
    line = text.count("\n", 0, start) + 1
    for chunk in body[2:].split("\n- "):
        head, _, rest = chunk.partition("\n")
        key, sep, value = head.partition(": ")
        if key in ("conda", "pypi") and value[:1] not in ("'", '"'):
            records[(key, value)] = (line, rest)
        elif not sep:
            raise _LayoutError(f"record without a key at line {line}")
        else:
            record = _start_record(key, _scalar(value), line)
            record.body = "\n" + rest
            if key == "kind":  # v4/v5: the location is a field
                _fill_record(record)
            records[(record.kind, record.location)] = record
        line += chunk.count("\n") + 1
    return records


def _fill_record(record: _Record) -> None:
    rest, record.body = record.body, ""
    for key in ("kind", "url", "path", "name", "version", "build"):
        pos = rest.find(f"\n  {key}: ")
        if pos < 0:
            continue
        stop = rest.find("\n", pos + 1)
        value = _scalar(rest[pos + len(key) + 5 : stop if stop >= 0 else len(rest)])
        if key == "kind":
            record.kind = "pypi" if value == "pypi" else "conda"
        elif key in ("url", "path"):
            record.location = record.location or value
        else:
            setattr(record, key, value)


def _named(records: dict[tuple[str, str], _Record | _RawRecord], kind: str, location: str) -> _Record | None:
    """The record of an environment entry with its naming fields read (once)."""
    found = records.get((kind, location))
    if found is None or isinstance(found, _Record):
        if found is not None and found.body:
            _fill_record(found)
        return found
    line, rest = found
    record = _Record("pypi" if kind == "pypi" else "conda", location, line, body="\n" + rest)
    _fill_record(record)
    records[(kind, location)] = record
    return record


def _start_record(key: str, value: str, line: int) -> _Record:
    if key in ("conda", "pypi"):
        return _Record("conda" if key == "conda" else "pypi", value, line)
    if key == "conda_source":
        return _Record("conda", value, line, name=value.split("[", 1)[0].split(" @ ", 1)[0].strip())
    if key == "kind":
        return _Record("pypi" if value == "pypi" else "conda", "", line)
    raise _LayoutError(f"record starting with {key!r} at line {line}")


@dataclass
class _EnvDraft:
    name: str
    line: int
    channels: list[str]
    indexes: list[str]
    packages: dict[str, list[tuple[str, str, int]]]  # platform -> (kind, location, line)


def _scan_environments(text: str, start: int, end: int, only: Collection[str] | None) -> list[_EnvDraft]:
    """Environment headers are found with one regex; only the wanted environments are walked."""
    headers = list(_ENV_HEADER.finditer(text, start - 1, end))
    if not headers and text[start:end].strip():
        raise _LayoutError("no environment headers")
    envs: list[_EnvDraft] = []
    for i, header in enumerate(headers):
        name = _scalar(header.group(1))
        if only is not None and name not in only:
            continue
        stop = headers[i + 1].start() if i + 1 < len(headers) else end
        line = text.count("\n", 0, header.start()) + 2
        draft = _EnvDraft(name, line, [], [], {})
        _scan_environment(draft, text[header.end() + 1 : stop], line)
        envs.append(draft)
    return envs


def _scan_environment(draft: _EnvDraft, body: str, line: int) -> None:
    key = ""
    platform = ""
    for raw in body.split("\n"):
        line += 1
        if not raw.strip():
            continue
        if raw.startswith("      - "):  # the hot path: one package entry
            if key != "packages" or not platform:
                raise _LayoutError(f"package entry outside a platform at line {line}")
            kind, _, location = raw[8:].partition(": ")
            kind = "conda" if kind in ("conda", "conda_source") else kind
            if kind not in ("conda", "pypi"):
                raise _LayoutError(f"unknown package kind at line {line}")
            draft.packages[platform].append((kind, _scalar(location), line))
        elif raw.startswith("      ") and key == "packages":
            if not raw.endswith(":") or raw[6] == " ":
                raise _LayoutError(f"unexpected platform line {line}")
            platform = _scalar(raw[6:-1])
            draft.packages.setdefault(platform, [])
        elif raw.startswith("    - ") and key in ("channels", "indexes"):
            item = raw[6:]
            if key == "channels":
                if not item.startswith("url: "):
                    raise _LayoutError(f"unexpected channel entry at line {line}")
                draft.channels.append(_scalar(item[5:]))
            else:
                draft.indexes.append(_scalar(item))
        elif raw.startswith("    ") and raw[4] != " " and raw.endswith(":"):
            key, platform = raw[4:-1], ""
        elif raw.startswith("    ") and raw[4] not in " -":
            # pixi writes an empty key inline (``channels: []``, ``packages: {}``); any other inline
            # value is not its layout, maybe not even YAML: the YAML reader decides and reports the line.
            name, _, value = raw[4:].partition(": ")
            if value not in ("[]", "{}"):
                raise _LayoutError(f"inline value at line {line}")
            key, platform = name, ""
        elif not (raw.startswith("      ") or (raw.startswith("    ") and key != "packages")):
            raise _LayoutError(f"unexpected line {line} in environments")


def _scan(text: str, file: str, version: int, only: Collection[str] | None = None) -> LockFile:
    env_span = _section(text, "environments")
    pkg_span = _section(text, "packages")
    if env_span is None or pkg_span is None:
        raise _LayoutError("missing environments or packages section")
    records = _scan_records(text, *pkg_span)
    environments: dict[str, LockEnvironment] = {}
    for draft in _scan_environments(text, *env_span, only):
        packages = {
            platform: tuple(
                _resolve(_named(records, kind, loc), kind, loc, line, file)  # type: ignore[arg-type]
                for kind, loc, line in entries
            )
            for platform, entries in draft.packages.items()
        }
        environments[draft.name] = LockEnvironment(
            draft.name, tuple(draft.channels), tuple(draft.indexes), packages, draft.line
        )
    return LockFile(file, version, _header_platforms(text, file, environments), environments)


def _header_platforms(text: str, file: str, envs: Mapping[str, LockEnvironment]) -> dict[str, LockPlatform]:
    """v7's ``platforms:`` table (small: read with YAML); before v7 a platform key is its subdir."""
    span = _section(text, "platforms")
    raw = load_yaml(text[span[0] : span[1]], file) if span else None
    return _platforms_from(raw, envs)


def _platforms_from(raw: Any, envs: Mapping[str, LockEnvironment]) -> dict[str, LockPlatform]:
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


# --- the general YAML reader ----------------------------------------------------------------------


def _line_of(text: str, needle: str, start: int = 0) -> int | None:
    pos = text.find(needle, start)
    return None if pos < 0 else text.count("\n", 0, pos) + 1


def _env_line(text: str, name: str) -> int | None:
    line = _line_of(text, f"\n  {name}:\n", max(text.find("\nenvironments:"), 0))
    return None if line is None else line + 1


_LOCATION_LINE = re.compile(r"^(?:- |  )(?:conda|conda_source|pypi|url|path): ?(.*)$", re.MULTILINE)


def _record_lines(text: str, start: int) -> dict[str, int]:
    """First line of each record location at or after ``start`` (one regex pass)."""
    lines: dict[str, int] = {}
    line = text.count("\n", 0, start) + 1
    last = start
    for match in _LOCATION_LINE.finditer(text, start):
        line += text.count("\n", last, match.start())
        last = match.start()
        lines.setdefault(_scalar(match.group(1)), line)
    return lines


def _records_from_yaml(items: Any, text: str, file: str) -> dict[tuple[str, str], _Record]:
    records: dict[tuple[str, str], _Record] = {}
    lines = _record_lines(text, max(text.find("\npackages:\n"), 0))
    for item in items or []:
        if not isinstance(item, Mapping):
            raise LockError(
                f"{file}: a package record is not a mapping",
                problems=[
                    Problem(
                        message="expected `- conda: URL` or `- pypi: URL` records",
                        file=file,
                        value=str(item)[:80],
                        fix=_FIX,
                    )
                ],
            )
        record = _record_from_mapping(item)
        record.line = lines.get(record.location, 0)
        records[(record.kind, record.location)] = record
    return records


def _record_from_mapping(item: Mapping[str, Any]) -> _Record:
    if "conda_source" in item:
        source = str(item["conda_source"])
        record = _Record("conda", source, 0, name=source.split("[", 1)[0].split(" @ ", 1)[0].strip())
    elif "conda" in item or "pypi" in item:
        kind: Kind = "conda" if "conda" in item else "pypi"
        record = _Record(kind, str(item[kind]), 0)
    else:
        kind = "pypi" if item.get("kind") == "pypi" or item.get("manager") == "pip" else "conda"
        record = _Record(kind, str(item.get("url") or item.get("path") or ""), 0)
    for key in ("name", "version", "build"):
        if item.get(key) is not None:
            setattr(record, key, str(item[key]))
    return record


def _from_yaml(data: Any, text: str, file: str, version: int) -> LockFile:
    if not isinstance(data, Mapping):
        raise LockError(
            f"{file} is not a pixi lock file",
            problems=[Problem(message="the document is not a mapping", file=file, line=1, fix=_FIX)],
        )
    if version == 3:
        return _from_yaml_v3(data, text, file)
    records = _records_from_yaml(data.get("packages"), text, file)
    environments: dict[str, LockEnvironment] = {}
    for name, env in (data.get("environments") or {}).items():
        if not isinstance(env, Mapping):
            raise LockError(f"{file}: environment {name!r} is not a mapping", fix=_FIX)
        channels = _channel_urls(env.get("channels"))
        packages: dict[str, tuple[LockedPackage, ...]] = {}
        for platform, entries in (env.get("packages") or {}).items():
            resolved = []
            for entry in entries or []:
                kind, location = _entry_kind(entry)
                record = records.get((kind, location))
                line = None if record else _line_of(text, location)  # only to point at a broken entry
                resolved.append(_resolve(record, kind, location, line, file))
            packages[str(platform)] = tuple(resolved)
        environments[str(name)] = LockEnvironment(
            str(name), channels, tuple(str(i) for i in env.get("indexes") or ()), packages, _env_line(text, str(name))
        )
    return LockFile(file, version, _platforms_from(data.get("platforms"), environments), environments)


def _channel_urls(raw: Any) -> tuple[str, ...]:
    return tuple(str(c.get("url") if isinstance(c, Mapping) else c) for c in raw or ())


def _entry_kind(entry: Any) -> tuple[Kind, str]:
    if isinstance(entry, Mapping):
        for key in ("conda", "conda_source", "pypi"):
            if key in entry:
                return ("pypi" if key == "pypi" else "conda"), str(entry[key])
    raise LockError(f"unexpected environment entry {entry!r}", fix=_FIX)


def _from_yaml_v3(data: Mapping[str, Any], text: str, file: str) -> LockFile:
    """v3 has no environments: one ``package:`` list whose records carry their platform."""
    metadata = data.get("metadata") or {}
    channels = _channel_urls(metadata.get("channels"))
    grouped: dict[str, list[LockedPackage]] = {str(p): [] for p in metadata.get("platforms") or ()}
    start = max(text.find("\npackage:\n"), 0)
    for item in data.get("package") or []:
        if not isinstance(item, Mapping):
            raise LockError(f"{file}: a package record is not a mapping", fix=_FIX)
        record = _record_from_mapping(item)
        record.line = _line_of(text, record.location, start) or 0
        start = max(start, text.find(record.location, start) + 1)  # records repeat a URL per platform
        package = _resolve(record, record.kind, record.location, record.line, file)
        grouped.setdefault(str(item.get("platform")), []).append(package)
    env = LockEnvironment("default", channels, (), {k: tuple(v) for k, v in grouped.items()}, None)
    environments = {"default": env}
    return LockFile(file, 3, _platforms_from(None, environments), environments)


# --- entry points ---------------------------------------------------------------------------------


def parse_lock(
    text: str, file: str = "pixi.lock", *, fast: bool = True, environments: Collection[str] | None = None
) -> LockFile:
    """Parse lock text; raises :class:`LockError` (with file and line) for anything unreadable.

    ``environments`` limits which environments are resolved (lock-check needs one); the others are
    left out of the model.  ``fast=False`` forces the general YAML reader.
    """
    version = read_version(text, file)
    if fast and version >= 4:
        try:
            return _scan(text, file, version, environments)
        except _LayoutError:
            pass  # not the canonical layout: let the YAML reader decide (and report syntax errors)
    return _from_yaml(load_yaml(text, file), text, file, version)


_READ_LOCK = ReadErrors(
    LockError,
    missing_problem="the recipe has no committed lock",
    missing_fix="run `scrollcase lock <recipeId>` and commit pixi.lock",
    not_utf8="{path} is not UTF-8 text",
    not_utf8_fix=_FIX,
)


def read_lock_text(path: Path) -> str:
    """The text of a lock file, or LockError saying why it cannot be read."""
    return read_text(path, _READ_LOCK)


def load_lock(path: Path) -> LockFile:
    return parse_lock(read_lock_text(path), file=str(path))
