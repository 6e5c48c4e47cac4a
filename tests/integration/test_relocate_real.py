"""A real interpreter and a real script, packed under the placeholder, unpacked somewhere else
(short path, long path, path with spaces) and run through their shebangs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="shebangs are a POSIX feature")

SCRIPT = f"""#!{BOX_PREFIX_PLACEHOLDER}/venv/bin/python
import json, sys
print(json.dumps({{"exe": sys.executable, "args": sys.argv[1:], "data": open(sys.argv[1]).read()}}))
"""


def _box_tree(root: Path) -> Path:
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy2(os.path.realpath(sys._base_executable), bin_dir / "python")  # a real interpreter
    (bin_dir / "hello").write_text(SCRIPT)
    (bin_dir / "hello").chmod(0o755)
    (root / "venv" / "share").mkdir()
    (root / "venv" / "share" / "config.txt").write_text(f"root={BOX_PREFIX_PLACEHOLDER}/venv\n")
    (root / "venv" / "lib").mkdir()
    (root / "venv" / "lib" / "fake.so").write_bytes(
        b"\x7fELF\x00" + BOX_PREFIX_PLACEHOLDER.encode() + b"/venv/lib\x00rest"
    )
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(root, BOX_PREFIX_PLACEHOLDER))
    (root / "box.json").write_text(json.dumps({"relocation": info.model_dump()}))
    return root


@pytest.mark.parametrize("where", ["short", "long " + "x" * 80 + "/deeper", "with space/box"])
def test_script_runs_after_unpack_elsewhere(tmp_path: Path, where: str) -> None:
    tree = _box_tree(tmp_path / "tree")
    packed = pack_tree(tree, tmp_path / "box.tar.zst")
    dest = tmp_path / where
    result = unpack_archive(packed.path, dest, expected_size=packed.size, expected_sha256=packed.sha256)
    assert result.relocated_files == 3
    real = dest.resolve()
    config = real / "venv" / "share" / "config.txt"
    assert config.read_text() == f"root={real}/venv\n"
    done = subprocess.run(
        [str(real / "venv" / "bin" / "hello"), str(config)], capture_output=True, text=True, timeout=60, check=True
    )
    out = json.loads(done.stdout)
    assert Path(out["exe"]).resolve() == (real / "venv" / "bin" / "python").resolve()
    assert out["args"] == [str(config)]
    assert out["data"] == f"root={real}/venv\n"
    lib = (real / "venv" / "lib" / "fake.so").read_bytes()
    assert lib.startswith(b"\x7fELF\x00" + f"{real}/venv/lib".encode() + b"\x00")
    assert lib.endswith(b"\x00rest") and len(lib) == (tree / "venv" / "lib" / "fake.so").stat().st_size
    first_line = (real / "venv" / "bin" / "hello").read_bytes().split(b"\n")[0]
    long_or_spaced = len(f"#!{real}/venv/bin/python") > 127 or " " in str(real)
    assert (first_line == b"#!/bin/sh") == long_or_spaced
