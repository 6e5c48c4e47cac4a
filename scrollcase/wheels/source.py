"""PyPI wheels a pixi lock pins for the target: checked against the lock's sha256, installed with
pypa/installer into the box's environment.

pixi installs these with uv after the conda packages; a box must hold them too, or it would import
fine on the build machine's PATH and fail on the host.  Planning (:func:`plan_wheels`) is pure; every
wheel is fetched into a cache keyed by its sha256 and verified before anything is installed, and
each is installed as though the environment lived at the relocation placeholder (script shebangs
name the placeholder interpreter, which unpacking rewrites like any conda entry point).
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast

from scrollcase.errors import BuildError, IntegrityError, Problem
from scrollcase.format.layout import BoxLayout
from scrollcase.io.cache import WHEEL_CACHE
from scrollcase.io.digest import sha256_file
from scrollcase.io.fetch import fetching
from scrollcase.io.files import replacing

if TYPE_CHECKING:  # assets pulls in the release models: 0.1 s of every install's start
    from scrollcase.io.fetch import Fetcher

LauncherKind = Literal["posix", "win-amd64", "win-arm64"]


@dataclass(frozen=True)
class LockedWheel:
    """A PyPI package as the lock records it: ``location`` is a URL or a path relative to the lock."""

    name: str
    version: str
    location: str
    sha256: str | None


@dataclass(frozen=True)
class WheelSource:
    """A wheel to install: fetched from ``url`` (https or file) and checked against ``sha256``."""

    name: str
    version: str
    url: str
    filename: str
    sha256: str

    @property
    def key(self) -> str:
        """Where the lock's record of this wheel sits, as problems name it."""
        return f"packages.pypi.{self.name}"

    def problem(self, message: str, fix: str, value: str | None = None) -> Problem:
        """A problem with this wheel (``value``: the file or URL concerned; its URL by default)."""
        return Problem(message=message, key=self.key, value=self.url if value is None else value, fix=fix)


def locked_wheels(lock_path: Path, subdir: str, environment: str = "default") -> list[LockedWheel]:
    """The PyPI packages the lock holds for ``subdir`` (rattler reads the lock)."""
    from rattler import LockFile

    env = LockFile.from_path(lock_path).environment(environment)
    if env is None:
        return []
    for platform in env.platforms():
        if str(platform.subdir) == subdir:  # v7 platforms have names ("p1") beside their subdir
            return [_locked(p) for p in env.pypi_packages_for_platform(platform) or []]
    return []


def _locked(package: Any) -> LockedWheel:
    try:
        sha = package.hashes.sha256 if package.hashes is not None else None
    except AttributeError:  # rattler 0.28's hash wrapper raises when the lock records no hash at all
        sha = None
    digest = sha.hex() if isinstance(sha, bytes | bytearray) else sha
    return LockedWheel(str(package.name), str(package.version), str(package.location), digest or None)


def plan_wheels(locked: Sequence[LockedWheel], lock_path: Path, subdir: str) -> list[WheelSource]:
    """Where each wheel comes from; every package that is not a hash-pinned wheel is a problem."""
    sources: list[WheelSource] = []
    problems: list[Problem] = []
    for package in locked:
        url = _resolve(package.location, lock_path.parent)
        filename = urllib.parse.unquote(PurePosixPath(urllib.parse.urlsplit(url).path).name)
        unusable = _unusable(package, filename)
        if unusable is not None:
            message, fix = unusable
            key = f"packages.pypi.{package.name}"
            problems.append(Problem(message=message, file=str(lock_path), key=key, value=package.location, fix=fix))
        elif package.sha256:  # always, once usable (says so to the type checker)
            sources.append(WheelSource(package.name, package.version, url, filename, package.sha256))
    if problems:
        raise BuildError(
            f"{len(problems)} PyPI package(s) in {lock_path} cannot be installed into a box for {subdir}",
            problems=problems,
        )
    return sources


def _unusable(package: LockedWheel, filename: str) -> tuple[str, str] | None:
    """Why a locked package cannot be installed as a checked wheel (message, fix); None when it can."""
    if not filename.endswith(".whl"):
        return (
            f"{package.name} {package.version} is locked as a source distribution, git URL or folder, not a wheel",
            "lock a wheel for it (build one and point pixi at it), or use the conda-forge package",
        )
    if not package.sha256:
        return (
            f"{package.name} {package.version}: the lock records no sha256 "
            "(pixi records none for wheels given by path)",
            "host the wheel at an https URL or an index so the lock pins its sha256, or use the conda-forge package",
        )
    return None


