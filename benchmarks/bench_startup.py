"""How long does scrollcase take to start?  Target: `scrollcase --version` within 8x `python -I -c pass`.

    python benchmarks/bench_startup.py [--rounds N]

Side by side in one run, each a fresh process as a user or a CI step starts it: the bare interpreter
(`python -I -c pass`, the venv's own python), `scrollcase --version` (the installed console script) and
`scrollcase validate` of one example recipe (recipes/tiny-mlp-linux-x86_64-cpu, cwd the repository).  Every
round runs the three in turn, the order rotating, so a load spike hits all of them alike.  Prints each
one's best and median, and their ratios to the bare interpreter (best vs best, median vs median); writes
JSON to benchmarks/results/bench_startup-<utc>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = "recipes/tiny-mlp-linux-x86_64-cpu"
TARGET_RATIO = 8.0


def scrollcase_command() -> list[str]:
    """The console script beside this interpreter (what `scrollcase` runs), else `python -m scrollcase`."""
    script = Path(sys.executable).with_name("scrollcase.exe" if os.name == "nt" else "scrollcase")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "scrollcase"]


def contenders() -> dict[str, list[str]]:
    scrollcase = scrollcase_command()
    return {
        "python -I -c pass": [sys.executable, "-I", "-c", "pass"],
        "scrollcase --version": [*scrollcase, "--version"],
        f"scrollcase validate {RECIPE}": [*scrollcase, "validate", RECIPE],
    }


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    return seconds


def measure(rounds: int) -> dict[str, list[float]]:
    commands = contenders()
    names = list(commands)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm the page cache and .pyc files: the first start of each is not a round
        timed(commands[name])
    for n in range(rounds):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            times[name].append(timed(commands[name]))
    return times


def report(times: dict[str, list[float]]) -> tuple[list[str], dict[str, object]]:
    base_name, version_name = list(times)[:2]
    base_best, base_median = min(times[base_name]), statistics.median(times[base_name])
    lines = [f"{'command':<52} {'best ms':>8} {'median ms':>10} {'x python best':>14} {'x python median':>16}"]
    summary: dict[str, dict[str, float]] = {}
    for name, values in times.items():
        best, median = min(values), statistics.median(values)
        ratios = (best / base_best, median / base_median)
        lines.append(f"{name:<52} {best * 1e3:>8.1f} {median * 1e3:>10.1f} {ratios[0]:>14.2f} {ratios[1]:>16.2f}")
        summary[name] = {"best": best, "median": median, "ratioBest": ratios[0], "ratioMedian": ratios[1]}
    met = summary[version_name]["ratioMedian"] <= TARGET_RATIO
    verdict = "met" if met else "NOT met"
    lines.append(f"target: {version_name} <= {TARGET_RATIO:g}x {base_name} (medians): {verdict}")
    return lines, {"rounds": len(times[base_name]), "times": times, "summary": summary, "met": met}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    lines, results = report(measure(args.rounds))
    print("\n".join(lines))
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results["python"] = sys.version.split()[0]
    (out_dir / f"bench_startup-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0 if results["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
