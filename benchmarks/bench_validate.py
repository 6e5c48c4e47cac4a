"""How long does `scrollcase validate` take for 1,000 recipes?  Target: under 2 s.

    python benchmarks/bench_validate.py [--count N]

Generates N valid recipe folders (every field, all five example targets in turn) plus a tenth of them
broken, into a temporary directory, then times validation in-process (the library path `validate`
uses) and through the real CLI in a subprocess.  Prints a results table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrollcase.commands.validate import targets_to_check, validate_paths  # noqa: E402

TARGET_SECONDS = 2.0


def generate(root: Path, count: int, broken_every: int = 0) -> None:
    examples = sorted((REPO / "recipes").glob("*/recipe.json"))
    templates = [json.loads(p.read_text(encoding="utf-8")) for p in examples]
    manifests = [(p.parent / "pixi.toml").read_text(encoding="utf-8") for p in examples]
    for i in range(count):
        data = dict(templates[i % len(templates)])
        target = data["recipeId"].removeprefix(data["boxId"] + "-")  # tiny-mlp-, torch-mlp-, ...
        data["boxId"] = f"model-{i:05d}"
        data["recipeId"] = f"model-{i:05d}-{target}"
        if broken_every and i % broken_every == 0:
            data["version"] = "1.0"  # not semver: exercises the problem path (positions, rendering)
        folder = root / "recipes" / data["recipeId"]
        (folder / "checks").mkdir(parents=True)
        (folder / "recipe.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        (folder / "pixi.toml").write_text(manifests[i % len(manifests)], encoding="utf-8")
        (folder / "checks" / "parity.py").write_text("# bench\n", encoding="utf-8")


def in_process(root: Path) -> tuple[float, int, int]:
    start = time.perf_counter()
    outcomes = validate_paths(targets_to_check([], root / "recipes"))
    elapsed = time.perf_counter() - start
    return elapsed, len(outcomes), sum(not o.ok for o in outcomes)


def via_cli(root: Path) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "validate", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - start, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    for label, broken_every in (("all valid", 0), ("10% broken", 10)):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            generate(root, args.count, broken_every)
            seconds, n, failed = in_process(root)
            cli_seconds, code = via_cli(root)
            rows.append((label, n, failed, seconds, cli_seconds, code))
    head = ("case", "recipes", "failed", "in-process s", "per recipe ms", "CLI s", "exit")
    print(f"{head[0]:<12} {head[1]:>8} {head[2]:>7} {head[3]:>13} {head[4]:>14} {head[5]:>7} {head[6]:>5}")
    for label, n, failed, seconds, cli_seconds, code in rows:
        per_recipe = seconds / n * 1000
        timings = f"{seconds:>13.3f} {per_recipe:>14.3f} {cli_seconds:>7.3f}"
        print(f"{label:<12} {n:>8} {failed:>7} {timings} {code:>5}")
    worst = max(row[4] for row in rows)
    verdict = "PASS" if worst < TARGET_SECONDS else "OVER"
    goal = f"{args.count} recipes through the CLI under {TARGET_SECONDS:.1f} s"
    print(f"target: {goal} -> {verdict} ({worst:.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
