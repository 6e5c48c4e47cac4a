"""PyPI records in a pixi lock, written as pixi writes them.  Pure text transformation.

py-rattler 0.28 writes a PyPI package as ``- pypi: URL`` with ``name`` and ``version`` only; pixi also
records ``sha256``, ``index`` (for a package from its own index), ``requires_dist`` and
``requires_python``, and lists the environment's ``indexes``.  rattler reads all of them back, so the
lock it wrote is completed here line by line, keeping rattler's order and layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import yaml

from scrollcase.errors import LockError


@dataclass(frozen=True)
class PypiLock:
    """What the PyPI resolution adds to a lock: the indexes and each wheel with its metadata."""

    indexes: tuple[str, ...]
    wheels: Sequence[Any]  # scrollcase.pypi.resolve.ResolvedWheel
    metadata: Mapping[str, Any]  # sha256 -> scrollcase.pypi.metadata.WheelMetadata


def record_fields(wheel: Any, metadata: Any | None) -> list[str]:
    """The lines pixi writes after ``version:`` for one wheel (two-space indented YAML)."""
    fields: dict[str, Any] = {"sha256": wheel.sha256}
    if wheel.index:
        fields["index"] = wheel.index
    if metadata is not None and metadata.requires_dist:
        fields["requires_dist"] = list(metadata.requires_dist)
    if metadata is not None and metadata.requires_python:
        fields["requires_python"] = metadata.requires_python
    text = yaml.safe_dump(fields, sort_keys=False, default_flow_style=False, width=10_000, allow_unicode=True)
    return ["  " + line for line in text.splitlines()]


def _insert_indexes(lines: list[str], environment: str, indexes: Sequence[str]) -> list[str]:
    """``indexes:`` after the environment's channels, before its ``packages:``."""
    out: list[str] = []
    in_env = False
    for line in lines:
        if line == f"  {environment}:":
            in_env = True
        elif in_env and line == "    packages:":
            out += ["    indexes:", *(f"    - {url}" for url in indexes)]
            in_env = False
        out.append(line)
    return out


def add_pypi_fields(text: str, pypi: PypiLock, environment: str) -> str:
    """``text`` (a lock rattler wrote) with every PyPI record completed as pixi writes it."""
    by_url = {unquote(w.url): w for w in pypi.wheels}
    lines = _insert_indexes(text.splitlines(), environment, pypi.indexes)
    out: list[str] = []
    pending: Any | None = None
    done: set[str] = set()
    for line in lines:
        out.append(line)
        if line.startswith("- pypi: "):
            pending = by_url.get(unquote(line.removeprefix("- pypi: ").strip()))
        elif pending is not None and line.startswith("  version: "):
            out += record_fields(pending, pypi.metadata.get(pending.sha256))
            done.add(unquote(pending.url))
            pending = None
    missing = sorted(set(by_url) - done)
    if missing:
        raise LockError(
            f"the lock writer did not write {len(missing)} PyPI record(s) as expected: {missing[0]}",
            fix="report this with the recipe; py-rattler's lock layout changed",
        )
    return "\n".join(out) + "\n"
