"""The real torch box, side by side: pack, unpack, `import torch`, and scrollcase's peak RSS.

    python benchmarks/bench_torch.py [--workdir /tmp/scrollcase-bench-torch] [--rounds 5] [--rebuild]
                                     [--import-rounds N] [--skip-verify] [--only pack,unpack,import,rss]
                                     [--recipe benchmarks/recipes/torch-diffusers-linux-x86_64-cuda12.4]

Builds once (cached under --workdir; ``--rebuild`` forces it) the CUDA 12.4 torch 2.6.0 box of
``recipes/torch-mlp-linux-x86_64-cuda12.4`` as tests/integration/test_torch_e2e.py does: a conda channel
made from this machine's CPython and numpy (scrollcase.demo.run.make_demo_channel), ``scrollcase lock
--channel-override conda-forge=<channel>`` (PyPI metadata only), then the build's stages in a child
process (``execute_build``, what ``scrollcase build`` runs).  The 23 torch wheels (2.8 GB) come from
scrollcase's wheel cache, ``~/.cache/scrollcase/wheels/<sha256>/``, so nothing big is downloaded once it
is filled.  ``--recipe`` boxes another recipe folder the same way (use another --workdir): the 64-package
diffusion runtime in benchmarks/recipes is the >= 30-package torch box issue 16 measures on (its import
phase compares with a venv of that recipe's wheels).  The box tree as the
build packed it is kept beside the archive (extracted from it by plain ``zstd -dc | tar -x``, no
relocation), and the plain venv for the import comparison is kept too.

Measured in one run, all on warm page cache; rounds alternate the contenders and flip their order every
round (bench_archive.interleaved: ``sync`` before each run), each speed-up given best run against best
run and as the median (min-max) of the per-round ratios:

  pack:    scrollcase.format.archive.pack.pack_tree on the box tree vs ``tar -cf - -C BOX . | zstd -T0 -3``
           (throughput, compressed size; bench_archive.measure_real_tree)
  unpack:  scrollcase.format.archive.unpack.unpack_archive (size + sha256 + safety checks + relocation)
           vs ``zstd -dc ARCHIVE | tar -xf - -C DEST``
  import:  ``python -I -c "import torch"`` wall time with the unpacked box's own interpreter vs a plain
           ``python -m venv`` of the same base CPython holding the same wheels, installed by
           ``uv pip install --offline --no-deps --compile-bytecode`` (plus the same numpy the box's conda
           numpy is made from, copied from this interpreter's site-packages and compiled)
  rss:     scrollcase's own peak RSS in each build stage (VmHWM of the build process, reset at the start
           of each stage through /proc/self/clear_refs) kept apart from the box interpreter's processes
           that the bytecode, evidence and self-test stages start (their ru_maxrss, read as each is
           reaped); pack_tree and unpack_archive each in a fresh child (bench_archive.peak_rss_mb); and
           ``verify --self-test`` (verify_release) in a child, itself vs its box-interpreter children.
           The build stages' figures come from the (cached) build; the others are measured every run.

Wheel install (scrollcase vs uv pip install of the same wheels) is benchmarks/bench_install.py's.
``--only`` measures some phases (to rerun one on a quieter machine); the 1-minute load average as each
phase starts is printed and kept.  Prints a table and writes JSON to benchmarks/results/bench_torch-<utc>.json.
Disk: ~6 GB box tree, 2.7 GB archive, ~5 GB venv kept under --workdir; ~12 GB more while it runs.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_archive
from bench_archive import fresh, interleaved, measure_real_tree, peak_rss_mb, row, shell, speedup, tree_stats

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "torch-mlp-linux-x86_64-cuda12.4"  # --recipe: another, e.g. benchmarks/recipes/*
SUBDIR = "linux-64"
WHEEL_CACHE = Path.home() / ".cache" / "scrollcase" / "wheels"
IMPORT = "import torch"
SMOKE = "import numpy, torch; print(torch.__version__, torch.from_numpy(numpy.ones(3)).sum().item())"
RSS_TARGET_MB = 300

# ---------------------------------------------------------------- children (run as `bench_torch.py _child ...`)


def vm_hwm_mib() -> float:
    """This process's peak resident set since start (or since the last reset), MiB."""
    match = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
    assert match is not None
    return int(match.group(1)) / 1024


