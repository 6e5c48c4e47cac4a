"""`scrollcase matrix` over 1,000 generated recipes: target under 1 s.

Run: python benchmarks/bench_matrix.py [COUNT]
Prints the in-process time (read + validate every recipe.json, plan the matrix) and the wall time of
the whole command in a fresh interpreter (including Python start-up and imports).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrollcase.commands.matrix import _load_entries  # noqa: E402
from scrollcase.github.matrix import plan_matrix  # noqa: E402
from tests.github_helpers import write_recipe  # noqa: E402

TARGETS = (
    "linux-x86_64-cpu",
    "linux-x86_64-cuda12.4",
    "windows-x86_64-cpu",
    "windows-x86_64-cuda12.4",
    "osx-arm64-metal",
)
TARGET_SECONDS = 1.0


def generate(root: Path, count: int) -> None:
    for i in range(count):
        write_recipe(root, f"box{i // len(TARGETS):04d}", TARGETS[i % len(TARGETS)])


def best_of(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        recipes = Path(tmp) / "recipes"
        generate(recipes, count)
        # GitHub's 256-job limit applies to the result, so plan with the limit lifted for the benchmark.
        in_process = best_of(5, lambda: plan_matrix(_load_entries(recipes, None), max_jobs=10**9))
        command = [
            sys.executable,
            "-m",
            "scrollcase",
            "matrix",
            "--recipes",
            str(recipes),
            "--changed-since",
            "0" * 40,
            "--json",
        ]
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        changed = [f"recipes/box{i:04d}-linux-x86_64-cpu/pixi.lock" for i in range(50)]
        selected = best_of(5, lambda: plan_matrix(_load_entries(recipes, None), changed=changed))
        subprocess.run(command, env=env, capture_output=True, check=False)  # warm the file cache
        wall = best_of(3, lambda: subprocess.run(command, env=env, capture_output=True, check=False))
    rows = [
        (f"read+validate+plan {count} recipes (all)", in_process),
        (f"read+validate+plan {count} recipes (50 changed)", selected),
        ("`scrollcase matrix` CLI, fresh interpreter (exit 12: >256 jobs)", wall),
    ]
    print(f"{'case':<66} {'seconds':>8}  target")
    for name, seconds in rows:
        verdict = "ok" if seconds < TARGET_SECONDS else "SLOW"
        print(f"{name:<66} {seconds:>8.3f}  < {TARGET_SECONDS:.1f} s {verdict}")
    return 0 if in_process < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
