"""Time the stages of a real box build (the demo recipe: this machine's CPython + numpy).

    python benchmarks/bench_build.py [--runs 3]

Prints one row per run: channel (first run only), lock, each build stage, verify, archive size.
Targets (on 2 cores): whole demo under 60 s cold; a warm rebuild (package cache filled) under 15 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrollcase.build.pipeline import STAGES, execute_build
from scrollcase.build.plan import locked_install, plan_build
from scrollcase.build.verify import verify_release
from scrollcase.demo.run import DEMO_CHANNEL_NAME, demo_target, make_demo_channel, write_demo_recipe
from scrollcase.io.fetch import default_fetchers
from scrollcase.lock import solve as engine
from scrollcase.recipe.loader import resolve_recipe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    target = demo_target()
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        root = Path(tmp)
        start = time.monotonic()
        channel = make_demo_channel(root / "channel", target.subdir)
        channel_s = time.monotonic() - start
        state = root / "state"  # shared: runs after the first use a warm package cache
        header = ["run", "lock", *STAGES, "verify", "total", "MB", "sha256"]
        print(f"channel: {channel_s:.1f}s")
        print(" | ".join(f"{h:>9}" for h in header))
        for run in range(1, args.runs + 1):
            work = root / f"run{run}"
            recipe_dir = resolve_recipe(str(write_demo_recipe(work / "recipes", target, work / "assets")))
            t0 = time.monotonic()
            engine.lock_recipe(recipe_dir, channel_overrides={DEMO_CHANNEL_NAME: channel.as_uri()})
            lock_s = time.monotonic() - t0
            plan = plan_build(recipe_dir, out_dir=work / "dist", state_dir=state)
            result = execute_build(plan, locked=locked_install(plan), fetchers=default_fetchers())
            t1 = time.monotonic()
            verify_release(result.release, self_test=True)
            verify_s = time.monotonic() - t1
            total = time.monotonic() - t0
            archive = result.manifest.archive
            stages = [f"{result.timings[s]:.2f}" for s in STAGES]
            row = [
                str(run),
                f"{lock_s:.2f}",
                *stages,
                f"{verify_s:.2f}",
                f"{total:.2f}",
                f"{archive.size / 1e6:.1f}",
                archive.sha256[:9],
            ]
            print(" | ".join(f"{c:>9}" for c in row))


if __name__ == "__main__":
    main()
