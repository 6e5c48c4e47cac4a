"""``Requires-Dist`` and ``Requires-Python`` of resolved wheels, for lock records as pixi writes them.

uv's ``pylock.toml`` gives each wheel's URL, size and sha256 but not its metadata.  Indexes serve the
wheel's ``METADATA`` beside it (PEP 658: ``<wheel URL>.metadata``), a few KB instead of the wheel; a
``file://`` wheel is read in place; a wheel whose index has no metadata file is downloaded into the wheel
cache the build uses anyway.  Answers are cached by the wheel's sha256, so a re-lock fetches nothing.
"""

from __future__ import annotations

import email.parser
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from scrollcase.errors import RECIPE_ID, Problem, SolveError
from scrollcase.io.files import write_atomic
from scrollcase.pypi.resolve import ResolvedWheel

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
        cached = cache / f"{wheel.sha256}.METADATA"
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