def reset_hwm() -> None:
    """Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current resident set."""
    Path("/proc/self/clear_refs").write_text("5")


class ChildPeaks:
    """ru_maxrss of every child process as it is reaped (subprocess waits through os.waitpid)."""

    def __init__(self) -> None:
        self.peaks_kib: list[int] = []
        self._waitpid = os.waitpid

        def waitpid(pid: int, options: int) -> tuple[int, int]:
            got, status, usage = os.wait4(pid, options)
            if got:
                self.peaks_kib.append(usage.ru_maxrss)
            return got, status

        os.waitpid = waitpid

    def take(self) -> tuple[float | None, int]:
        """(the largest child's peak MiB since the last take, or None; how many children)."""
        peaks, self.peaks_kib = self.peaks_kib, []
        return (round(max(peaks) / 1024, 1) if peaks else None), len(peaks)


def child_build(recipe: str, recipes_root: str, state: str, out: str) -> dict[str, object]:
    """What `scrollcase build` does, with each stage's peak RSS: scrollcase's own and its children's."""
    from scrollcase.build.pipeline import execute_build
    from scrollcase.build.plan import locked_install, plan_build
    from scrollcase.io.fetch import default_fetchers
    from scrollcase.recipe.loader import resolve_recipe

    children = ChildPeaks()
    stages: dict[str, dict[str, object]] = {}
    current: list[str] = []
    start_line = re.compile(r"\[\d+/\d+\] (\S+): ")
    end_line = re.compile(r"\s+(\S+) done in ")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)
        if (m := start_line.match(line)) is not None:
            current[:] = [m.group(1)]
            children.take()
            reset_hwm()
        elif (m := end_line.match(line)) is not None and current == [m.group(1)]:
            child_mib, count = children.take()
            stages[m.group(1)] = {
                "scrollcaseMiB": round(vm_hwm_mib(), 1),
                "childrenMaxMiB": child_mib,
                "children": count,
            }

    started = time.monotonic()
    plan = plan_build(resolve_recipe(recipe, Path(recipes_root)), out_dir=Path(out), state_dir=Path(state))
    locked = locked_install(plan)
    planned = {"scrollcaseMiB": round(vm_hwm_mib(), 1), "childrenMaxMiB": children.take()[0]}
    result = execute_build(plan, locked=locked, fetchers=default_fetchers(), progress=progress)
    archive = result.manifest.archive
    return {
        "release": str(result.release),
        "archive": str(result.archive),
        "size": archive.size,
        "sha256": archive.sha256,
        "wheels": len(locked.wheels),
        "records": len(locked.records),
        "seconds": round(time.monotonic() - started, 1),
        "timings": result.timings,
        "planAndLock": planned,
        "stages": stages,
    }


def child_verify(release: str) -> dict[str, object]:
    """verify_release(self_test=True), what `scrollcase verify --self-test` runs: peak RSS, itself vs children."""
    from scrollcase.build.verify import verify_release

    children = ChildPeaks()
    started = time.monotonic()
    verify_release(Path(release), self_test=True)
    child_mib, count = children.take()
    return {
        "seconds": round(time.monotonic() - started, 1),
        "scrollcaseMiB": round(vm_hwm_mib(), 1),
        "childrenMaxMiB": child_mib,
        "children": count,
    }


