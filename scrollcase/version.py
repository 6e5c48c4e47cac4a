"""scrollcase's own version, read from the installed distribution once, when first asked for.

importlib.metadata costs ~0.1 s, so nothing asks at import time; a source tree that was never installed
says ``0+unknown``.  The version comes from the git tag at install time (docs/releasing.md).
"""

from __future__ import annotations

from functools import cache


@cache
def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~0.1 s: only when asked

    try:
        return version("scrollcase")
    except PackageNotFoundError:
        return "0+unknown"
