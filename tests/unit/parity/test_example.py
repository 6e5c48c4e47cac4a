"""The example recipes' checks/parity.py are copies of one source, scrollcase/data/parity_example.py.

A recipe folder must stay self-contained (no symlinks, which break on Windows checkouts, no ``..``), so
the copies are real files; this test fails as soon as one drifts from the source.  Refresh them with
``python scripts/sync-parity-examples``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]


def _sync_script() -> ModuleType:
    path = REPO / "scripts" / "sync-parity-examples"
    loader = importlib.machinery.SourceFileLoader("sync_parity_examples", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _text(path: Path) -> bytes:
    return path.read_bytes().replace(b"\r\n", b"\n")  # a Windows checkout may turn LF into CRLF


def test_every_example_parity_script_is_a_copy_of_the_source() -> None:
    sync = _sync_script()
    copies = sync.copies()
    assert len(copies) >= 5 and all(p.name == "parity.py" and p.parent.name == "checks" for p in copies)
    source = _text(sync.SOURCE)
    differ = [p.relative_to(REPO).as_posix() for p in copies if not p.is_file() or _text(p) != source]
    assert differ == [], "run `python scripts/sync-parity-examples` to refresh: " + ", ".join(differ)


def test_the_sync_script_finds_recipes_that_name_the_script(tmp_path: Path) -> None:
    sync = _sync_script()
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / "recipe.json").write_text('{"parity": {"script": "checks/parity.py"}}')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "recipe.json").write_text('{"parity": {"script": "checks/own.py"}}')
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "recipe.json").write_text("{}")
    found = sync.copies(tmp_path)
    assert found == [tmp_path / "named" / "checks" / "parity.py"]
    assert sync.stale(b"x", found) == found  # missing counts as stale