def _resolve(location: str, lock_dir: Path) -> str:
    """An absolute URL for a lock location (a URL, or a path relative to the lock's folder)."""
    if urllib.parse.urlsplit(location).scheme in ("http", "https", "file", "s3"):
        return location
    return (lock_dir / location).resolve().as_uri()


# ------------------------------------------------------------------------------------------ executors


def fetch_wheel(
    source: WheelSource, cache: Path, fetchers: Mapping[str, Fetcher], on_bytes: Callable[[int], None] | None = None
) -> Path:
    """The wheel file, verified against the lock: local files are checked in place, others downloaded
    into ``cache/<sha256>/`` once (``on_bytes`` is told each chunk that arrives)."""
    parts = urllib.parse.urlsplit(source.url)
    if parts.scheme == "file":
        path = Path(urllib.request.url2pathname(parts.path))
        if not path.is_file():
            missing = source.problem(
                "the lock points to a file that does not exist", "restore the wheel, or re-lock", str(path)
            )
            raise BuildError(f"wheel {source.filename} is missing", problems=[missing])
        _verify(path, source)
        return path
    done = WHEEL_CACHE.entry(cache, source.sha256) / source.filename
    if done.is_file():
        if sha256_file(done)[0] == source.sha256:
            WHEEL_CACHE.touch(done.parent)  # used: an age prune (`scrollcase cache prune`) keeps it
            return done
        done.unlink()  # a damaged cache entry is fetched again, never trusted
    fetcher = fetchers.get(parts.scheme)
    if fetcher is None:
        fix = "build where that index is reachable, or lock wheels from https or file://"
        problem = source.problem(f"{source.filename} needs a {parts.scheme} client", fix)
        raise BuildError(f"no way to fetch {parts.scheme}:// wheels here", problems=[problem])
    with replacing(done) as part:
        _download(fetcher, source, part, on_bytes)
        _verify(part, source)  # wrong bytes are never kept in the cache
    return done


def _download(fetcher: Fetcher, source: WheelSource, part: Path, on_bytes: Callable[[int], None] | None) -> None:
    what = f"downloading wheel {source.filename} failed"
    fix = "check the network (or the index URL in the lock) and rerun the build"
    with fetching(what, source.key, source.url, fix), part.open("xb") as out:
        fetcher(source.url, cast("BinaryIO", _Counted(out, on_bytes)) if on_bytes else out, 0)


class _Counted:
    """A file being downloaded into, telling a progress meter every chunk written (fetchers only write)."""

    def __init__(self, out: BinaryIO, on_bytes: Callable[[int], None]) -> None:
        self.out, self.on_bytes = out, on_bytes

    def write(self, data: Any) -> int:
        written = self.out.write(data)
        self.on_bytes(written)
        return written


def _verify(path: Path, source: WheelSource) -> None:
    got = sha256_file(path)[0]
    if got != source.sha256:
        fix = "re-lock against the wheel you build from, or restore the original file"
        problem = source.problem(f"sha256 {got}, the lock says {source.sha256}", fix, str(path))
        raise IntegrityError(f"wheel {source.filename} does not match the lock", problems=[problem])


def scheme_for(layout: BoxLayout, env: Path) -> dict[str, str]:
    """The install scheme of the box's environment at ``env`` (installer's keys)."""
    site = env / layout.site_packages.relative_to(layout.env_dir)
    include = "Include" if layout.windows else f"include/python{layout.python_version}"
    return {
        "purelib": str(site),
        "platlib": str(site),
        "scripts": str(env / layout.scripts_dir.name),
        "data": str(env),
        "headers": str(env / include),
    }


def script_kind(layout: BoxLayout, arch: str) -> LauncherKind:
    """installer's launcher kind: shebang scripts on POSIX, .exe launchers on Windows."""
    if not layout.windows:
        return "posix"
    return "win-arm64" if arch in ("aarch64", "arm64") else "win-amd64"


def plain_shebang(script: bytes, interpreter: str) -> bytes:
    """A POSIX script from installer with its first line(s) replaced by ``#!interpreter``.

    For a long interpreter path installer writes a ``/bin/sh`` trampoline with the path unquoted,
    which breaks once unpacking puts a space into it; conda's entry points carry the plain
    placeholder shebang instead, and :mod:`scrollcase.format.relocate` turns that into whatever works at
    the box's final path.  Wheel scripts get the same treatment.
    """
    trampoline_end = b"\n' '''\n"
    if script.startswith(b"#!/bin/sh\n'''exec' ") and trampoline_end in script:
        body = script.split(trampoline_end, 1)[1]
    else:
        body = script.split(b"\n", 1)[1]
    return b"#!" + interpreter.encode() + b"\n" + body
