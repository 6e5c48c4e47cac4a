"""Where the real-world pixi corpus lives (shared/ beside the checkout) and what its absence means.

`.ci/run` sets ``SCROLLCASE_REQUIRE_CORPUS=1``: this project's CI always has shared/ beside the clone,
so a missing corpus there is an error.  Anywhere else, a plain GitHub checkout included (GitHub sets
``CI=true`` too), the corpus tests are skipped and say why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

REQUIRE = "SCROLLCASE_REQUIRE_CORPUS"
ROOT = Path(__file__).resolve().parents[3] / "shared" / "real-world" / "pixi"


def corpus_root(root: Path = ROOT, environ: Mapping[str, str] | None = None) -> Path:
    """``root``, after raising if it is missing while ``SCROLLCASE_REQUIRE_CORPUS`` is set."""
    env = os.environ if environ is None else environ
    if not root.is_dir() and env.get(REQUIRE, "") not in ("", "0"):
        raise RuntimeError(
            f"the real-world pixi corpus is missing at {root}, and {REQUIRE} is set "
            "(.ci/run sets it: this project's CI provides shared/ beside the clone)"
        )
    return root


def skip_without(root: Path) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not root.is_dir(),
        reason=f"real-world corpus not present at {root} "
        f"(shared/ beside the checkout; {REQUIRE}=1 makes this an error)",
    )
