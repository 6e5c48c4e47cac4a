"""Where each JSON path sits in a JSON text: line and column of every key and value.

Built only when a file has problems to report, so valid files pay nothing.  One regex pass over the
tokens of an already-parsed (hence well-formed) document; no recursion, so deep nesting is fine.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field

JsonPath = tuple[str | int, ...]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)


@dataclass
class _Frame:
    path: JsonPath
    is_object: bool
    expect_key: bool = True
    pending: JsonPath = ()
    index: int = 0


@dataclass
class PositionMap:
    """Offsets of keys and values by JSON path, convertible to 1-based (line, column)."""

    text: str
    keys: dict[JsonPath, int] = field(default_factory=dict)
    values: dict[JsonPath, int] = field(default_factory=dict)
    duplicates: list[tuple[JsonPath, int]] = field(default_factory=list)
    _newlines: list[int] = field(default_factory=list)

    def line_col(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_left(self._newlines, offset)
        start = self._newlines[line - 1] + 1 if line else 0
        return line + 1, offset - start + 1

    def value_at(self, path: JsonPath) -> tuple[int, int] | None:
        """Position of the value at ``path``, or of its nearest existing ancestor."""
        for depth in range(len(path), -1, -1):
            offset = self.values.get(path[:depth])
            if offset is not None:
                return self.line_col(offset)
        return None

    def key_at(self, path: JsonPath) -> tuple[int, int] | None:
        """Position of the key that ends ``path`` (falls back to the value, then ancestors)."""
        offset = self.keys.get(path)
        return self.line_col(offset) if offset is not None else self.value_at(path)


def position_map(text: str) -> PositionMap:
    """Scan well-formed JSON ``text`` once and record where every path's key and value start."""
    result = PositionMap(text=text, _newlines=[m.start() for m in re.finditer("\n", text)])
    stack: list[_Frame] = []
    for match in _TOKEN.finditer(text):
        token, offset = match.group(), match.start()
        top = stack[-1] if stack else None
        first = token[0]
        if top is not None and top.is_object and top.expect_key and first == '"':
            path = (*top.path, json.loads(token))
            if path in result.keys:
                result.duplicates.append((path, offset))
            result.keys[path] = offset
            top.pending, top.expect_key = path, False
            continue
        if first == ":":
            continue
        if first == ",":
            if top is not None and top.is_object:
                top.expect_key = True
            elif top is not None:
                top.index += 1
            continue
        if first in "}]":
            stack.pop()
            continue
        path = () if top is None else top.pending if top.is_object else (*top.path, top.index)
        result.values[path] = offset
        if first in "{[":
            stack.append(_Frame(path=path, is_object=first == "{"))
    return result


def has_duplicate_keys(text: str) -> bool:
    """True when any object in ``text`` repeats a key (JSON allows it; recipes must not)."""
    found = False

    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal found
        if not found and len({k for k, _ in pairs}) != len(pairs):
            found = True
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return found


def render_path(path: JsonPath) -> str:
    """``("assets", 0, "sha256")`` -> ``assets[0].sha256``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
