"""Wheel install benchmark: scrollcase's installer vs `uv pip install --offline --no-deps`, same wheels.

    python benchmarks/bench_install.py [--rounds 3] [--workdir /tmp/scrollcase-bench-install]
                                       [--wheel PATH ...] [--uv PATH] [--workers N] [--skip-warm] [--only TEXT]

The wheels: by default the CUDA 12.4 torch 2.6.0 box's 23 wheels (2.8 GB, 5.1 GB / 14,000 files installed)
from scrollcase's wheel cache (``~/.cache/scrollcase/wheels/<sha256>/``, filled by building that box), or
any ``--wheel`` files.  Contenders, all offline, each into a fresh destination:

  scrollcase, cold cache      what a box's first build does: every wheel unpacked into a fresh
                              unpacked-wheel cache (each member checked against RECORD as it is
                              written, wheels in parallel threads), then hard-linked into the env
  uv, cold cache              a fresh --cache-dir per run: uv unzips every wheel (into its cache, then
                              links) — the same inflating work (uv checks no RECORD hashes)
  scrollcase, warm copies     a rebuild from a filled cache, files copied (``link="copy"``)
  uv, warm copies             --link-mode copy from a cache filled beforehand
  scrollcase, warm hardlinks  a rebuild from a filled cache: hard links (the default)
  uv, warm hardlinks          uv's Linux default from its filled cache: hard links

Each scrollcase contender's speed-up is given against the uv contender doing the same work.
Rounds alternate the contenders and flip their order every round; before each run its setup (a fresh venv
for uv, untimed), then ``sync`` so that the previous run's dirty pages are not written on this run's clock;
after it its files are deleted, synced, and --settle seconds pass (ext4 looks past recently deleted inodes
when it allocates new ones: up to 12% of a run's CPU right after 5 GB were deleted).
Each run is a child process, timed from outside (interpreter start included), its peak RSS read with
``resource.getrusage(RUSAGE_CHILDREN)`` in a wrapper process.  Prints medians (and every run), the per-round
speed-ups, peak RSS; writes JSON to benchmarks/results/bench_install-<utc>.json.
Needs ~4 x the installed size free under --workdir; its scratch folder there is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from scrollcase.io.digest import sha256_file

REPO = Path(__file__).resolve().parents[1]
WHEEL_CACHE = Path.home() / ".cache" / "scrollcase" / "wheels"
TORCH_BOX = (  # torch 2.6.0 for CUDA 12.4 from PyPI, as `scrollcase lock` pins it for Linux x86_64
    "filelock-4.3.1-py3-none-any.whl",
    "fsspec-2026.9.0-py3-none-any.whl",
    "jinja2-3.1.6-py3-none-any.whl",
    "markupsafe-3.0.4-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
    "mpmath-1.3.0-py3-none-any.whl",
    "networkx-3.6.1-py3-none-any.whl",
    "nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cuda_cupti_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cuda_nvrtc_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cufft_cu12-11.2.1.3-py3-none-manylinux2014_x86_64.whl",
    "nvidia_curand_cu12-10.3.5.147-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cusolver_cu12-11.6.1.9-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cusparse_cu12-12.3.1.170-py3-none-manylinux2014_x86_64.whl",
    "nvidia_cusparselt_cu12-0.6.2-py3-none-manylinux2014_x86_64.whl",
    "nvidia_nccl_cu12-2.21.5-py3-none-manylinux2014_x86_64.whl",
    "nvidia_nvjitlink_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "nvidia_nvtx_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
    "sympy-1.13.1-py3-none-any.whl",
    "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
    "triton-3.2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "typing_extensions-4.16.0-py3-none-any.whl",
)

TIMED_CHILD = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - start
if done.returncode:
    sys.exit(done.stderr[-3000:] or f"exit {done.returncode}")
print(json.dumps({"seconds": seconds, "rssKiB": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""

SCROLLCASE_JOB = """
import json, os, sys, time
from pathlib import Path
from scrollcase.format.layout import box_layout
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER
from scrollcase.wheels.cache import WheelCache, fill_all
from scrollcase.wheels.install import install_wheels
dest, workers, cache_dir, mode, *pairs = sys.argv[1:]
wheels = [(Path(p.split("=")[0]), p.split("=")[1]) for p in pairs]  # the build knows each sha256 from the lock
start = time.perf_counter()  # what a build's install stage pays: its process has started and imported
cache = WheelCache(Path(cache_dir))
if mode == "cold":
    got = fill_all(cache, wheels, workers=int(workers) or None)
    unpacked = [got[sha] for _, sha in wheels]
else:
    loaded = cache.load_all([sha for _, sha in wheels])  # as build.install_locked looks the wheels up
    unpacked = [loaded[sha] for _, sha in wheels]  # KeyError: the warm cache is not filled
