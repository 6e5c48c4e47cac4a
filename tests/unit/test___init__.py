"""The library API (scrollcase/__init__.py): every name is its module's own object, imported on first use,
and the names mypy sees (the TYPE_CHECKING block) are exactly the ones served lazily."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import scrollcase

ROOT = Path(__file__).resolve().parents[2]


def test_every_api_name_is_its_modules_own_object() -> None:
    from scrollcase import install_box, upgrade_box, verify_installed  # the import docs/install.md shows

    assert install_box.__module__ == "scrollcase.client.install"
    assert upgrade_box.__module__ == "scrollcase.client.upgrade"
    assert verify_installed.__module__ == "scrollcase.format.receipt"
    for name in sorted(set(scrollcase.__all__) - {"__version__"}):
        assert getattr(scrollcase, name) is getattr(importlib.import_module(scrollcase._API[name]), name)
        assert getattr(scrollcase, name).__doc__, f"{name} has no docstring"
    assert isinstance(scrollcase.__version__, str)
    assert set(scrollcase.__all__) <= set(dir(scrollcase))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'install'"):
        scrollcase.install  # noqa: B018
    assert not hasattr(scrollcase, "nope")


def test_the_type_checking_block_names_what_is_served_lazily() -> None:
    """mypy and IDEs read the TYPE_CHECKING imports; the CLI and host apps get _API's: the same names from
    the same modules, and __all__ lists them all."""
    tree = ast.parse((ROOT / "scrollcase" / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {a.name: n.module for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert typed == scrollcase._API
    assert sorted(scrollcase.__all__) == sorted([*scrollcase._API, "__version__"])


def test_importing_the_package_imports_none_of_it() -> None:
    code = "import sys, scrollcase\nprint(sorted(m for m in sys.modules if m.startswith('scrollcase.')))\n"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
