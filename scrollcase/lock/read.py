"""Reading pixi.lock files (format versions 3 to 7) into one frozen model, with line numbers.

Two readers produce the same :class:`~scrollcase.lock.model.LockFile`, one module each:

* :mod:`scrollcase.lock.scan`, a fast scanner for the layout pixi and rattler write (v4+), so a
  1 MB lock reads in milliseconds (lock-check runs over every recipe on each PR);
* :mod:`scrollcase.lock.yamlread`, a general reader on the full YAML document, used for v3 and
  whenever the scanner meets a layout it does not expect (hand edits, other writers).  It is also
  what reports YAML syntax errors with their line.

This module picks the reader (:func:`parse_lock`) and reads the file; the model and the parts both
readers share are :mod:`scrollcase.lock.model` (re-exported here, where callers import them).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from scrollcase.errors import RECIPE_ID, LockError, Problem
from scrollcase.io.files import ReadErrors, read_text
from scrollcase.lock.model import (
    FIX,
    Kind,
    LockedPackage,
    LockEnvironment,
    LockFile,
    LockPlatform,
    load_yaml,
    name_from_location,
    normalize_name,
)
from scrollcase.lock.scan import LayoutError, scan
from scrollcase.lock.yamlread import from_yaml

__all__ = [
    "SUPPORTED_VERSIONS",
    "Kind",
    "LockEnvironment",
    "LockFile",
    "LockPlatform",
    "LockedPackage",
    "load_lock",
    "name_from_location",
    "normalize_name",
    "parse_lock",
    "read_lock_text",
    "read_version",
]

SUPPORTED_VERSIONS = (3, 4, 5, 6, 7)


def read_version(text: str, file: str) -> int:
    match = re.search(r"^version:\s*['\"]?(\d+)['\"]?\s*$", text[:4096], re.MULTILINE)
    if match is None:
        load_yaml(text, file)  # an invalid document is reported as such, with its line
        raise LockError(
            f"{file} is not a pixi lock file",
            problems=[Problem(message="no top-level `version:` key", file=file, line=1, key="version", fix=FIX)],
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
                    fix=FIX,
                )
            ],
        )
    return version


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
            return scan(text, file, version, environments)
        except LayoutError:
            pass  # not the canonical layout: let the YAML reader decide (and report syntax errors)
    return from_yaml(load_yaml(text, file), text, file, version)


_READ_LOCK = ReadErrors(
    LockError,
    missing_problem="the recipe has no committed lock",
    missing_fix=f"run `scrollcase lock {RECIPE_ID}` and commit pixi.lock",
    not_utf8="{path} is not UTF-8 text",
    not_utf8_fix=FIX,
)


def read_lock_text(path: Path) -> str:
    """The text of a lock file, or LockError saying why it cannot be read."""
    return read_text(path, _READ_LOCK)


def load_lock(path: Path) -> LockFile:
    return parse_lock(read_lock_text(path), file=str(path))