def run_child(kind: str, *args: str) -> dict[str, Any]:
    """One child job of this script (its stderr shows through), its JSON answer."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, __file__, "_child", kind, *args], env=env, stdout=subprocess.PIPE, text=True, check=True
    )
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


# ---------------------------------------------------------------- the box, the venv (built once, cached)


def scrollcase_cli(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")} | {"PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "scrollcase", *args], cwd=cwd, env=env, check=True)


def build_box(work: Path, rebuild: bool, source: Path = RECIPE) -> dict[str, Any]:
    """work/build.json (the build's result and its per-stage RSS) and work/box (the packed tree), once."""
    marker = work / "build.json"
    if marker.is_file() and not rebuild:
        cached: dict[str, Any] = json.loads(marker.read_text())
        return cached
    from scrollcase.demo.run import make_demo_channel

    for name in ("build.json", "box", "dist", "state/work", "venv", "venv.json"):
        fresh(work / name)
    channel = work / "channel"
    if not (channel / SUBDIR / "repodata.json").is_file():
        print("making the conda channel from this machine's CPython and numpy ...", flush=True)
        make_demo_channel(channel, SUBDIR)
    recipe = work / "recipes" / source.name
    if not (recipe / "pixi.lock").is_file():
        fresh(recipe)
        shutil.copytree(source, recipe)
        print(f"locking {source.name} (PyPI metadata only) ...", flush=True)
        scrollcase_cli(work, "lock", source.name, "--channel-override", f"conda-forge={channel.as_uri()}")
    print("building the box (its stages in a child process, peak RSS per stage) ...", flush=True)
    built = run_child("build", source.name, str(work / "recipes"), str(work / "state"), str(work / "dist"))
    box = work / "box"
    box.mkdir()
    shell(f"zstd -q -dc {built['archive']} | tar -xf - -C {box}")  # the tree as packed, not relocated
    files, size = tree_stats(box)
    built |= {
        "builtAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "treeFiles": files,
        "treeBytes": size,
        "pycFiles": count_suffix(box, ".pyc"),
        "pyFiles": count_suffix(box, ".py"),
    }
    marker.write_text(json.dumps(built, indent=2) + "\n")
    return built


def count_suffix(root: Path, suffix: str) -> int:
    return sum(name.endswith(suffix) for _, _, names in os.walk(root) for name in names)


def locked_wheel_files(lock: Path) -> list[Path]:
    """The lock's wheels, as the build fetched them into scrollcase's wheel cache."""
    from scrollcase.wheels import source as wheels

    sources = wheels.plan_wheels(wheels.locked_wheels(lock, SUBDIR), lock, SUBDIR)
    files = [WHEEL_CACHE / s.sha256 / s.filename for s in sources]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"{len(missing)} wheels are not in {WHEEL_CACHE} (the build fetches them): {missing[:3]}")
    return files


def base_python() -> Path:
    """The CPython the box's interpreter is packaged from (this venv's base)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return Path(sys.base_prefix) / "bin" / f"python{version}"


def build_venv(work: Path, uv: Path, recipe: str = RECIPE.name) -> Path:
    """work/venv: a plain venv of the same CPython with the lock's wheels (uv, bytecode) and numpy, once."""
    venv = work / "venv"
    python = venv / "bin" / "python"
    if (work / "venv.json").is_file():
        return python
    fresh(venv)
    wheels = locked_wheel_files(work / "recipes" / recipe / "pixi.lock")
    print(f"making the plain venv: {len(wheels)} wheels with uv (--compile-bytecode) ...", flush=True)
    subprocess.run([str(base_python()), "-m", "venv", "--without-pip", str(venv)], check=True)
    start = time.monotonic()
    subprocess.run(
        [
            str(uv),
            "pip",
            "install",
            "--offline",
            "--no-deps",
            "--compile-bytecode",
            "--quiet",
            "--cache-dir",  # a private cache, removed below: the venv keeps its files (hard links or copies)
            str(work / "uv-cache"),
            "--python",
            str(python),
            *map(str, wheels),
        ],
        check=True,
    )
    uv_seconds = time.monotonic() - start
    fresh(work / "uv-cache")
    # numpy: the box has it from conda, made from this interpreter's numpy (scrollcase.demo.run.numpy_package)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    numpy = importlib.metadata.distribution("numpy")
    for file in numpy.files or []:
        if "__pycache__" not in file.parts:
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(str(file.locate())), target)
    subprocess.run([str(python), "-m", "compileall", "-q", str(site / "numpy")], check=True, stdout=subprocess.DEVNULL)
    files, size = tree_stats(venv)
    (work / "venv.json").write_text(
        json.dumps(
            {
                "wheels": [w.name for w in wheels],
                "numpy": numpy.version,
                "uvSeconds": round(uv_seconds, 1),
                "files": files,
                "bytes": size,
                "pycFiles": count_suffix(venv, ".pyc"),
            },
            indent=2,
        )
        + "\n"
    )
    return python


# ---------------------------------------------------------------- measurements


