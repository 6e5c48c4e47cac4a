"""PyPI records in a pixi lock, written as pixi writes them.  Pure text transformation.

py-rattler 0.28 writes a PyPI package as ``- pypi: URL`` with ``name`` and ``version`` only; pixi also
records ``sha256``, ``index`` (for a package from its own index), ``requires_dist`` and
``requires_python``, and lists the environment's ``indexes``.  rattler reads all of them back, so the
lock it wrote is completed here line by line, keeping rattler's order and layout.
"""

from __future__ import annotations

import email.parser
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from scrollcase.errors import RECIPE_ID, LockError, Problem, SolveError
from scrollcase.io.cache import METADATA_CACHE
from scrollcase.io.files import write_atomic
from scrollcase.lock.resolve import ResolvedWheel


@dataclass(frozen=True)
class PypiLock:
    """What the PyPI resolution adds to a lock: the indexes and each wheel with its metadata."""

    indexes: tuple[str, ...]
    wheels: Sequence[Any]  # scrollcase.lock.resolve.ResolvedWheel
    metadata: Mapping[str, Any]  # sha256 -> scrollcase.lock.pypi_records.WheelMetadata


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


FETCH_TIMEOUT = 60.0
WORKERS = 8


@dataclass(frozen=True)
class WheelMetadata:
    requires_dist: tuple[str, ...]
    requires_python: str | None


def pixi_requirement(text: str) -> str:
    """A Requires-Dist entry as pixi writes it: ``name[extra]>=1.0 ; marker == 'x'`` (PEP 508, normalised)."""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return text.strip()
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    head = req.name + extras + (f" @ {req.url}" if req.url else str(req.specifier))
    return head + (f" ; {str(req.marker).replace(chr(34), chr(39))}" if req.marker else "")


def parse_metadata(text: str) -> WheelMetadata:
    """The two fields pixi records, from a core-metadata (RFC 822) document."""
    message = email.parser.HeaderParser().parsestr(text)
    requires = tuple(pixi_requirement(r) for r in message.get_all("Requires-Dist") or ())
    return WheelMetadata(requires, message.get("Requires-Python"))


def metadata_from_wheel(path: Path) -> str:
    """The ``*.dist-info/METADATA`` inside a wheel file."""
    with zipfile.ZipFile(path) as wheel:
        names = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if not names:
            raise SolveError(f"{path.name} has no .dist-info/METADATA", fix="the wheel is broken: re-publish it")
        return wheel.read(names[0]).decode("utf-8", "replace")


def _http_get(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "scrollcase"})  # noqa: S310 - http(s) only
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:  # noqa: S310
        data: bytes = response.read()
        return data


def fetch_metadata_text(
    wheel: ResolvedWheel, download: Callable[[ResolvedWheel], Path], get: Callable[[str], bytes] = _http_get
) -> str:
    """The wheel's METADATA: in place for ``file://``, PEP 658 for indexes, else the wheel itself."""
    parts = urllib.parse.urlsplit(wheel.url)
    if parts.scheme == "file":
        return metadata_from_wheel(Path(urllib.request.url2pathname(parts.path)))
    try:
        return get(wheel.url + ".metadata").decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        if exc.code not in (403, 404):
            raise
    return metadata_from_wheel(download(wheel))


def wheel_metadata(
    wheels: Sequence[ResolvedWheel],
    cache: Path,
    download: Callable[[ResolvedWheel], Path],
    get: Callable[[str], bytes] = _http_get,
) -> dict[str, WheelMetadata]:
    """sha256 -> metadata of every wheel (fetched in parallel, cached under ``cache``)."""

    def one(wheel: ResolvedWheel) -> tuple[str, WheelMetadata]:
        cached = METADATA_CACHE.entry(cache, wheel.sha256)
        if cached.is_file():
            return wheel.sha256, parse_metadata(cached.read_text(encoding="utf-8"))
        try:
            text = fetch_metadata_text(wheel, download, get)
        except (OSError, urllib.error.URLError) as exc:
            raise SolveError(
                f"cannot read the metadata of {wheel.name} {wheel.version}",
                problems=[
                    Problem(
                        message=str(exc),
                        key=f"packages.pypi.{wheel.name}",
                        value=wheel.url,
                        fix=f"check the network or the index, then run `scrollcase lock {RECIPE_ID}` again",
                    )
                ],
            ) from None
        write_atomic(cached, text.encode("utf-8"))
        return wheel.sha256, parse_metadata(text)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(pool.map(one, wheels))