install_wheels(unpacked, box_layout("venv/bin/python", "linux", "3.11", "m"), Path(dest),
               placeholder=BOX_PREFIX_PLACEHOLDER + "/venv", arch="x86_64", workers=int(workers) or None,
               link="copy" if mode == "copy" else "hardlink")
Path(os.environ["BENCH_STAGE_FILE"]).write_text(json.dumps({"stageSeconds": time.perf_counter() - start}))
"""


def default_wheels() -> list[Path]:
    found = {p.name: p for p in WHEEL_CACHE.glob("*/*.whl")}
    missing = [name for name in TORCH_BOX if name not in found]
    if missing:
        raise SystemExit(
            f"{len(missing)} of the torch box's wheels are not in {WHEEL_CACHE} (build the "
            f"torch-mlp-linux-x86_64-cuda12.4 recipe once, or pass --wheel): {missing[:3]} ..."
        )
    return [found[name] for name in TORCH_BOX]


def timed(argv: Sequence[str]) -> dict[str, float]:
    """Wall seconds and peak RSS (MiB) of one command, measured by a wrapper process."""
    with tempfile.TemporaryDirectory() as scratch:
        stage_file = Path(scratch) / "stage.json"
        env = {**os.environ, "PYTHONPATH": str(REPO), "BENCH_STAGE_FILE": str(stage_file)}
        done = subprocess.run([sys.executable, "-c", TIMED_CHILD, *argv], env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{argv[0]} failed:\n{done.stderr}")
        data = json.loads(done.stdout)
        result = {"seconds": float(data["seconds"]), "rssMiB": data["rssKiB"] / 1024}
        if stage_file.exists():  # scrollcase's jobs: the install stage alone, as a build runs it
            result["stageSeconds"] = float(json.loads(stage_file.read_text())["stageSeconds"])
        return result


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def fresh_venv(path: Path) -> Path:
    fresh(path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


Setup = Callable[[], list[str]]  # prepares a fresh destination (untimed), returns the command to time


def contenders(
    work: Path, wheels: list[Path], digests: list[str], uv: Path, workers: int, warm: bool
) -> dict[str, Setup]:
    names = [str(w) for w in wheels]
    pairs = [f"{w}={d}" for w, d in zip(wheels, digests, strict=True)]
    uv_install = [str(uv), "pip", "install", "--offline", "--no-deps", "--quiet"]

    def scrollcase(dest: str, cache: Path, mode: str) -> list[str]:
        return [
            sys.executable,
            "-c",
            SCROLLCASE_JOB,
            str(fresh(work / dest) / "venv"),
            str(workers),
            str(cache),
            mode,
            *pairs,
        ]

    out: dict[str, Setup] = {
        "scrollcase, cold cache": lambda: scrollcase("sc", fresh(work / "sc-cold-cache"), "cold"),
        "uv, cold cache": lambda: [
            *uv_install,
            "--cache-dir",
            str(fresh(work / "uv-cold-cache")),
            "--python",
            str(fresh_venv(work / "uv-cold")),
            *names,
        ],
    }
    if warm:
        out["scrollcase, warm copies"] = lambda: scrollcase("sc", work / "sc-warm-cache", "copy")
        out["uv, warm copies"] = lambda: uv_warm(uv_install, work, "copy", names)
        out["scrollcase, warm hardlinks"] = lambda: scrollcase("sc", work / "sc-warm-cache", "hardlink")
        out["uv, warm hardlinks"] = lambda: uv_warm(uv_install, work, "hardlink", names)
    return out


PAIRS = {  # scrollcase's contender -> uv's doing the same work
    "scrollcase, cold cache": "uv, cold cache",
    "scrollcase, warm copies": "uv, warm copies",
    "scrollcase, warm hardlinks": "uv, warm hardlinks",
}


def uv_warm(uv_install: list[str], work: Path, mode: str, names: list[str]) -> list[str]:
    python = fresh_venv(work / f"uv-warm-{mode}")
    return [
        *uv_install,
        "--cache-dir",
        str(work / "uv-warm-cache"),
        "--link-mode",
        mode,
        "--python",
        str(python),
        *names,
    ]


def fill_scrollcase_cache(cache: Path, wheels: list[Path], digests: list[str], workers: int) -> None:
    """scrollcase's unpacked-wheel cache, as the first build of the box leaves it (untimed)."""
    pairs = [f"{w}={d}" for w, d in zip(wheels, digests, strict=True)]
    scratch = fresh(cache.parent / "sc-fill")
    argv = [sys.executable, "-c", SCROLLCASE_JOB, str(scratch / "venv"), str(workers), str(cache), "cold", *pairs]
    subprocess.run(argv, env={**os.environ, "PYTHONPATH": str(REPO), "BENCH_STAGE_FILE": os.devnull}, check=True)
    fresh(scratch)