def unpack_box(built: dict[str, Any], dest: Path) -> None:
    """What `scrollcase unpack` does to the archive (less the host GPU check): unpack_archive."""
    from scrollcase.format.archive.unpack import unpack_archive

    unpack_archive(Path(built["archive"]), dest, expected_size=int(built["size"]), expected_sha256=str(built["sha256"]))


def measure_unpack(work: Path, built: dict[str, Any], rounds: int) -> tuple[dict[str, object], Path]:
    """unpack_archive vs zstd -dc | tar -x, rounds alternating; the last scrollcase unpack is kept."""
    archive = Path(built["archive"])
    dest, tar_dest = work / "out" / "unpacked", work / "out" / "tar-dest"
    raw = int(built["treeBytes"])

    def ours() -> None:
        unpack_box(built, dest)

    times = interleaved(
        rounds,
        {
            "sc": (lambda: fresh(dest), ours),
            "tar": (
                lambda: fresh(tar_dest).mkdir(parents=True),
                lambda: shell(f"zstd -q -dc {archive} | tar -xf - -C {tar_dest}"),
            ),
        },
    )
    fresh(tar_dest)
    return {
        "scrollcase (sha+checks+relocate)": row(times["sc"], raw),
        "zstd -dc | tar -x": row(times["tar"], raw),
        "speedup": speedup(times["sc"], times["tar"]),
    }, dest


def import_runner(python: Path, home: Path, code: str = IMPORT) -> Callable[[], str]:
    def run() -> str:
        done = subprocess.run(
            [str(python), "-I", "-c", code],
            cwd=home,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
            check=False,
        )
        if done.returncode or done.stderr.strip():
            raise SystemExit(f"{python} -I -c {code!r}: exit {done.returncode}\n{done.stderr[-3000:]}")
        return done.stdout.strip()

    return run


def measure_import(work: Path, box_root: Path, venv_python: Path, rounds: int) -> dict[str, object]:
    """`python -I -c "import torch"` in the unpacked box vs the plain venv; a first untimed run each
    (recorded: the box's first start after unpacking), a numpy + torch smoke run each, then the rounds."""
    box_python = box_root / "venv" / "bin" / "python"
    home = work / "out"
    pyc_before = count_suffix(box_root, ".pyc")
    box_run, venv_run = import_runner(box_python, home), import_runner(venv_python, home)
    first: dict[str, float] = {}
    for name, run in (("box", box_run), ("venv", venv_run)):  # the box's first start after unpacking
        start = time.perf_counter()
        run()
        first[name] = round(time.perf_counter() - start, 3)
    smoke = {"box": import_runner(box_python, home, SMOKE)(), "venv": import_runner(venv_python, home, SMOKE)()}
    times = interleaved(rounds, {"box": (bench_archive.nothing, box_run), "venv": (bench_archive.nothing, venv_run)})
    ratios = sorted(b / v for b, v in zip(times["box"], times["venv"], strict=True))
    return {
        "smoke": smoke,
        "box": {
            "median": round(statistics.median(times["box"]), 3),
            "best": round(min(times["box"]), 3),
            "rounds": [round(t, 3) for t in times["box"]],
        },
        "venv": {
            "median": round(statistics.median(times["venv"]), 3),
            "best": round(min(times["venv"]), 3),
            "rounds": [round(t, 3) for t in times["venv"]],
        },
        "firstRun": first,
        "boxOverVenv": {
            "medianOfMedians": round(statistics.median(times["box"]) / statistics.median(times["venv"]), 2),
            "best": round(min(times["box"]) / min(times["venv"]), 2),
            "roundMedian": round(statistics.median(ratios), 2),
            "roundMin": round(ratios[0], 2),
            "roundMax": round(ratios[-1], 2),
        },
        "boxPycBefore": pyc_before,
        "boxPycAfter": count_suffix(box_root, ".pyc"),
    }


def measure_rss(work: Path, built: dict[str, Any], skip_verify: bool) -> dict[str, object]:
    """pack_tree and unpack_archive each in a fresh child; verify --self-test in a child."""
    box, archive = work / "box", work / "out" / "rss.tar.zst"
    pack_mb, printed = peak_rss_mb(bench_archive.PACK_JOB, str(box), str(archive))
    size, sha = printed.split()
    dest = fresh(work / "out" / "rss-dest")
    unpack_mb, _ = peak_rss_mb(bench_archive.UNPACK_JOB, str(archive), str(dest), size, sha)
    fresh(dest)
    fresh(archive)
    out: dict[str, object] = {
        "packTreeMiB": round(pack_mb, 1),
        "unpackArchiveMiB": round(unpack_mb, 1),
        "repackSha256SameAsBuild": sha == built["sha256"],
    }
    if not skip_verify:
        out["verifySelfTest"] = run_child("verify", str(built["release"]))
    return out


