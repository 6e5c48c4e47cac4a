"""The archive bytes, pinned: a small synthetic box tree packed by the real packer must give one sha256.

Any change to the tar headers, the member order, the normalisation or the zstd parameters changes the
digest and fails here, so a restructuring of the packer cannot change the archive bytes unnoticed.  If
the bytes are meant to change, the box format changes: say so in the commit and update the constant.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from scrollcase.format.archive.pack import pack_tree

SYNTHETIC_BOX_SHA256 = "ed215b5c5888362b0eb0966d592777422a0adc32b71e0b43a293bb10501e598b"


def _synthetic_box(root: Path) -> Path:
    """Files, dirs (one empty), relative symlinks (one with a target over 100 bytes), an executable,
    names over 100 bytes (one needing pax, one fitting the ustar prefix), a non-ASCII name, a hardlinked
    pair (the packer has no hardlink members: it stores both as regular files) and a box.json."""
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    python = root / "venv" / "bin" / "python3.11"
    python.write_bytes(b"\x7fELF" + bytes(range(256)) * 12)
    python.chmod(0o700)
    (root / "venv" / "bin" / "python").symlink_to("python3.11")
    os_py = root / "venv" / "lib" / "python3.11" / "os.py"
    os_py.write_text("import sys\n" * 100)
    os_py.chmod(0o600)
    long_name = "deep/" * 12 + "w" * 110 + ".bin"  # > 100 bytes as a whole and in its last part
    (root / "model-cache" / long_name).parent.mkdir(parents=True)
    (root / "model-cache" / long_name).write_bytes(bytes(range(256)) * 40)
    (root / "model-cache" / long_name).with_name("n" * 60 + ".txt").write_text("split into ustar prefix + name")
    (root / "venv" / "weights").symlink_to(f"../model-cache/{long_name}")  # link target > 100 bytes: pax
    (root / "model-cache" / "ünïcode.txt").write_text("x")
    (root / "empty").mkdir()
    (root / "venv" / "lib" / "python3.11" / "site-packages" / "a.pth").write_text("import a\n")
    os.link(root / "venv" / "lib" / "python3.11" / "site-packages" / "a.pth", root / "venv" / "same.pth")
    (root / "box.json").write_text('{"schemaVersion": 1, "boxId": "pin"}\n')
    return root


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks and hardlinks need a POSIX tree")
def test_synthetic_box_archive_bytes_are_pinned(tmp_path: Path) -> None:
    result = pack_tree(_synthetic_box(tmp_path / "box"), tmp_path / "pin.tar.zst")
    assert result.sha256 == SYNTHETIC_BOX_SHA256
