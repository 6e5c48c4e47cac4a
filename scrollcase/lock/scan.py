"""The fast pixi.lock scanner (v4+), for the layout pixi and rattler write.

It reads the small header with PyYAML's CSafeLoader and walks the large ``environments``/``packages``
sections line by line, so a 1 MB lock reads in milliseconds (lock-check runs over every recipe on each
PR).  It raises :class:`LayoutError` on any layout it does not expect (hand edits, other writers) and
the YAML reader (:mod:`scrollcase.lock.yamlread`) takes over.  Its contract: for every lock it accepts
it gives the same :class:`~scrollcase.lock.model.LockFile` as the YAML reader (the fast-vs-full
tests in tests/unit/lock/test_read.py and tests/integration/test_real_world_locks.py), plus the line
of each environment entry.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from scrollcase.lock.model import (
    LockEnvironment,
    LockFile,
    LockPlatform,
    Record,
    load_yaml,
    platforms_from,
    resolve,
    scalar,
)


class LayoutError(Exception):
    """The fast scanner met something it does not expect; the YAML reader takes over."""


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


def _scan_records(text: str, start: int, end: int) -> dict[tuple[str, str], Record | _RawRecord]:
    """Every record under ``packages:`` by (kind, location), with its line and unparsed body.

    Records are split on ``\n- `` (C-speed); the few fields that name a package are read from a
    record's body only when an environment entry needs it (:func:`_named`), so the bulk of a lock
    (depends, hashes, licenses, records of other environments) is never parsed.
    """
    records: dict[tuple[str, str], Record | _RawRecord] = {}
    body = text[start:end]
    if not body.startswith("- "):
        raise LayoutError("packages: does not start with a record")
    line = text.count("\n", 0, start) + 1
    for chunk in body[2:].split("\n- "):
        head, _, rest = chunk.partition("\n")
        key, sep, value = head.partition(": ")
        if key in ("conda", "pypi") and value[:1] not in ("'", '"'):
            records[(key, value)] = (line, rest)
        elif not sep:
            raise LayoutError(f"record without a key at line {line}")
        else:
            record = _start_record(key, scalar(value), line)
            record.body = "\n" + rest
            if key == "kind":  # v4/v5: the location is a field
                _fill_record(record)
            records[(record.kind, record.location)] = record
        line += chunk.count("\n") + 1
    return records


def _fill_record(record: Record) -> None:
    rest, record.body = record.body, ""
    for key in ("kind", "url", "path", "name", "version", "build"):
        pos = rest.find(f"\n  {key}: ")
        if pos < 0:
            continue
        stop = rest.find("\n", pos + 1)
        value = scalar(rest[pos + len(key) + 5 : stop if stop >= 0 else len(rest)])
        if key == "kind":
            record.kind = "pypi" if value == "pypi" else "conda"
        elif key in ("url", "path"):
            record.location = record.location or value
        else:
            setattr(record, key, value)


def _named(records: dict[tuple[str, str], Record | _RawRecord], kind: str, location: str) -> Record | None:
    """The record of an environment entry with its naming fields read (once)."""
    found = records.get((kind, location))
    if found is None or isinstance(found, Record):
        if found is not None and found.body:
            _fill_record(found)
        return found
    line, rest = found
    record = Record("pypi" if kind == "pypi" else "conda", location, line, body="\n" + rest)
    _fill_record(record)
    records[(kind, location)] = record
    return record


def _start_record(key: str, value: str, line: int) -> Record:
    if key in ("conda", "pypi"):
        return Record("conda" if key == "conda" else "pypi", value, line)
    if key == "conda_source":
        return Record("conda", value, line, name=value.split("[", 1)[0].split(" @ ", 1)[0].strip())
    if key == "kind":
        return Record("pypi" if value == "pypi" else "conda", "", line)
    raise LayoutError(f"record starting with {key!r} at line {line}")


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
        raise LayoutError("no environment headers")
    envs: list[_EnvDraft] = []
    for i, header in enumerate(headers):
        name = scalar(header.group(1))
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
                raise LayoutError(f"package entry outside a platform at line {line}")
            kind, _, location = raw[8:].partition(": ")
            kind = "conda" if kind in ("conda", "conda_source") else kind
            if kind not in ("conda", "pypi"):
                raise LayoutError(f"unknown package kind at line {line}")
            draft.packages[platform].append((kind, scalar(location), line))
        elif raw.startswith("      ") and key == "packages":
            if not raw.endswith(":") or raw[6] == " ":
                raise LayoutError(f"unexpected platform line {line}")
            platform = scalar(raw[6:-1])
            draft.packages.setdefault(platform, [])
        elif raw.startswith("    - ") and key in ("channels", "indexes"):
            item = raw[6:]
            if key == "channels":
                if not item.startswith("url: "):
                    raise LayoutError(f"unexpected channel entry at line {line}")
                draft.channels.append(scalar(item[5:]))
            else:
                draft.indexes.append(scalar(item))
        elif raw.startswith("    ") and raw[4] != " " and raw.endswith(":"):
            key, platform = raw[4:-1], ""
        elif raw.startswith("    ") and raw[4] not in " -":
            # pixi writes an empty key inline (``channels: []``, ``packages: {}``); any other inline
            # value is not its layout, maybe not even YAML: the YAML reader decides and reports the line.
            name, _, value = raw[4:].partition(": ")
            if value not in ("[]", "{}"):
                raise LayoutError(f"inline value at line {line}")
            key, platform = name, ""
        elif not (raw.startswith("      ") or (raw.startswith("    ") and key != "packages")):
            raise LayoutError(f"unexpected line {line} in environments")


def scan(text: str, file: str, version: int, only: Collection[str] | None = None) -> LockFile:
    env_span = _section(text, "environments")
    pkg_span = _section(text, "packages")
    if env_span is None or pkg_span is None:
        raise LayoutError("missing environments or packages section")
    records = _scan_records(text, *pkg_span)
    environments: dict[str, LockEnvironment] = {}
    for draft in _scan_environments(text, *env_span, only):
        packages = {
            platform: tuple(
                resolve(_named(records, kind, loc), kind, loc, line, file)  # type: ignore[arg-type]
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
    return platforms_from(raw, envs)