# ---------------------------------------------------------------- report


def _mib(value: object) -> str:
    return "-" if value is None else f"{value:.0f}"


def summarise(results: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    if "pack" in results:
        pack = results["pack"]
        sc, tar = pack["scrollcase"], pack["tar|zstd -T0 -3"]
        out["pack speed vs tar|zstd (target >= 1.2x)"] = bench_archive._speedup_text(pack["speedup"])
        out["pack size vs tar|zstd (target within 1%)"] = f"{(sc['size'] / tar['size'] - 1) * 100:+.2f}%"
    if "unpack" in results:
        out["unpack speed vs zstd|tar (target >= 1.0x)"] = bench_archive._speedup_text(results["unpack"]["speedup"])
    if "import" in results:
        imp = results["import"]
        ratio = imp["boxOverVenv"]
        out["import torch, box time / venv time (target <= 1.1x)"] = (
            f"{ratio['medianOfMedians']}x of medians ({imp['box']['median']} s vs {imp['venv']['median']} s); "
            f"per round median {ratio['roundMedian']}x ({ratio['roundMin']}-{ratio['roundMax']}x)"
        )
    ours = [s["scrollcaseMiB"] for s in results["build"]["stages"].values()]
    if "rss" in results:
        rss = results["rss"]
        ours += [rss["packTreeMiB"], rss["unpackArchiveMiB"]]
        if "verifySelfTest" in rss:
            ours.append(rss["verifySelfTest"]["scrollcaseMiB"])
    out[f"scrollcase's own peak RSS, build stages + pack + unpack + verify (target < {RSS_TARGET_MB} MB)"] = (
        f"max {max(ours):.0f} MiB"
    )
    return out


def report(results: dict[str, Any]) -> str:
    build = results["build"]
    lines = [
        f"box: {build['treeFiles']} files, {build['treeBytes'] / 1e6:.0f} MB; archive {build['size'] / 1e6:.0f} MB; "
        f"{build['pycFiles']} .pyc for {build['pyFiles']} .py in the box (built {build['builtAt']})",
    ]
    if "pack" in results:
        lines += ["", f"{'pack':34} {'best s':>8} {'MB/s':>8} {'size MB':>8}  rounds"]
        for name in ("scrollcase", "tar|zstd -T0 -3"):
            r = results["pack"][name]
            lines.append(f"{name:34} {r['seconds']:8.2f} {r['MBps']:8.0f} {r['size'] / 1e6:8.1f}  {r['rounds']}")
    if "unpack" in results:
        lines += ["", f"{'unpack':34} {'best s':>8} {'MB/s':>8}           rounds"]
        for name in ("scrollcase (sha+checks+relocate)", "zstd -dc | tar -x"):
            r = results["unpack"][name]
            lines.append(f"{name:34} {r['seconds']:8.2f} {r['MBps']:8.0f}           {r['rounds']}")
    if "import" in results:
        imp = results["import"]
        lines += ["", f"{'import torch (python -I)':34} {'median s':>8} {'best s':>8}           rounds"]
        for name in ("box", "venv"):
            r = imp[name]
            lines.append(f"{name:34} {r['median']:8.2f} {r['best']:8.2f}           {r['rounds']}")
        lines.append(f"first start after unpacking (s): {imp['firstRun']}")
        lines.append(f"box .pyc files before/after the import runs: {imp['boxPycBefore']}/{imp['boxPycAfter']}")
    lines += ["", f"{'peak RSS MiB':34} {'scrollcase':>10} {'box python':>10}  seconds"]
    for name, s in [
        ("build: plan + lock read", build["planAndLock"]),
        *((f"build: {k}", v) for k, v in build["stages"].items()),
    ]:
        seconds = build["timings"].get(name.removeprefix("build: "), "")
        lines.append(f"{name:34} {_mib(s['scrollcaseMiB']):>10} {_mib(s['childrenMaxMiB']):>10}  {seconds}")
    rss = results.get("rss", {})
    if rss:
        lines.append(f"{'pack_tree (fresh child)':34} {_mib(rss['packTreeMiB']):>10} {'-':>10}")
        lines.append(f"{'unpack_archive (fresh child)':34} {_mib(rss['unpackArchiveMiB']):>10} {'-':>10}")
    if "verifySelfTest" in rss:
        verify = rss["verifySelfTest"]
        lines.append(
            f"{'verify --self-test':34} {_mib(verify['scrollcaseMiB']):>10} "
            f"{_mib(verify['childrenMaxMiB']):>10}  {verify['seconds']}"
        )
    lines.append(f"1-minute load as each phase started: {results['loadAtPhaseStart']}")
    lines += ["", *(f"{k}: {v}" for k, v in results["summary"].items())]
    return "\n".join(lines)


PHASES = ("pack", "unpack", "import", "rss")


def main() -> int:
    if sys.argv[1:2] == ["_child"]:
        kind, *child_args = sys.argv[2:]
        answer = child_build(*child_args) if kind == "build" else child_verify(*child_args)
        print(json.dumps(answer))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-torch"))
    parser.add_argument("--rounds", type=int, default=5, help="pack and unpack rounds (default: %(default)s)")
    parser.add_argument("--import-rounds", type=int, default=None, help="import rounds (default: 2 x --rounds)")
    parser.add_argument("--rebuild", action="store_true", help="build the box (and the venv) again")
    parser.add_argument("--skip-verify", action="store_true", help="skip the verify --self-test RSS run")
    parser.add_argument(
        "--only", default=",".join(PHASES), help="comma-separated phases to measure, of %(default)s (default: all)"
    )
    parser.add_argument(
        "--recipe",
        type=Path,
        default=RECIPE,
        help="the recipe folder to box (default: %(default)s)",
    )
    parser.add_argument("--uv", type=Path, default=Path(sys.executable).parent / "uv")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not (args.recipe / "recipe.json").is_file():
        parser.error(f"--recipe: {args.recipe} has no recipe.json (pass a recipe folder, e.g. the default)")
    if not only <= set(PHASES):
        parser.error(f"--only: unknown phase(s) {sorted(only - set(PHASES))}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed run still removes its scratch folder
    work: Path = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    built = build_box(work, args.rebuild, args.recipe.resolve())
    venv_python = build_venv(work, args.uv, args.recipe.name) if "import" in only else None
    print(
        f"box ready: {built['treeFiles']} files, {built['treeBytes'] / 1e9:.2f} GB, "
        f"archive {built['size'] / 1e9:.2f} GB",
        flush=True,
    )
    fresh(work / "out").mkdir()
    results: dict[str, Any] = {"build": built}
    if venv_python is not None:
        results["venv"] = json.loads((work / "venv.json").read_text())
    load: dict[str, float] = {}  # 1-minute load average as each phase starts: a busy machine shows here

    def phase(name: str) -> None:
        load[name] = round(os.getloadavg()[0], 2)
        print(f"{name} ... (load {load[name]})", flush=True)

    try:
        if "pack" in only:
            phase(f"pack, {args.rounds} rounds")
            results["pack"] = measure_real_tree(work, work / "box", args.rounds)
        if "unpack" in only:
            phase(f"unpack, {args.rounds} rounds")
            results["unpack"], unpacked = measure_unpack(work, built, args.rounds)
        elif "import" in only:  # the import runs need an unpacked box: one untimed unpack
            unpacked = work / "out" / "unpacked"
            unpack_box(built, unpacked)
        if "import" in only and venv_python is not None:
            phase("import torch")
            results["import"] = measure_import(work, unpacked, venv_python, args.import_rounds or 2 * args.rounds)
            fresh(unpacked)
        if "rss" in only:
            phase("peak RSS")
            results["rss"] = measure_rss(work, built, args.skip_verify)
        phase("end")
    finally:
        fresh(work / "out")
    results["loadAtPhaseStart"] = load
    results["summary"] = summarise(results)
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "maxrssSelfMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(report(results))
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out_dir / f"bench_torch-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
