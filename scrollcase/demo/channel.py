"""Writing conda packages and local channels with the standard library.

Used by the offline demo (a channel made from this machine's CPython and real wheels) and by the
tests (small synthetic channels).  Packages are ``.tar.bz2`` (conda's v1 format, which every conda
client reads) or ``.conda`` (v2: zstd inside a zip, which the demo uses because bz2 was two thirds
of its first run); :func:`index_channel` has py-rattler write ``repodata.json``.
"""

from __future__ import annotations

import bz2
import io
import json
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import zstandard

from scrollcase.errors import BuildError
from scrollcase.io import proc
from scrollcase.io.digest import sha256_bytes, sha256_text
from scrollcase.io.files import write_atomic

# conda's prefix placeholder convention: a 255-char path that install-time code replaces.
PREFIX_PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
_FIXED_MTIME = 1_700_000_000


@dataclass(frozen=True)
class PackageFile:
    """One file of a package: path relative to the prefix, content, and how it embeds the prefix."""

    path: str
    data: bytes
    mode: int = 0o644
    # "text" or "binary" when ``data`` embeds PREFIX_PLACEHOLDER and conda must rewrite it.
    prefix_mode: str | None = None
    symlink_to: str | None = None


@dataclass(frozen=True)
class PackageSpec:
    name: str
    version: str
    build: str = "0"
    build_number: int = 0
    subdir: str = "linux-64"
    depends: Sequence[str] = ()
    constrains: Sequence[str] = ()
    files: Sequence[PackageFile] = ()
    noarch: str | None = None
    license: str = "MIT"
    track_features: str = ""
    extra_index: Mapping[str, object] = field(default_factory=dict)
    # ".tar.bz2" (v1, every conda tool reads it) or ".conda" (v2: zstd inside a zip, ~10x faster to write)
    format: Literal[".tar.bz2", ".conda"] = ".tar.bz2"

    @property
    def stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"

    @property
    def filename(self) -> str:
        return self.stem + self.format


def _index_json(spec: PackageSpec) -> dict[str, object]:
    index: dict[str, object] = {
        "name": spec.name,
        "version": spec.version,
        "build": spec.build,
        "build_number": spec.build_number,
        "depends": list(spec.depends),
        "constrains": list(spec.constrains),
        "license": spec.license,
        "subdir": spec.subdir,
        "timestamp": _FIXED_MTIME * 1000,
    }
    if spec.noarch:
        index["noarch"] = spec.noarch
    if spec.track_features:
        index["track_features"] = spec.track_features
    index.update(spec.extra_index)
    return index


def _paths_json(files: Iterable[PackageFile]) -> dict[str, object]:
    entries: list[dict[str, object]] = []
    for f in files:
        if f.symlink_to is not None:
            entries.append(
                {
                    "_path": f.path,
                    "path_type": "softlink",
                    "sha256": sha256_text(f.symlink_to),
                    "size_in_bytes": 0,
                }
            )
            continue
        entry: dict[str, object] = {
            "_path": f.path,
            "path_type": "hardlink",
            "sha256": sha256_bytes(f.data),
            "size_in_bytes": len(f.data),
        }
        if f.prefix_mode:
            entry["file_mode"] = f.prefix_mode
            entry["prefix_placeholder"] = PREFIX_PLACEHOLDER
        entries.append(entry)
    return {"paths": entries, "paths_version": 1}


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, _FIXED_MTIME
    tar.addfile(info, io.BytesIO(data))


def _add_payload(tar: tarfile.TarFile, spec: PackageSpec) -> None:
    for f in sorted(spec.files, key=lambda f: f.path):
        if f.symlink_to is not None:
            info = tarfile.TarInfo(f.path)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, f.symlink_to, _FIXED_MTIME
            tar.addfile(info)
        else:
            _add(tar, f.path, f.data, f.mode)


def _tar(spec: PackageSpec, *parts: Callable[[tarfile.TarFile, PackageSpec], None]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for add in parts:
            add(tar, spec)
    return raw.getvalue()


def _add_info(tar: tarfile.TarFile, spec: PackageSpec) -> None:
    _add(tar, "info/index.json", json.dumps(_index_json(spec), indent=2, sort_keys=True).encode())
    _add(tar, "info/paths.json", json.dumps(_paths_json(spec.files), indent=2).encode())
    listing = "".join(f.path + "\n" for f in sorted(spec.files, key=lambda f: f.path))
    _add(tar, "info/files", listing.encode())
    prefix_files = [f for f in spec.files if f.prefix_mode]
    if prefix_files:
        lines = "".join(f"{PREFIX_PLACEHOLDER} {f.prefix_mode} {f.path}\n" for f in prefix_files)
        _add(tar, "info/has_prefix", lines.encode())


def package_bytes(spec: PackageSpec) -> bytes:
    """The package for ``spec`` in its format, byte-for-byte reproducible."""
    if spec.format == ".conda":
        return _conda_bytes(spec)
    return bz2.compress(_tar(spec, _add_payload, _add_info), 9)


def _conda_bytes(spec: PackageSpec) -> bytes:
    """conda's v2 format: a stored zip of metadata.json, ``info-*.tar.zst`` and ``pkg-*.tar.zst``."""
    compress = zstandard.ZstdCompressor(level=3).compress  # single-threaded: same bytes everywhere
    members = {
        "metadata.json": json.dumps({"conda_pkg_format_version": 2}).encode(),
        f"info-{spec.stem}.tar.zst": compress(_tar(spec, _add_info)),
        f"pkg-{spec.stem}.tar.zst": compress(_tar(spec, _add_payload)),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def write_package(channel: Path, spec: PackageSpec) -> Path:
    """Write ``spec`` into ``channel/<subdir>/`` (temp file, then rename) and return its path."""
    subdir = "noarch" if spec.noarch else spec.subdir
    return write_atomic(channel / subdir / spec.filename, package_bytes(spec))


# Runs in a child that ends with os._exit: py-rattler 0.28's indexer leaves worker threads that can
# crash CPython's finalisation (SIGSEGV / "PyGILState_Release" aborts in about one run of four), which
# would turn a successful caller — pytest included — into a failed exit status.
_INDEX_CODE = """
import asyncio, os, sys
from rattler.index import index_fs
asyncio.run(index_fs(sys.argv[1], force=True, write_zst=False, write_shards=False))
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def index_channel(channel: Path, subdirs: Iterable[str] = ("noarch",)) -> None:
    """Write repodata.json for every subdir of ``channel`` (py-rattler's indexer, in a child process)."""
    wanted = sorted({*subdirs, "noarch"})
    for subdir in wanted:
        (channel / subdir).mkdir(parents=True, exist_ok=True)
    done = proc.run([sys.executable, "-c", _INDEX_CODE, str(channel)], timeout=None)
    missing = [s for s in wanted if not (channel / s / "repodata.json").is_file()]
    if done.returncode != 0 or missing:
        raise BuildError(
            f"indexing the local channel {channel} failed (missing repodata for {missing or 'none'})",
            fix=f"check the packages in it: {done.stderr.strip()[-2000:]}",
        )
