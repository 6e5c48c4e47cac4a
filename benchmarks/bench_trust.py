"""What checking a store's signed metadata costs an install (#34): ``scrollcase install`` of one release from a store
set up by ``scrollcase trust init``, served over HTTP on 127.0.0.1, with and without ``--trusted-root``, side by
side in one run (the order alternating each round, each install on a fresh host: its own user cache, so both
download the whole archive).  Prints each run, the medians, and the verification's share of the install time —
measured two ways: the difference of the two medians, and the check itself timed in-process
(``StoreTrust``: refresh, the index from its hashed key, the manifest, the archive's signed facts) against the
verified install's median.

    python benchmarks/bench_trust.py [--rounds 5] [--workdir DIR] [--keep]
    python benchmarks/bench_trust.py --torch   # the CUDA torch box (~2.6 GB archive), built as bench_many_boxes.py does

Default: the demo box (``scrollcase demo``, ~36 MB archive).  ``--torch`` reuses bench_many_boxes.py's recipe,
local channel and ``lock``/``build``/``publish`` (a first build downloads torch's wheels into the user cache;
later ones reuse them), then ``trust init`` adopts the published release; its installs run with a fake
``nvidia-smi`` on PATH.  The issue's target: verification <= 2 % of the torch box's install time.  Results are
written to benchmarks/results/bench_trust-<mode>-<utc>.json; --workdir is removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_many_boxes as many  # noqa: E402

from scrollcase.client.trusted import store_reader  # noqa: E402
from scrollcase.format.release import load_release  # noqa: E402
from scrollcase.store.http import HttpStore  # noqa: E402
from scrollcase.store.index import index_key  # noqa: E402
from scrollcase.trust.verify import StoreTrust  # noqa: E402
from tests.support.httpstore import serve  # noqa: E402

KINDS = ("plain", "trusted")


def demo_store(work: Path) -> tuple[str, str]:
    """``scrollcase demo``'s store (the release published, unsigned) moved to work/store: (boxId, version)."""
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", str(work / "demo"), "-q"],
        env=many.cli_env(),
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"scrollcase demo failed ({done.returncode})")
    shutil.move(work / "demo" / ".scrollcase" / "store", work / "store")
    (release,) = (work / "demo" / ".scrollcase" / "dist").glob("*.release.json")
    manifest = load_release(release)
    return manifest.boxId, manifest.version


def torch_store(work: Path) -> tuple[str, str]:
    """The torch box as bench_many_boxes.py builds box 1, published unsigned to work/store: (boxId, version)."""
    source, override = many.base_recipe(work, demo=False)
    box = many.write_box(source, work, 1, 4.0)
    built = many.build_and_publish(work, box, override)
    return built.manifest.boxId, built.manifest.version


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def install(url: str, host: Path, box_id: str, root: Path | None, torch: bool) -> tuple[float, float, dict[str, Any]]:
    """One ``scrollcase install`` on a fresh host: its wall time, its CPU seconds (user + system, steadier than
    the wall time on a shared machine) and its --json answer."""
    many.fresh(host)
    host.mkdir(parents=True)
    env = many.cli_env({"SCROLLCASE_CACHE_DIR": str(host / "cache")}, host=True)
    if torch:
        env["PATH"] = f"{many.fake_gpu(host)}{os.pathsep}{env.get('PATH', '')}"
    trust = ["--trusted-root", str(root)] if root is not None else []
    args = ("install", "--json", "--quiet", "--store", url, "--box", box_id, *trust, str(host / "box"))
    cpu = child_cpu()
    result, seconds = many.scrollcase(host, *args, env=env)
    return seconds, child_cpu() - cpu, result


def tuf_import() -> float:
    """Importing python-tuf in a fresh interpreter: what a verified install pays once, beside the check."""
    code = "import time; t = time.perf_counter(); import tuf.ngclient; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout)


def check_alone(url: str, root: Path, work: Path, box_id: str, rounds: int) -> list[float]:
    """The verification alone, in-process, on a fresh state each round: what --trusted-root adds to an install."""
    store = HttpStore(url)
    times: list[float] = []
    for n in range(rounds):
        state = many.fresh(work / f"state-{n}")
        start = time.perf_counter()
        trust = StoreTrust(root.read_bytes(), state, store_reader(store), store.url, str(root))
        trust.refresh()
        index = json.loads(trust.read_index(index_key(box_id)))
        for targets in index["versions"].values():
            for entry in targets.values():
                manifest = json.loads(trust.read(entry["release"]))
                trust.signed(manifest["keys"]["archive"])
        trust.commit()
        times.append(time.perf_counter() - start)
    return times