def cleanup(work: Path) -> None:
    """Drop every destination (untimed) so the disk holds one install per contender at most."""
    for name in ("sc", "sc-cold-cache", "uv-cold", "uv-cold-cache", "uv-warm-copy", "uv-warm-hardlink"):
        fresh(work / name)


def run_rounds(work: Path, runs: dict[str, Setup], rounds: int, settle: float) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    for round_number in range(rounds):
        order = list(runs.items())
        for name, setup in order if round_number % 2 == 0 else reversed(order):
            argv = setup()
            os.sync()
            results[name].append(timed(argv))
            print(f"  round {round_number + 1} {name:20} {results[name][-1]['seconds']:6.1f} s", flush=True)
            cleanup(work)
            os.sync()
            time.sleep(settle)  # ext4 skips inodes deleted in the last seconds when it creates files
    return results


def summary(results: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, object]]:
    table: dict[str, dict[str, object]] = {}
    for name, runs in results.items():
        seconds = [r["seconds"] for r in runs]
        row: dict[str, object] = {
            "medianSeconds": round(statistics.median(seconds), 2),
            "rounds": [round(s, 2) for s in seconds],
            "peakRssMiB": round(max(r["rssMiB"] for r in runs), 1),
        }
        stages = [r["stageSeconds"] for r in runs if "stageSeconds" in r]
        if stages:
            row["stageMedianSeconds"] = round(statistics.median(stages), 2)
        rival = PAIRS.get(name)
        if rival in results:
            theirs = [r["seconds"] for r in results[rival]]
            row["speedupOverUv"] = speedup(seconds, theirs, rival)
            if len(stages) == len(theirs):
                row["stageSpeedupOverUv"] = speedup(stages, theirs, rival)
        table[name] = row
    return table


def speedup(ours: list[float], theirs: list[float], rival: str) -> dict[str, object]:
    ratios = sorted(t / o for o, t in zip(ours, theirs, strict=True))
    return {
        "against": rival,
        "roundMedian": round(statistics.median(ratios), 2),
        "roundMin": round(ratios[0], 2),
        "roundMax": round(ratios[-1], 2),
    }


def report(table: dict[str, dict[str, object]]) -> str:
    header = (
        f"{'contender':27} {'median s':>9} {'stage s':>8} {'peak RSS MiB':>13}  {'speed-up over uv: process, stage':34}"
    )
    lines = [header + "  runs"]
    for name, row in table.items():
        text = ""
        for key in ("speedupOverUv", "stageSpeedupOverUv"):
            speed = row.get(key)
            if isinstance(speed, dict):
                text += f"{speed['roundMedian']}x ({speed['roundMin']}-{speed['roundMax']}) "
        stage = row.get("stageMedianSeconds", "")
        lines.append(
            f"{name:27} {row['medianSeconds']:9.2f} {stage!s:>8} {row['peakRssMiB']:13.1f}  {text:34}  {row['rounds']}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-install"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wheel", type=Path, action="append", default=None, help="a wheel to install (repeat)")
    parser.add_argument("--uv", type=Path, default=Path(sys.executable).parent / "uv")
    parser.add_argument("--workers", type=int, default=0, help="scrollcase's install threads (0: one per core)")
    parser.add_argument("--skip-warm", action="store_true", help="only scrollcase and uv with a cold cache")
    parser.add_argument("--only", default="", help="run only the contenders whose names contain this, e.g. hardlinks")
    parser.add_argument("--settle", type=float, default=6.0, help="seconds to wait after deleting a run's files")
    args = parser.parse_args()
    wheels = args.wheel or default_wheels()
    args.workdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-install-", dir=args.workdir))  # only this is removed at the end
    size = sum(w.stat().st_size for w in wheels)
    digests = [sha256_file(w)[0] for w in wheels]
    print(f"{len(wheels)} wheels, {size / 1e9:.2f} GB; {os.cpu_count()} cores; workdir {work}", flush=True)
    try:
        if not args.skip_warm:  # fill uv's warm cache once (untimed)
            subprocess.run(
                [
                    str(args.uv),
                    "pip",
                    "install",
                    "--offline",
                    "--no-deps",
                    "--quiet",
                    "--cache-dir",
                    str(work / "uv-warm-cache"),
                    "--python",
                    str(fresh_venv(work / "uv-fill")),
                    *map(str, wheels),
                ],
                check=True,
            )
            fresh(work / "uv-fill")
            fill_scrollcase_cache(work / "sc-warm-cache", wheels, digests, args.workers)
        runs = contenders(work, wheels, digests, args.uv, args.workers, not args.skip_warm)
        runs = {name: setup for name, setup in runs.items() if args.only in name}
        table = summary(run_rounds(work, runs, args.rounds, args.settle))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(table))
    results = {
        "wheels": [w.name for w in wheels],
        "wheelBytes": size,
        "contenders": table,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
        },
    }
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out_dir / f"bench_install-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
