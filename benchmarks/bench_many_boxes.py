"""One machine, many boxes (#33): N CUDA torch boxes sharing one runtime, installed one after another on a
fresh host, and what each install downloads and adds to the disk.

    python benchmarks/bench_many_boxes.py [--boxes 4] [--workdir /tmp/scrollcase-bench-many-boxes]
    python benchmarks/bench_many_boxes.py --demo      # the demo box (Python + numpy, ~36 MB): a quick check

Box k (k = 1..N) is ``recipes/torch-mlp-linux-x86_64-cuda12.4`` (``--demo``: the recipe ``scrollcase demo``
writes) with another boxId (``<boxId>-k``, its model cache folder renamed with it), its own weights asset (a few
MB of random bytes, served by file://, bundled) and, for k > 1, one extra small pure-Python PyPI package pinned
in ``[pypi-dependencies]`` (``EXTRAS``: box 2 tqdm, box 3 six, box 4 idna).  Each is built offline as
tests/integration/test_torch_e2e.py builds the torch box: a local conda channel made from this machine's
CPython and numpy (scrollcase.demo.run.make_demo_channel), ``scrollcase lock --channel-override
conda-forge=<channel>`` (PyPI metadata only), ``scrollcase build`` (torch 2.6.0 and its CUDA 12.4 wheels come
from scrollcase's wheel cache in the user cache, the pack frame cache makes the later builds fast), then
``scrollcase publish`` into one directory store served on 127.0.0.1 by tests/support/httpstore.py (a
ThreadingHTTPServer that counts the bytes it sends).

Then, on a fresh host (a new $SCROLLCASE_CACHE_DIR and install root, a fake ``nvidia-smi`` on PATH as
test_torch_e2e's ``fake_gpu``), ``scrollcase install --json`` (a subprocess) installs box 1, box 2, ... and
records for each: the bytes the server sent (the archive's, and all of them), the archive's size, the disk the
install added (st_blocks of the install root and the cache, every hard-linked file counted once), its wall time
and install's own plan.  After the installs every box runs its interpreter (``import torch, <extra>``) and passes
``scrollcase verify --installed`` (``--skip-verify``: not).

Printed (markdown), and written to benchmarks/results/bench_many_boxes-<mode>-<utc>.json:
- per install: download as % of the archive, the box's own frames (its extra package, its weights, box.json),
  disk added as % of the box's tree (the tree's own blocks, as if alone);
- rows N = 1, 2, 4: all downloads and the whole disk against N x box 1's (one box installed alone);
- the bars of #33 for box 2: download <= 1% of its archive plus its own package and weights; disk added <= 5%
  of its size; box 2's install time beside box 1's.

Disk: a torch box is ~5.6 GB installed and a ~2.6 GB archive (the frame cache keeps its frames too).  The store
holds N archives; a build needs ~15 GB while it runs.  With under 30 GB free at the start, N stops at 2.
Everything under --workdir is removed at the end (``--keep``: not); the user cache's build caches stay.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrollcase.demo.run import (  # noqa: E402
    DEMO_CHANNEL_NAME,
    demo_target,
    make_demo_channel,
    write_demo_recipe,
)
from scrollcase.format.release import ReleaseManifest, load_release  # noqa: E402
from scrollcase.io.digest import sha256_bytes  # noqa: E402
from tests.support.httpstore import ServerState, serve  # noqa: E402

TORCH_RECIPE = REPO / "recipes" / "torch-mlp-linux-x86_64-cuda12.4"
EXTRAS = (("tqdm", "4.67.1"), ("six", "1.17.0"), ("idna", "3.10"))  # box k > 1 adds EXTRAS[k - 2]
FAKE_GPU = "550.54.14, 8.6, NVIDIA GeForce RTX 3090"
MIN_FREE_FOR_FOUR = 30 * 10**9
DOWNLOAD_BAR, DISK_BAR = 0.01, 0.05
MB = 1e6


@dataclass(frozen=True)
class Box:
    k: int
    box_id: str
    recipe_id: str
    extra: tuple[str, str] | None
    imports: tuple[str, ...]


@dataclass
class Built:
    box: Box
    manifest: ReleaseManifest
    seconds: float


@dataclass
class Installed:
    box: Box
    archive: int
    sent_archive: int
    sent_all: int
    disk_added: int
    tree: int
    seconds: float
    own_frames: dict[str, int]
    result: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- subprocesses, disk


def cli_env(extra: dict[str, str] | None = None, *, host: bool = False) -> dict[str, str]:
    """This environment less GITHUB_* (and for a host's installs its own SCROLLCASE_*, AWS_* and proxies)."""
    drop = ("GITHUB_", "SCROLLCASE_", "AWS_") if host else ("GITHUB_",)
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    if host:
        env = {k: v for k, v in env.items() if not k.lower().endswith("_proxy")}
    return env | {"PYTHONPATH": str(REPO)} | (extra or {})


def scrollcase(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """The real CLI with --json: its answer and its wall time; a failure ends the benchmark with its stderr."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", *args],
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"scrollcase {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return (json.loads(done.stdout) if done.stdout.strip() else {}), seconds


def disk_bytes(*roots: Path) -> int:
    """st_blocks x 512 of every file and folder under ``roots``, a file with several hard links once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root in roots:
        if not root.exists():
            continue
        for folder, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                st = os.lstat(os.path.join(folder, name))
                if st.st_nlink > 1 and not os.path.isdir(os.path.join(folder, name)):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


# ---------------------------------------------------------------- the boxes


def base_recipe(work: Path, demo: bool) -> tuple[Path, str]:
    """(the recipe folder box k is made from, the --channel-override) with the local channel made."""
    if demo:
        target = demo_target()
        source = write_demo_recipe(work / "base", target, work / "base-assets")
        channel = make_demo_channel(work / "channel", target.subdir)
        return source, f"{DEMO_CHANNEL_NAME}={channel.resolve().as_uri()}"
    channel = make_demo_channel(work / "channel", "linux-64")
    return TORCH_RECIPE, f"conda-forge={channel.resolve().as_uri()}"


def write_box(source: Path, work: Path, k: int, weights_mb: float) -> Box:
    """recipes/<boxId>-k-<targetId>: the source recipe as box k (its boxId, model cache, weights, extra)."""
    recipe = json.loads((source / "recipe.json").read_text(encoding="utf-8"))
    old_id = recipe["boxId"]
    box_id = f"{old_id}-{k}"
    target_id = recipe["recipeId"].removeprefix(f"{old_id}-")
    recipe_id = f"{box_id}-{target_id}"
    recipe = json.loads(json.dumps(recipe).replace(f"model-cache/{old_id}", f"model-cache/{box_id}"))
    assets = fresh(work / "assets" / box_id)
    if recipe["assets"]:  # the demo's weights.json: copied beside this box's own weights
        shutil.copytree(Path(unquote(urlparse(recipe["assetBaseUrl"]).path)), assets)
    assets.mkdir(parents=True, exist_ok=True)
    weights = random.Random(k).randbytes(int(weights_mb * MB))  # not a secret: another box's bytes
    (assets / "weights.bin").write_bytes(weights)
    recipe.update(recipeId=recipe_id, boxId=box_id, assetBaseUrl=assets.resolve().as_uri())
    recipe["assets"].append({"name": "weights-bin", "path": "weights.bin", "sha256": sha256_bytes(weights)})
    recipe["assets"][-1]["size"] = len(weights)
    recipe["selfTest"]["files"].append(f"{recipe['modelCacheSubdir']}/weights.bin")
    extra = EXTRAS[k - 2] if k > 1 else None
    if extra is not None:
        recipe["selfTest"]["imports"].append(extra[0])
    folder = fresh(work / "recipes" / recipe_id)
    folder.mkdir(parents=True)
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
    pixi = (source / "pixi.toml").read_text(encoding="utf-8").replace(source.name, recipe_id)
    if extra is not None:
        pin = f'{extra[0]} = "=={extra[1]}"\n'
        section = "[pypi-dependencies]\n"
        pixi = pixi.replace(section, section + pin) if section in pixi else f"{pixi.rstrip()}\n\n{section}{pin}"
    (folder / "pixi.toml").write_text(pixi, encoding="utf-8")
    return Box(k, box_id, recipe_id, extra, tuple(recipe["selfTest"]["imports"]))


def build_and_publish(work: Path, box: Box, override: str) -> Built:
    """lock, build, publish into work/store; the build's archive and work folder removed after."""
    print(f"box {box.k}: lock, build and publish {box.recipe_id} ...", flush=True)
    start = time.perf_counter()
    scrollcase(work, "lock", box.recipe_id, "--channel-override", override, "--json")
    dist = work / "dist"
    built, _ = scrollcase(work, "build", box.recipe_id, "--json", "--out", str(dist), "--state-dir", str(work / "st"))
    release = work / built["release"] if not Path(built["release"]).is_absolute() else Path(built["release"])
    scrollcase(work, "publish", str(release), "--to", str(work / "store"), "--json")
    manifest = load_release(release)
    fresh(dist)
    fresh(work / "st" / "work")
    seconds = time.perf_counter() - start
    print(f"box {box.k}: archive {manifest.archive.size / MB:.1f} MB, {seconds:.0f} s", flush=True)
    return Built(box, manifest, seconds)


# ---------------------------------------------------------------- the host


def fake_gpu(host: Path) -> str:
    """A folder with a fake ``nvidia-smi`` answering one GPU (driver, compute capability, name)."""
    folder = host / "fake-gpu"
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho '{FAKE_GPU}'\n", encoding="utf-8")
    tool.chmod(0o755)
    return str(folder)


def own_frames(built: Built, before: list[Built]) -> dict[str, int]:
    """The frames of this box that no box installed before holds: name -> compressed size."""
    held = {f.sha256 for b in before for f in b.manifest.archive.frames or []}
    return {f.name: f.size for f in built.manifest.archive.frames or [] if f.sha256 not in held}


def install_one(url: str, state: ServerState, host: Path, built: Built, before: list[Built]) -> Installed:
    box, info = built.box, built.manifest.archive
    env = cli_env({"SCROLLCASE_CACHE_DIR": str(host / "cache")}, host=True)
    env["PATH"] = f"{fake_gpu(host)}{os.pathsep}{env.get('PATH', '')}"
    disk_before, sent_before = disk_bytes(host / "boxes", host / "cache"), state.sent
    dest = host / "boxes" / box.box_id
    result, seconds = scrollcase(
        host, "install", "--json", "--quiet", "--store", url, "--box", box.box_id, str(dest), env=env
    )
    installed = Installed(
        box=box,
        archive=info.size,
        sent_archive=state.sent_for(info.name),
        sent_all=state.sent - sent_before,
        disk_added=disk_bytes(host / "boxes", host / "cache") - disk_before,
        tree=disk_bytes(dest),
        seconds=seconds,
        own_frames=own_frames(built, before),
        result=result,
    )
    print(
        f"box {box.k}: installed in {seconds:.1f} s, sent {installed.sent_archive / MB:.1f} of "
        f"{info.size / MB:.1f} MB, disk +{installed.disk_added / MB:.1f} MB (tree {installed.tree / MB:.1f} MB)",
        flush=True,
    )
    return installed


def check_boxes(host: Path, installed: list[Installed], verify: bool) -> dict[str, Any]:
    """Every box's interpreter imports its packages; ``verify --installed`` passes on each."""
    env = cli_env({"SCROLLCASE_CACHE_DIR": str(host / "cache")}, host=True)
    checks: dict[str, Any] = {}
    for one in installed:
        dest = host / "boxes" / one.box.box_id
        code = f"import {', '.join(one.box.imports)}; print('ok')"
        ran = subprocess.run(
            [str(dest / "venv" / "bin" / "python"), "-I", "-c", code],
            cwd=dest,
            env={"PATH": "/usr/bin:/bin", "HOME": str(host)},
            capture_output=True,
            text=True,
            check=False,
        )
        if ran.returncode != 0:
            raise SystemExit(f"box {one.box.k} does not run: {code}\n{ran.stderr[-3000:]}")
        checks[one.box.box_id] = {"imports": list(one.box.imports)}
        if verify:
            report, seconds = scrollcase(host, "verify", "--installed", str(dest), "--json", env=env)
            if not report.get("passed"):
                raise SystemExit(f"box {one.box.k}: verify --installed failed: {report}")
            checks[one.box.box_id] |= {"verified": True, "verifySeconds": round(seconds, 1)}
    return checks


# ---------------------------------------------------------------- results


def allowance(one: Installed) -> int:
    """Box k's own package and weights: its frames no earlier box holds that are its extra wheel or an asset."""
    marks = ("assets/", *([f"wheel/{one.box.extra[0]}-"] if one.box.extra else []))
    return sum(size for name, size in one.own_frames.items() if name.startswith(marks))


def summarise(installed: list[Installed]) -> dict[str, Any]:
    first = installed[0]
    rows = [
        {
            "n": n,
            "downloadBytes": sum(i.sent_all for i in installed[:n]),
            "oneBoxDownloadBytes": first.sent_all,
            "diskBytes": sum(i.disk_added for i in installed[:n]),
            "oneBoxDiskBytes": first.disk_added,
        }
        for n in (1, 2, 4)
        if n <= len(installed)
    ]
    out: dict[str, Any] = {"rows": rows}
    if len(installed) > 1:
        second = installed[1]
        own = allowance(second)
        out["second"] = {
            "downloadPct": 100 * second.sent_archive / second.archive,
            "ownPackageAndWeightsBytes": own,
            "downloadBeyondOwnPct": 100 * (second.sent_archive - own) / second.archive,
            "downloadBar": second.sent_archive <= DOWNLOAD_BAR * second.archive + own,
            "diskPct": 100 * second.disk_added / second.tree,
            "diskBar": second.disk_added <= DISK_BAR * second.tree,
            "secondsVsFirst": [round(first.seconds, 1), round(second.seconds, 1)],
        }
    return out


def report(installed: list[Installed], summary: dict[str, Any]) -> str:
    lines = [
        "| box | extra | archive MB | sent MB (% of archive) | own frames MB | disk added MB (% of tree) | tree MB | "
        "install s | plan |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i in installed:
        plan = i.result.get("plan") or {}
        extra = "==".join(i.box.extra) if i.box.extra else "-"
        lines.append(
            f"| {i.box.k} `{i.box.box_id}` | {extra} | {i.archive / MB:,.1f} | "
            f"{i.sent_archive / MB:,.2f} ({100 * i.sent_archive / i.archive:.2f}%) | "
            f"{sum(i.own_frames.values()) / MB:,.2f} | {i.disk_added / MB:,.1f} ({100 * i.disk_added / i.tree:.2f}%) | "
            f"{i.tree / MB:,.1f} | {i.seconds:.1f} | {plan.get('how')}, {plan.get('framesMissing')} of "
            f"{plan.get('frames')} frames |"
        )
    lines += ["", "| N | download MB | N x one box MB | ratio | disk MB | N x one box MB | ratio |"]
    lines.append("|---:|---:|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        one_d, one_s = r["n"] * r["oneBoxDownloadBytes"], r["n"] * r["oneBoxDiskBytes"]
        lines.append(
            f"| {r['n']} | {r['downloadBytes'] / MB:,.1f} | {one_d / MB:,.1f} | {r['downloadBytes'] / one_d:.2f} | "
            f"{r['diskBytes'] / MB:,.1f} | {one_s / MB:,.1f} | {r['diskBytes'] / one_s:.2f} |"
        )
    if "second" in summary:
        s = summary["second"]
        lines += [
            "",
            f"box 2 download: {s['downloadPct']:.2f}% of its archive; beyond its own package and weights "
            f"({s['ownPackageAndWeightsBytes'] / MB:.2f} MB): {s['downloadBeyondOwnPct']:.2f}% "
            f"(bar <= {100 * DOWNLOAD_BAR:.0f}%): {'met' if s['downloadBar'] else 'NOT met'}",
            f"box 2 disk added: {s['diskPct']:.2f}% of its tree (bar <= {100 * DISK_BAR:.0f}%): "
            f"{'met' if s['diskBar'] else 'NOT met'}",
            f"install time: box 1 {s['secondsVsFirst'][0]} s, box 2 {s['secondsVsFirst'][1]} s",
        ]
    return "\n".join(lines)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    free = shutil.disk_usage(work).free
    boxes = args.boxes if free >= MIN_FREE_FOR_FOUR or args.boxes <= 2 else 2
    if boxes < args.boxes:
        print(f"only {free / 1e9:.1f} GB free (< {MIN_FREE_FOR_FOUR / 1e9:.0f} GB): N stops at {boxes}", flush=True)
    source, override = base_recipe(work, args.demo)
    made = [write_box(source, work, k, args.weights_mb) for k in range(1, boxes + 1)]
    built = [build_and_publish(work, box, override) for box in made]
    host = work / "host"
    installed: list[Installed] = []
    with serve(work / "store") as server:
        for index, one in enumerate(built):
            installed.append(install_one(server.url, server.state, host, one, built[:index]))
    checks = check_boxes(host, installed, verify=not args.skip_verify)
    summary = summarise(installed)
    print(report(installed, summary), flush=True)
    return {
        "mode": "demo" if args.demo else "torch",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "startedAt": started,
        "freeBytesAtStart": free,
        "builds": [
            {"box": b.box.box_id, "seconds": round(b.seconds, 1), "archive": b.manifest.archive.size} for b in built
        ],
        "installs": [
            {
                "box": i.box.box_id,
                "extra": i.box.extra,
                "archive": i.archive,
                "sentArchive": i.sent_archive,
                "sentAll": i.sent_all,
                "diskAdded": i.disk_added,
                "tree": i.tree,
                "seconds": round(i.seconds, 2),
                "ownFrames": i.own_frames,
                "install": i.result,
            }
            for i in installed
        ],
        "checks": checks,
        "summary": summary,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": os.getloadavg()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-many-boxes"))
    parser.add_argument("--boxes", type=int, default=4, choices=(1, 2, 3, 4), help="N (default: %(default)s)")
    parser.add_argument("--demo", action="store_true", help="the demo box instead of the torch box (fast)")
    parser.add_argument("--weights-mb", type=float, default=None, help="each box's weights (torch 4, demo 1)")
    parser.add_argument("--skip-verify", action="store_true", help="no verify --installed after the installs")
    parser.add_argument("--keep", action="store_true", help="keep --workdir (store, host) at the end")
    args = parser.parse_args()
    args.weights_mb = args.weights_mb or (1.0 if args.demo else 4.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still removes its folder
    work: Path = args.workdir.resolve()
    if work.exists() and any(work.iterdir()):
        parser.error(f"--workdir {work} is not empty: it is removed at the end, so give a new or empty one")
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = run(args, work)
    finally:
        if not args.keep:
            fresh(work)
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out_dir / f"bench_many_boxes-{results['mode']}-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
