"""The general pixi.lock reader (v3 to v7) on the full YAML document (PyYAML's CSafeLoader).

Used for v3 and whenever the fast scanner (:mod:`scrollcase.lock.scan`) meets a layout it does
not expect; it is also what reports YAML syntax errors with their line.  Record lines are found with
one regex pass over the text; entry lines are not kept (only to point at a broken entry).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scrollcase.errors import LockError, Problem
from scrollcase.lock.model import (
    FIX,
    Kind,
    LockedPackage,
    LockEnvironment,
    LockFile,
    Record,
    platforms_from,
    resolve,
    scalar,
)


def _line_of(text: str, needle: str, start: int = 0) -> int | None:
    pos = text.find(needle, start)
    return None if pos < 0 else text.count("\n", 0, pos) + 1


def _env_line(text: str, name: str) -> int | None:
    line = _line_of(text, f"\n  {name}:\n", max(text.find("\nenvironments:"), 0))
    return None if line is None else line + 1


_LOCATION_LINE = re.compile(r"^(?:- |  )(?:conda|conda_source|pypi|url|path): ?(.*)$", re.MULTILINE)
_PYPI_MANAGERS = ("pypi", "pip")  # a v3 record's manager: pixi wrote "pypi" (real v3 locks); "pip" is accepted too


def _record_lines(text: str, start: int) -> dict[str, int]:
    """First line of each record location at or after ``start`` (one regex pass)."""
    lines: dict[str, int] = {}
    line = text.count("\n", 0, start) + 1
    last = start
    for match in _LOCATION_LINE.finditer(text, start):
        line += text.count("\n", last, match.start())
        last = match.start()
        lines.setdefault(scalar(match.group(1)), line)
    return lines


def _records_from_yaml(items: Any, text: str, file: str) -> dict[tuple[str, str], Record]:
    records: dict[tuple[str, str], Record] = {}
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
                        fix=FIX,
                    )
                ],
            )
        record = _record_from_mapping(item)
        record.line = lines.get(record.location, 0)
        records[(record.kind, record.location)] = record
    return records


def _record_from_mapping(item: Mapping[str, Any]) -> Record:
    if "conda_source" in item:
        source = str(item["conda_source"])
        record = Record("conda", source, 0, name=source.split("[", 1)[0].split(" @ ", 1)[0].strip())
    elif "conda" in item or "pypi" in item:
        kind: Kind = "conda" if "conda" in item else "pypi"
        record = Record(kind, str(item[kind]), 0)
    else:
        kind = "pypi" if item.get("kind") == "pypi" or item.get("manager") in _PYPI_MANAGERS else "conda"
        record = Record(kind, str(item.get("url") or item.get("path") or ""), 0)
    for key in ("name", "version", "build"):
        if item.get(key) is not None:
            setattr(record, key, str(item[key]))
    return record


def from_yaml(data: Any, text: str, file: str, version: int) -> LockFile:
    if not isinstance(data, Mapping):
        raise LockError(
            f"{file} is not a pixi lock file",
            problems=[Problem(message="the document is not a mapping", file=file, line=1, fix=FIX)],
        )
    if version == 3:
        return _from_yaml_v3(data, text, file)
    records = _records_from_yaml(data.get("packages"), text, file)
    environments: dict[str, LockEnvironment] = {}
    for name, env in (data.get("environments") or {}).items():
        if not isinstance(env, Mapping):
            raise LockError(f"{file}: environment {name!r} is not a mapping", fix=FIX)
        channels = _channel_urls(env.get("channels"))
        packages: dict[str, tuple[LockedPackage, ...]] = {}
        for platform, entries in (env.get("packages") or {}).items():
            resolved = []
            for entry in entries or []:
                kind, location = _entry_kind(entry)
                record = records.get((kind, location))
                line = None if record else _line_of(text, location)  # only to point at a broken entry
                resolved.append(resolve(record, kind, location, line, file))
            packages[str(platform)] = tuple(resolved)
        environments[str(name)] = LockEnvironment(
            str(name), channels, tuple(str(i) for i in env.get("indexes") or ()), packages, _env_line(text, str(name))
        )
    return LockFile(file, version, platforms_from(data.get("platforms"), environments), environments)


def _channel_urls(raw: Any) -> tuple[str, ...]:
    return tuple(str(c.get("url") if isinstance(c, Mapping) else c) for c in raw or ())


def _entry_kind(entry: Any) -> tuple[Kind, str]:
    if isinstance(entry, Mapping):
        for key in ("conda", "conda_source", "pypi"):
            if key in entry:
                return ("pypi" if key == "pypi" else "conda"), str(entry[key])
    raise LockError(f"unexpected environment entry {entry!r}", fix=FIX)


def _from_yaml_v3(data: Mapping[str, Any], text: str, file: str) -> LockFile:
    """v3 has no environments: one ``package:`` list whose records carry their platform."""
    metadata = data.get("metadata") or {}
    channels = _channel_urls(metadata.get("channels"))
    grouped: dict[str, list[LockedPackage]] = {str(p): [] for p in metadata.get("platforms") or ()}
    start = max(text.find("\npackage:\n"), 0)
    for item in data.get("package") or []:
        if not isinstance(item, Mapping):
            raise LockError(f"{file}: a package record is not a mapping", fix=FIX)
        record = _record_from_mapping(item)
        record.line = _line_of(text, record.location, start) or 0
        start = max(start, text.find(record.location, start) + 1)  # records repeat a URL per platform
        package = resolve(record, record.kind, record.location, record.line, file)
        grouped.setdefault(str(item.get("platform")), []).append(package)
    env = LockEnvironment("default", channels, (), {k: tuple(v) for k, v in grouped.items()}, None)
    environments = {"default": env}
    return LockFile(file, 3, platforms_from(None, environments), environments)
