"""lock-check over 100 recipes with real-size (~1 MB) locks.  Target: under 3 s in all.

Each recipe gets a copy of the real array-api-extra lock (v7, 1.08 MB, 15 environments, 7 platforms)
adapted to it: its ``tests-cuda`` environment (pytorch cuda129 + cuda-version 12.9 on platform
``p1`` = linux-64 with ``__cuda``) becomes ``default``, and the recipe targets
linux-x86_64-cuda12.9 with a pixi.toml that pins exactly that.  Run:

    python benchmarks/bench_lockcheck.py [N]
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))

from scrollcase.cli import main  # noqa: E402
from scrollcase.lock.read import parse_lock  # noqa: E402
from tests.integration.lock_channel_kit import recipe_json  # noqa: E402

SOURCE = Path("/work/shared/real-world/pixi/data-apis__array-api-extra/pixi.lock")
TARGET_BUDGET_S = 3.0

MANIFEST = """\
[workspace]
name = "{rid}"
channels = ["https://prefix.dev/conda-forge"]
platforms = ["linux-64"]

[system-requirements]
cuda = "12.9"

[dependencies]
python = "3.14.*"
pytorch = {{ version = "2.*", build = "cuda*" }}
cuda-version = "12.9.*"
"""


def adapted_lock() -> str:
    text = SOURCE.read_text(encoding="utf-8")
    return text.replace("\n  default:\n", "\n  default-upstream:\n", 1).replace(
        "\n  tests-cuda:\n", "\n  default:\n", 1
    )


def make_recipes(root: Path, count: int) -> int:
    lock = adapted_lock()
    for i in range(count):
        rid = f"bench{i:03d}-linux-x86_64-cuda12.9"
        folder = root / "recipes" / rid
        folder.mkdir(parents=True)
        (folder / "recipe.json").write_text(
            recipe_json(rid, "cuda", "12.9").replace('"boxId": "demo"', f'"boxId": "bench{i:03d}"')
        )
        (folder / "pixi.toml").write_text(MANIFEST.format(rid=rid))
        (folder / "pixi.lock").write_text(lock)
    return len(lock.encode())


def timed(fn: object, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def main_bench(count: int) -> int:
    import os

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        size = make_recipes(root, count)
        os.chdir(root)
        out = io.StringIO()

        def lock_check() -> None:
            with redirect_stdout(out):
                code = main(["lock-check", "--json", "--quiet"])
            assert code == 0, out.getvalue()[-2000:]

        total = timed(lock_check)
        doc = json.loads(out.getvalue().split("\n}\n")[-2] + "\n}") if False else None
        text = SOURCE.read_text(encoding="utf-8")
        one_scan = timed(lambda: parse_lock(text, "x", environments={"default"}), 10)
        full_scan = timed(lambda: parse_lock(text, "x"), 5)
        full_yaml = timed(lambda: parse_lock(text, "x", fast=False), 1)
    del doc
    rows = [
        ("recipes", f"{count}"),
        ("lock size", f"{size / 1e6:.2f} MB each, {count * size / 1e6:.0f} MB total"),
        ("lock-check, all recipes (best of 3)", f"{total:.2f} s"),
        ("per recipe", f"{1000 * total / count:.1f} ms"),
        ("parse one lock, one environment", f"{1000 * one_scan:.1f} ms"),
        ("parse one lock, all 15 environments", f"{1000 * full_scan:.1f} ms"),
        ("parse one lock, full YAML reader", f"{1000 * full_yaml:.1f} ms"),
        ("target", f"< {TARGET_BUDGET_S:.1f} s -> {'OK' if total < TARGET_BUDGET_S else 'MISSED'}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 30}")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main_bench(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