def summarise(
    runs: dict[str, list[float]], cpus: dict[str, list[float]], alone: list[float], imports: float, what: str
) -> dict[str, float]:
    """The medians and shares, printed."""
    plain, trusted = statistics.median(runs["plain"]), statistics.median(runs["trusted"])
    check = statistics.median(alone)
    cpu_plain, cpu_trusted = statistics.median(cpus["plain"]), statistics.median(cpus["trusted"])
    summary = {
        "plainMedianCpuSeconds": round(cpu_plain, 3),
        "trustedMedianCpuSeconds": round(cpu_trusted, 3),
        "tufImportSeconds": round(imports, 4),
        "checkWithImportShare": round((check + imports) / trusted, 4),
        "plainMedianSeconds": round(plain, 3),
        "trustedMedianSeconds": round(trusted, 3),
        "differenceSeconds": round(trusted - plain, 3),
        "differenceShare": round((trusted - plain) / trusted, 4),
        "checkAloneMedianSeconds": round(check, 4),
        "checkAloneShare": round(check / trusted, 4),
    }
    print(
        f"\n{what}: install median {plain:.2f} s without, "
        f"{trusted:.2f} s with --trusted-root (difference {trusted - plain:+.2f} s, "
        f"{100 * (trusted - plain) / trusted:+.1f} % of the install)\n"
        f"CPU (user + system) median {cpu_plain:.2f} s without, {cpu_trusted:.2f} s with "
        f"({cpu_trusted - cpu_plain:+.2f} s)\n"
        f"the check alone (in-process, fresh state): median {1000 * check:.0f} ms = "
        f"{100 * check / trusted:.2f} % of the verified install's time; with python-tuf's import in a fresh "
        f"process ({1000 * imports:.0f} ms) {100 * (check + imports) / trusted:.2f} %",
        flush=True,
    )
    return summary


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    box_id, version = torch_store(work) if args.torch else demo_store(work)
    many.scrollcase(work, "trust", "init", "--store", str(work / "store"), "--keys", str(work / "keys"), "--json")
    root = work / "keys" / "root.json"
    runs: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpus: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with serve(work / "store") as server:
        for n in range(args.rounds):
            order = KINDS if n % 2 == 0 else KINDS[::-1]
            for kind in order:
                seconds, cpu, result = install(
                    server.url, work / "host", box_id, root if kind == "trusted" else None, args.torch
                )
                runs[kind].append(seconds)
                cpus[kind].append(cpu)
                print(
                    f"round {n + 1} {kind:8s} {seconds:7.2f} s, {cpu:6.2f} CPU-s ({result['bytesDownloaded']} bytes)",
                    flush=True,
                )
        alone = check_alone(server.url, root, work, box_id, args.rounds)
    imports = statistics.median(tuf_import() for _ in range(args.rounds))
    summary = summarise(runs, cpus, alone, imports, f"{'torch' if args.torch else 'demo'} box {box_id} {version}")
    return {
        "mode": "torch" if args.torch else "demo",
        "box": box_id,
        "version": version,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip(),
        "startedAt": started,
        "runs": {kind: [round(s, 3) for s in times] for kind, times in runs.items()},
        "cpuSeconds": {kind: [round(s, 3) for s in times] for kind, times in cpus.items()},
        "checkAlone": [round(s, 4) for s in alone],
        "summary": summary,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": os.getloadavg()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="installs of each kind (default: %(default)s)")
    parser.add_argument("--torch", action="store_true", help="the CUDA torch box instead of the demo box (long)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-trust"))
    parser.add_argument("--keep", action="store_true", help="keep --workdir at the end")
    args = parser.parse_args()
    work: Path = args.workdir.resolve()
    if work.exists() and any(work.iterdir()):
        parser.error(f"--workdir {work} is not empty: it is removed at the end, so give a new or empty one")
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = run(args, work)
    finally:
        if not args.keep:
            many.fresh(work)
    out = REPO / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out / f"bench_trust-{results['mode']}-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
