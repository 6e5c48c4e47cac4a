"""A PEP 503 "simple" index on disk (``file://``), so uv resolves real wheels without a network."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path


def make_index(root: Path, wheels: Iterable[Path]) -> str:
    """``root/simple/<project>/index.html`` linking each wheel with its sha256; returns the index URL."""
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        projects.setdefault(project, []).append(wheel)
    for project, files in projects.items():
        links = "".join(
            f'<a href="{w.resolve().as_uri()}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
            for w in files
        )
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return (root / "simple").resolve().as_uri()
