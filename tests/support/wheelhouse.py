"""An offline wheelhouse repacked from this venv's installed distributions.

Workflows run under act install scrollcase (and, in ci.yml's lint job, its test extras) with pip, as a
runner would.  There is no network in those runs, so pip gets ``PIP_NO_INDEX`` and ``PIP_FIND_LINKS``
pointing here: one wheel per installed distribution that scrollcase's requirements reach, rebuilt
from the files its RECORD lists (scripts under ``.data/scripts``, fresh RECORD hashes, the original
WHEEL tags).  Nothing is installed into or changed in this venv.
"""

from __future__ import annotations

import base64
import hashlib
import re
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIST_INFO = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def requirements(extras: Iterable[str] = ()) -> list[Requirement]:
    """scrollcase's own requirements (from pyproject.toml, not the possibly stale installed metadata)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        found += [Requirement(r) for r in project["optional-dependencies"][extra]]
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    return found + [Requirement(r) for r in build]


def closure(roots: Iterable[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution ``roots`` need here, by canonical name."""
    found: dict[str, metadata.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = list(roots)
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(f"{req} is not installed in {sys.prefix}: pip install -e '.[test]'") from None
        found[name] = dist
        for text in dist.requires or []:
            dep = Requirement(text)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in (*req.extras, "")):
                dep.marker = None
                todo.append(dep)
    return found


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _tags(wheel_text: str) -> str:
    """``py3-none-any`` or the compressed form of several ``Tag:`` lines."""
    parts: list[list[str]] = [[], [], []]
    for line in wheel_text.splitlines():
        if line.startswith("Tag:"):
            for i, part in enumerate(line.split(":", 1)[1].strip().split("-")):
                if part not in parts[i]:
                    parts[i].append(part)
    return "-".join(".".join(p) for p in parts) if parts[0] else "py3-none-any"


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """One installed distribution as a wheel in ``folder``."""
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    version = dist.version
    info = dist._path  # type: ignore[attr-defined]  # the .dist-info folder
    site = Path(info).parent
    prefix = Path(sys.prefix)
    scripts = {ep.name for ep in dist.entry_points if ep.group in ("console_scripts", "gui_scripts")}
    data_dir = f"{name}-{version}.data"
    wheel_text = (Path(info) / "WHEEL").read_text(encoding="utf-8")
    path = folder / f"{name}-{version}-{_tags(wheel_text)}.whl"
    record: list[str] = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as wheel:
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file))).resolve()
            if "__pycache__" in file.parts or not source.is_file():
                continue
            if file.parts[0] == "..":
                relative = source.relative_to(prefix)
                if relative.parts[0] == "bin":
                    if relative.name in scripts:
                        continue  # pip writes console scripts from entry_points.txt
                    member = f"{data_dir}/scripts/{relative.name}"
                else:
                    member = f"{data_dir}/data/{relative.as_posix()}"
            else:
                member = source.relative_to(site).as_posix()
                if member.startswith(Path(info).name + "/") and file.name in SKIPPED_DIST_INFO:
                    continue
            data = source.read_bytes()
            info_zip = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            info_zip.external_attr = (source.stat().st_mode & 0o777 | 0o100000) << 16
            wheel.writestr(info_zip, data)
            record.append(f"{member},{_hash(data)},{len(data)}")
        record_name = f"{Path(info).name}/RECORD"
        record.append(f"{record_name},,")
        wheel.writestr(record_name, "\n".join(record) + "\n")
    return path


def build_wheelhouse(folder: Path, extras: Iterable[str] = ("test",)) -> list[Path]:
    """Wheels for scrollcase's requirements (and ``extras``), minus scrollcase itself."""
    folder.mkdir(parents=True, exist_ok=True)
    dists = closure(requirements(extras))
    dists.pop("scrollcase", None)
    return [repack(dist, folder) for dist in dists.values()]
