"""Benchmark: the parity comparison of 1 GB of float32 outputs (per side), streamed in chunks.

Writes a reference and a candidate output set (several outputs, 1 GiB of float32 each side) to a
temp folder, as uncompressed .npz (what parity scripts write) and as folders of .npy (each written
by a child process), then compares each pair in a child process and reports wall time and the
child's peak RSS (os.wait4).
Target: < 10 s per comparison, with memory bounded (peak RSS far below the data size).

    python benchmarks/bench_parity.py [--gib 1.0] [--outputs 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 10.0
CHILD = """
import json, sys, time
from pathlib import Path
from scrollcase.parity.compare import compare_sets
from scrollcase.parity.outputs import open_outputs
from scrollcase.recipe.model import Tolerances
tol = Tolerances(absolute=1e-4, relative=1e-3, minimumCosine=0.9999)
start = time.perf_counter()
results = compare_sets(open_outputs(Path(sys.argv[1])), open_outputs(Path(sys.argv[2])), "cuda", tol)
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "passed": all(r.passed for r in results),
                  "elements": sum(r.elements or 0 for r in results)}))
"""


def arrays(gib: float, outputs: int, candidate: bool):  # type: ignore[no-untyped-def]
    per_output = int(gib * (1 << 30) / 4 / outputs)
    for i in range(outputs):
        values = np.random.default_rng(i).standard_normal(per_output, dtype=np.float32)
        if candidate:  # a realistic tiny disagreement: 1e-6 relative, like a GPU kernel
            values *= np.float32(1 + 1e-6)
        yield f"output{i}", values


def write_npz(path: Path, gib: float, outputs: int, candidate: bool) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, values in arrays(gib, outputs, candidate):
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, values)


def write_npy_dir(path: Path, gib: float, outputs: int, candidate: bool) -> None:
    path.mkdir()
    for name, values in arrays(gib, outputs, candidate):
        np.save(path / f"{name}.npy", values)


def compare_in_child(ref: Path, cand: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ref), str(cand)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"comparison child failed with exit code {child.returncode}")
    data: dict[str, float] = json.loads(out)
    data["wall"] = time.perf_counter() - start
    data["peak_rss_mib"] = usage.ru_maxrss / 1024  # Linux reports KiB
    return data


def write_in_child(path: Path, gib: float, outputs: int, candidate: bool) -> None:
    """Generate data in a separate process: a child's peak RSS includes its parent's at spawn, so
    the measuring parent must never hold the arrays itself."""
    args = [sys.executable, __file__, "--write", str(path), "--gib", str(gib), "--outputs", str(outputs)]
    subprocess.run(args + (["--candidate"] if candidate else []), check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="float32 data per side, GiB")
    parser.add_argument("--outputs", type=int, default=4, help="outputs the data is split into")
    parser.add_argument("--keep", type=Path, help="write the data here and keep it")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # internal: writer child
    parser.add_argument("--candidate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        writer = write_npz if args.write.suffix == ".npz" else write_npy_dir
        writer(args.write, args.gib, args.outputs, args.candidate)
        return 0
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-parity-"))
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for label, name in (("npz (stored, streamed)", "{}.npz"), ("npy folder (streamed)", "{}-npy")):
            ref, cand = root / name.format("ref"), root / name.format("cand")
            for path, candidate in ((ref, False), (cand, True)):
                if not path.exists():
                    write_in_child(path, args.gib, args.outputs, candidate)
            rows.append((label, compare_in_child(ref, cand)))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(
        f"parity comparison, {args.gib:g} GiB float32 per side in {args.outputs} outputs "
        f"(target < {TARGET_SECONDS:g} s, bounded memory); load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    print(f"{'format':<24} {'compare s':>9} {'wall s':>7} {'GiB/s':>6} {'peak RSS MiB':>12} {'ok':>4}")
    for label, r in rows:
        rate = 2 * args.gib / r["seconds"]
        ok = r["seconds"] < TARGET_SECONDS and r["passed"]
        print(
            f"{label:<24} {r['seconds']:9.2f} {r['wall']:7.2f} {rate:6.2f} {r['peak_rss_mib']:12.0f} "
            f"{'yes' if ok else 'NO':>4}"
        )
    return 0 if all(r["seconds"] < TARGET_SECONDS and r["passed"] for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
