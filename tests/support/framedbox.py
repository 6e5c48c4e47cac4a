"""A small box tree shaped like a real one: conda packages (conda-meta records), wheels (RECORD),
bytecode, a model cache and a box.json, for the framed-archive tests.  ``version`` changes one package."""

from __future__ import annotations

import json
import random
from pathlib import Path

SITE = "venv/lib/python3.11/site-packages"


def _conda(root: Path, name: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / "venv" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    meta = root / "venv" / "conda-meta" / f"{name}.json"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"name": name.split("-")[0], "files": sorted(files)}))


def _wheel(root: Path, dist: str, files: dict[str, bytes]) -> None:
    site = root / SITE
    rows = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(f"{rel},,{len(data)}")
    info = site / f"{dist}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Name: {dist}\n")
    rows += [f"{dist}.dist-info/METADATA,,", f"{dist}.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def make_framed_box(root: Path, *, version: str = "1.0.0", payload: int = 200_000, packages: int = 4) -> Path:
    """The tree; package ``pkg0`` holds ``version`` in its files, so two versions differ there (and in box.json)
    only; the other packages hold seeded pseudo-random bytes (incompressible, the same in every tree)."""
    _conda(root, "python-3.11.7-h0_0", {"bin/python3.11": b"\x7fELF" + bytes(range(256)) * 64})
    (root / "venv" / "bin" / "python3.11").chmod(0o755)
    (root / "venv" / "bin" / "python").symlink_to("python3.11")
    for i in range(packages):
        body = (f"VERSION = {version!r}\n" if i == 0 else "") + f"# package {i}\n" * 50
        blob = random.Random(i).randbytes(payload) if i else (version.encode() * payload)[:payload]
        _wheel(root, f"pkg{i}-1.0", {f"pkg{i}/__init__.py": body.encode(), f"pkg{i}/data.bin": blob})
        cache = root / SITE / f"pkg{i}" / "__pycache__"
        cache.mkdir()
        (cache / "__init__.cpython-311.pyc").write_bytes(b"pyc" + body.encode())
    (root / "venv" / "generated.txt").write_text("made at build time\n")
    (root / "model-cache" / "org" / "model").mkdir(parents=True)
    (root / "model-cache" / "org" / "model" / "weights.bin").write_bytes(bytes(range(256)) * 100)
    (root / "box.json").write_text(
        json.dumps({"boxId": "framed", "version": version, "modelCacheSubdir": "model-cache"})
    )
    return root
