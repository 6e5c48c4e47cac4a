"""`scrollcase install` from a loopback HTTP store against `curl -s URL | zstd -dc | tar -x` of the same
archive (issue 16: install's throughput at least 0.9x the pipeline's).

    python benchmarks/bench_install_http.py --workdir /tmp/scrollcase-bench-install-http [--rounds 3]
    python benchmarks/bench_install_http.py --box dist/BOX.release.json   # a built release, its archive beside it
    python benchmarks/bench_install_http.py --tree DIR                   # any folder, packed as a box

The default box is bench_archive's synthetic ~1 GB conda environment (40 packages installed by py-rattler,
30,000+ files, cached under --workdir), given a box.json and packed by pack_tree (one frame per package, the
frame table in its manifest).  The release is published by the real publish into a directory store under
--workdir and served on 127.0.0.1 by tests/support/httpstore.py, the tests' static Range server, in a
thread of this process.  Each round, the two contenders in alternating order, each with DEST and the
download and frame caches ($SCROLLCASE_CACHE_DIR) removed first, then ``--settle`` seconds of rest:

  install: `python -m scrollcase install --store URL --box ID --target T --skip-gpu-check --json DEST` — the
           whole command: index and manifest, the resumable download with size and sha256 checked as the
           bytes arrive, the frame table checked and the frame cache filled, the safe unpack with sha256,
           relocation and the install receipt, one rename;
  pipe:    `curl -s URL | zstd -dc | tar -xf - -C DEST` — no checks at all.

Both read the same archive from the same server, so the archive is in the page cache for both after the
first round.  Throughput ratio = pipe seconds / install seconds (>= 0.9 is the bar), best vs best and
per-round.  Prints a table; writes JSON to benchmarks/results/bench_install_http-<utc>.json.
"""

from __future__ import annotations

import argparse
import json
import os
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

import bench_archive  # noqa: E402

from scrollcase.format.archive.frames import frame_table  # noqa: E402
from scrollcase.format.archive.pack import pack_tree  # noqa: E402
from scrollcase.format.boxjson import BoxJson, dump_box_json  # noqa: E402
from scrollcase.format.release import (  # noqa: E402
    ArchiveInfo,
    BuiltBy,
    CheckOutcome,
    ReleaseManifest,
    SelfTestReport,
    dump_release,
    load_release,
    object_keys,
    release_relocation,
)
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files  # noqa: E402
from scrollcase.recipe.model import Compatibility, SelfTest, Target  # noqa: E402
from scrollcase.store.local import LocalStore  # noqa: E402
from scrollcase.store.publish import publish  # noqa: E402
from tests.support.httpstore import serve  # noqa: E402

BOX_ID, VERSION, TARGET_ID = "bench-http", "1.0.0", "linux-x86_64-cpu"


# ---------------------------------------------------------------- the release


def box_json_for(tree: Path) -> BoxJson:
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(tree, BOX_PREFIX_PLACEHOLDER))
    return BoxJson(
        boxId=BOX_ID,
        modelId="bench",
        runtimeId="python",
        version=VERSION,
        sourceRevision="benchmarks/bench_install_http.py",
        recipeId=BOX_ID,
        target=Target(platform="linux", arch="x86_64", accelerator="cpu"),
        targetId=TARGET_ID,
        pythonVersion="3.11",
        pythonEntryPoint="venv/bin/python",
        envDir="venv",
        modelCacheSubdir="model-cache",
        weights="bundled",
        assets=[],
        selfTest=SelfTest(imports=["json"]),
        relocation=info,
    )


def release_from_tree(workdir: Path, tree: Path) -> Path:
    """A hard-linked copy of ``tree`` with a real box.json, packed, and its release manifest (cached)."""
    dist = workdir / "dist"
    name = f"{BOX_ID}-{VERSION}-{TARGET_ID}"
    manifest_path = dist / f"{name}.release.json"
    if manifest_path.is_file():
        return manifest_path
    stage = workdir / "release-tree"
    shutil.rmtree(stage, ignore_errors=True)
    bench_archive.hardlink_copy(tree, stage)
    (stage / "box.json").unlink(missing_ok=True)  # a hard link to the tree's own: never write through it
    box = box_json_for(stage)
    (stage / "box.json").write_bytes(dump_box_json(box))
    print(f"packing {stage} ...", flush=True)
    packed = pack_tree(stage, dist / f"{name}.tar.zst")
    archive = ArchiveInfo(
        name=packed.path.name, size=packed.size, sha256=packed.sha256, frames=frame_table(packed.frames)
    )
    manifest = ReleaseManifest(
        boxId=box.boxId,
        modelId=box.modelId,
        runtimeId=box.runtimeId,
        version=box.version,
        sourceRevision=box.sourceRevision,
        recipeId=box.recipeId,
        recipeVersion=VERSION,
        target=box.target,
        targetId=TARGET_ID,
        compatibility=Compatibility(minHostAppVersion="1.0.0", minRamGb=1),
        archive=archive,
        pythonEntryPoint=box.pythonEntryPoint,
        modelCacheSubdir=box.modelCacheSubdir,
        weights="bundled",
        assets=[],
        keys=object_keys(BOX_ID, VERSION, TARGET_ID, packed.path.name),
        builtBy=BuiltBy(scrollcase="bench", pixi="0.40.0", lockSha256="0" * 64, pythonVersion="3.11"),
        selfTest=SelfTestReport(passed=True, checks=[CheckOutcome(name="import json", kind="import", passed=True)]),
        relocation=release_relocation(box.relocation),
    )
    manifest_path.write_bytes(dump_release(manifest))
    shutil.rmtree(stage, ignore_errors=True)
    return manifest_path


