"""Small, real wheels written with the standard library (for builds that install PyPI packages)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    console_scripts: dict[str, str] | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A pure-Python ``py3-none-any`` wheel holding ``files`` (paths relative to site-packages)."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    members = dict(files)
    requires_dist = "".join(f"Requires-Dist: {r}\n" for r in requires)
    members[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires_dist}"
    ).encode()
    members[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: scrollcase-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if console_scripts:
        lines = "".join(f"{script} = {target}\n" for script, target in console_scripts.items())
        members[f"{dist_info}/entry_points.txt"] = f"[console_scripts]\n{lines}".encode()
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in members.items())
    members[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in members.items():
            wheel.writestr(member, data)
    return path