def published_store(workdir: Path, release: Path) -> tuple[Path, ReleaseManifest]:
    """A directory store holding ``release`` (publish is a no-op when it already does)."""
    manifest = load_release(release)
    root = workdir / "store"
    publish(LocalStore(root), manifest, release.parent / manifest.archive.name)
    return root, manifest


# ---------------------------------------------------------------- the contenders


def fresh(*paths: Path) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def run_install(url: str, manifest: ReleaseManifest, dest: Path, cache: Path) -> float:
    argv = [sys.executable, "-m", "scrollcase", "install", "--json", "--quiet", "--store", url]
    argv += ["--box", manifest.boxId, "--version", manifest.version, "--target", manifest.targetId]
    argv += ["--skip-gpu-check", str(dest)]
    env = {**os.environ, "SCROLLCASE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"install failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    result = json.loads(proc.stdout)
    if result["bytesDownloaded"] != manifest.archive.size:  # every round downloads the whole archive
        raise SystemExit(f"install downloaded {result['bytesDownloaded']} of {manifest.archive.size} bytes")
    return seconds


def run_pipe(url: str, dest: Path) -> float:
    dest.mkdir(parents=True)
    command = f"set -o pipefail; curl -sf '{url}' | zstd -dc | tar -xf - -C '{dest}'"
    start = time.perf_counter()
    subprocess.run(["bash", "-c", command], check=True)
    return time.perf_counter() - start


def run_rounds(url: str, manifest: ReleaseManifest, work: Path, rounds: int, settle: float) -> dict[str, list[float]]:
    dest, cache = work / "dest", work / "cache"
    archive_url = f"{url}/{manifest.keys.archive}"
    times: dict[str, list[float]] = {"install": [], "pipe": []}
    for index in range(rounds):
        order = ["install", "pipe"] if index % 2 == 0 else ["pipe", "install"]
        for name in order:
            fresh(dest, cache)
            time.sleep(settle)
            seconds = run_install(url, manifest, dest, cache) if name == "install" else run_pipe(archive_url, dest)
            times[name].append(seconds)
            print(f"round {index + 1} {name:8} {seconds:8.2f} s", flush=True)
    fresh(dest, cache)
    return times


# ---------------------------------------------------------------- results


def summarise(times: dict[str, list[float]], size: int) -> dict[str, Any]:
    per_round = [pipe / ours for ours, pipe in zip(times["install"], times["pipe"], strict=True)]
    return {
        "installBest": min(times["install"]),
        "pipeBest": min(times["pipe"]),
        "installMBps": size / 1e6 / min(times["install"]),
        "pipeMBps": size / 1e6 / min(times["pipe"]),
        "throughputRatioBest": min(times["pipe"]) / min(times["install"]),
        "throughputRatioMedian": statistics.median(per_round),
        "throughputRatioRounds": per_round,
        "bar": 0.9,
    }


def report(manifest: ReleaseManifest, times: dict[str, list[float]], s: dict[str, Any]) -> str:
    frames = len(manifest.archive.frames or [])
    return "\n".join(
        [
            f"archive: {manifest.archive.size / 1e6:.1f} MB, {frames} frames ({manifest.boxId} {manifest.version})",
            f"{'':36} {'best s':>8} {'median s':>9} {'MB/s':>8}",
            f"{'scrollcase install (http)':36} {s['installBest']:>8.2f} "
            f"{statistics.median(times['install']):>9.2f} {s['installMBps']:>8.1f}",
            f"{'curl -s | zstd -dc | tar -x':36} {s['pipeBest']:>8.2f} "
            f"{statistics.median(times['pipe']):>9.2f} {s['pipeMBps']:>8.1f}",
            f"install throughput vs the pipe: {s['throughputRatioBest']:.2f}x best vs best, "
            f"{s['throughputRatioMedian']:.2f}x per-round median (bar >= {s['bar']}x)",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-install-http"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds of rest after deleting a run's files")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--box", type=Path, default=None, help="a *.release.json (its archive beside it)")
    source.add_argument("--tree", type=Path, default=None, help="a folder to pack as the box")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.box is not None:
        release = args.box
    else:
        release = release_from_tree(args.workdir, args.tree or bench_archive.build_environment(args.workdir))
    root, manifest = published_store(args.workdir, release)
    with serve(root) as server:
        times = run_rounds(server.url, manifest, args.workdir / "run", args.rounds, args.settle)
    summary = summarise(times, manifest.archive.size)
    print(report(manifest, times, summary))
    results = {
        "release": str(release),
        "archiveSize": manifest.archive.size,
        "frames": len(manifest.archive.frames or []),
        "seconds": times,
        "summary": summary,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": os.getloadavg()},
    }
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out_dir / f"bench_install_http-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
