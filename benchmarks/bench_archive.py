"""Pack/unpack benchmark: scrollcase vs `tar | zstd -T0 -3` vs conda-pack, plus peak RSS.

    python benchmarks/bench_archive.py --workdir /tmp/scrollcase-bench [--repeat 3] [--skip-rss]
                                       [--real-tree DIR]

Builds once (cached under --workdir) a ~1 GB conda environment with 30,000+ files — code-like text,
shared-library-like binaries (random + skewed "machine code" + symbol strings), prefix-carrying
scripts and symlinks — INSTALLED by py-rattler from a synthetic local channel (scrollcase.demo.channel),
so it has conda-meta/ like a real box.  It is installed under BOX_PREFIX_PLACEHOLDER (rattler's
alternative_target_prefix) so unpacking includes real relocation work.

Measured in one run, all on warm page cache; each speed-up is given from the best run of each
contender and as the median (min-max) of the per-round ratios, rounds alternating the order:
  pack:   scrollcase.format.archive.pack.pack_tree (level 3, threads -1)
          vs `tar -cf - -C BOX . | zstd -T0 -3`   (throughput, compressed size)
          vs `conda-pack -p ENV -o out.tar.zst --compress-level 3 --n-threads -1`
  unpack: scrollcase.format.archive.unpack.unpack_archive (size + sha256 + safety checks + relocation)
          vs `zstd -dc ARCHIVE | tar -xf - -C DEST`
  rss:    peak RSS of pack_tree and unpack_archive on a ~2 GB box, each in a fresh child process
          (resource.getrusage(RUSAGE_CHILDREN) in a wrapper process)
Prints a table and writes JSON to benchmarks/results/bench_archive-<utc>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrollcase.demo.channel import PREFIX_PLACEHOLDER, PackageFile, PackageSpec, index_channel, write_package  # noqa: E402
from scrollcase.format.archive.pack import pack_tree  # noqa: E402
from scrollcase.format.archive.unpack import unpack_archive  # noqa: E402
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files  # noqa: E402

SUBDIR = "linux-64"
N_PACKAGES = 40
TEXT_FILES_PER_PACKAGE = 800
BIG_LIBS = 4  # 100 MB each, in the first packages
BIG_LIB_SIZE = 100 << 20
CORPUS_SIZE = 24 << 20

# ---------------------------------------------------------------- synthetic content


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz_"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) for _ in range(6000)]


@functools.lru_cache(maxsize=1)
def code_corpus(seed: int = 7) -> bytes:
    """Python-looking text with a realistic zstd ratio (~4-5x): identifiers, keywords, numbers."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    # Zipf: a few names dominate, as in real code
    cumulative = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(words))))
    templates = [
        "def {a}_{b}(self, {c}, {d}={n}):\n",
        "    return {a}.{b}({c}, {d})\n",
        "    {a} = {b}[{n}] + {c}.{d}\n",
        "class {A}{B}({C}):\n",
        '    """{a} {b} {c} {d} {e}."""\n',
        "        if {a} is not None and {b} > {n}:\n",
        '            raise {A}Error("{a} {b} {c}")\n',
        "import {a}.{b}\n",
        "from {a} import {b}, {c}\n",
        "# {a} {b} {c} {d} {e} {f}\n",
        "    for {a} in range({n}):\n",
        "        {a}.append({b}({c}))\n",
        "\n",
    ]
    out: list[str] = []
    size = 0
    while size < CORPUS_SIZE:
        t = rng.choice(templates)
        w = rng.choices(words, cum_weights=cumulative, k=6)
        line = t.format(
            a=w[0],
            b=w[1],
            c=w[2],
            d=w[3],
            e=w[4],
            f=w[5],
            A=w[0].title(),
            B=w[1].title(),
            C=w[2].title(),
            n=rng.randint(0, 4096),
        )
        out.append(line)
        size += len(line)
    return "".join(out).encode()


def library_bytes(size: int, seed: int, corpus: bytes) -> bytes:
    """Shared-library-like: 35% random (compressed sections), 45% skewed opcodes, 20% symbol text."""
    rng = random.Random(seed)
    opcodes = bytes(rng.choices(range(256), weights=[1.0 / (i + 1) ** 1.2 for i in range(256)], k=1 << 20))
    parts: list[bytes] = [b"\x7fELF\x02\x01\x01" + bytes(57)]
    total = 64
    while total < size:
        kind = rng.random()
        n = min(size - total, rng.randint(16 << 10, 256 << 10))
        if kind < 0.35:
            chunk = rng.randbytes(n)
        elif kind < 0.80:
            start = rng.randrange(0, len(opcodes) - n) if n < len(opcodes) else 0
            chunk = opcodes[start : start + n]
        else:
            start = rng.randrange(0, len(corpus) - n)
            chunk = corpus[start : start + n].replace(b"\n", b"\x00")
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)[:size]


def package_spec(index: int, corpus: bytes) -> PackageSpec:
    rng = random.Random(1000 + index)
    name = f"bench-pkg-{index:02d}"
    files: list[PackageFile] = []
    site = f"lib/python3.11/site-packages/{name.replace('-', '_')}"
    for j in range(TEXT_FILES_PER_PACKAGE):
        length = min(int(rng.lognormvariate(9.1, 1.0)), 400_000)
        start = rng.randrange(0, len(corpus) - length)
        files.append(PackageFile(f"{site}/mod{j // 50:02d}/m{j:04d}.py", corpus[start : start + length]))
    for j in range(2):
        module = name.replace("-", "_")
        script = f"#!{PREFIX_PLACEHOLDER}/bin/python3.11\nimport sys\nfrom {module} import main\n"
        files.append(PackageFile(f"bin/{name}-tool{j}", script.encode(), 0o755, prefix_mode="text"))
    pc = f"prefix={PREFIX_PLACEHOLDER}\nlibdir=${{prefix}}/lib\nName: {name}\n"
    files.append(PackageFile(f"lib/pkgconfig/{name}.pc", pc.encode(), prefix_mode="text"))
    lib_size = BIG_LIB_SIZE if index < BIG_LIBS else rng.randint(1 << 20, 3 << 20)
    soname = f"lib/lib{name}.so"
    files.append(PackageFile(soname + ".1", library_bytes(lib_size, index, corpus), 0o755))
    files.append(PackageFile(soname, b"", symlink_to=f"lib{name}.so.1"))
    return PackageSpec(name=name, version="1.0", build="0", subdir=SUBDIR, files=files)


def _write_one(args: tuple[Path, int]) -> str:
    channel, index = args
    corpus = code_corpus()
    return write_package(channel, package_spec(index, corpus)).name


def build_environment(workdir: Path) -> Path:
    """workdir/box: venv/ installed by rattler + box.json with the relocation list (cached)."""
    box = workdir / "box"
    marker = workdir / "box.ready.json"
    if marker.is_file():
        return box
    shutil.rmtree(box, ignore_errors=True)
    channel = workdir / "channel"
    if not (channel / SUBDIR / "repodata.json").is_file():
        print(f"writing {N_PACKAGES} synthetic packages to {channel} (bz2, once) ...", flush=True)
        with ProcessPoolExecutor(max_workers=2) as pool:
            list(pool.map(_write_one, [(channel, i) for i in range(N_PACKAGES)]))
        index_channel(channel, [SUBDIR])
    print("installing them with py-rattler ...", flush=True)
    _rattler_install(channel, box / "venv", workdir / "pkgs-cache")
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(box, BOX_PREFIX_PLACEHOLDER))
    (box / "box.json").write_text(json.dumps({"boxId": "bench", "relocation": info.model_dump()}, indent=2))
    files, size = tree_stats(box)
    marker.write_text(json.dumps({"files": files, "bytes": size, "prefixFiles": len(info.files)}))
    return box


def _rattler_install(channel: Path, prefix: Path, cache: Path) -> None:
    import rattler

    async def run() -> None:
        records = await rattler.solve(
            sources=[channel.resolve().as_uri()],
            specs=[f"bench-pkg-{i:02d}" for i in range(N_PACKAGES)],
            platforms=[rattler.Subdir(SUBDIR), rattler.Subdir("noarch")],
            gateway=rattler.Gateway(),
            channel_relations="disabled",
        )
        await rattler.install(
            records,
            target_prefix=prefix,
            cache_dir=cache,
            show_progress=False,
            alternative_target_prefix=f"{BOX_PREFIX_PLACEHOLDER}/venv",
        )

    asyncio.run(run())


def tree_stats(root: Path) -> tuple[int, int]:
    files = size = 0
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                files += 1
                size += os.path.getsize(path)
    return files, size


def hardlink_copy(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, copy_function=os.link)


def build_2gb_box(workdir: Path, box: Path) -> Path:
    big = workdir / "box2g"
    if not (big / "box.json").is_file():
        shutil.rmtree(big, ignore_errors=True)
        big.mkdir()
        hardlink_copy(box / "venv", big / "venv")
        hardlink_copy(box / "venv", big / "venv2")
        shutil.copy2(box / "box.json", big / "box.json")
    return big


# ---------------------------------------------------------------- measurements


def interleaved(
    repeat: int, runs: dict[str, tuple[Callable[[], object], Callable[[], object]]]
) -> dict[str, list[float]]:
    """Wall times of every run of each method.  Methods alternate, and the order flips every round
    (A B C, C B A, ...), so a noisy moment on a shared machine, or going first, hurts all of them
    alike.  Before each run: its setup (untimed), then ``sync`` so the previous run's dirty pages
    are not written back on this run's clock."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_number in range(repeat):
        order = list(runs.items())
        for name, (setup, run) in order if round_number % 2 == 0 else reversed(order):
            setup()
            os.sync()
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def speedup(ours: list[float], theirs: list[float]) -> dict[str, float]:
    """theirs/ours from the best run of each, and the median/min/max of the same ratio per round
    (both ran back to back in each round, so the per-round ratio is the one least hurt by drift)."""
    per_round = sorted(t / o for o, t in zip(ours, theirs, strict=True))
    return {
        "best": round(min(theirs) / min(ours), 2),
        "roundMedian": round(statistics.median(per_round), 2),
        "roundMin": round(per_round[0], 2),
        "roundMax": round(per_round[-1], 2),
    }


def nothing() -> None:
    return None


def shell(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True)


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        path.unlink()
    return path


def row(times: list[float], raw: int, size: int | None = None) -> dict[str, object]:
    """One contender's line: best seconds (and throughput from it), every round, output size."""
    best = min(times)
    out: dict[str, object] = {"seconds": best, "MBps": raw / best / 1e6, "rounds": [round(t, 3) for t in times]}
    if size is not None:
        out["size"] = size
    return out


def measure(workdir: Path, box: Path, repeat: int) -> dict[str, object]:
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    files, raw = tree_stats(box)
    results: dict[str, object] = {"files": files, "bytes": raw}
    sc_out, tar_out, cp_out = out / "sc.tar.zst", out / "tar.tar.zst", out / "condapack.tar.zst"
    packed = pack_tree(box, sc_out)  # warm the page cache
    conda_pack = Path(sys.executable).parent / "conda-pack"
    # Every run writes a new file, as a CI build does: replacing an existing file costs extra on
    # ext4 (auto_da_alloc flushes the old name's replacement at rename/truncate), for both contenders.
    pack_times = interleaved(
        repeat,
        {
            "sc": (lambda: fresh(sc_out), lambda: pack_tree(box, sc_out)),
            "tar": (lambda: fresh(tar_out), lambda: shell(f"tar -cf - -C {box} . | zstd -q -f -T0 -3 -o {tar_out}")),
            "cp": (
                lambda: fresh(cp_out),
                lambda: shell(
                    f"{conda_pack} -q -p {box / 'venv'} -o {cp_out} --compress-level 3 --n-threads -1 "
                    "--ignore-missing-files"
                ),
            ),
        },
    )
    results["pack"] = {
        "scrollcase": row(pack_times["sc"], raw, packed.size),
        "tar|zstd -T0 -3": row(pack_times["tar"], raw, tar_out.stat().st_size),
        "conda-pack tar.zst -3": row(pack_times["cp"], raw, cp_out.stat().st_size),
    }
    results["packSpeedup"] = {
        "tar|zstd -T0 -3": speedup(pack_times["sc"], pack_times["tar"]),
        "conda-pack tar.zst -3": speedup(pack_times["sc"], pack_times["cp"]),
    }
    dest, tar_dest = out / "dest", out / "tar-dest"

    def ours() -> None:
        unpack_archive(sc_out, dest, expected_size=packed.size, expected_sha256=packed.sha256)

    def theirs() -> None:
        shell(f"zstd -q -dc {sc_out} | tar -xf - -C {tar_dest}")

    unpack_times = interleaved(
        repeat,
        {
            "sc": (lambda: fresh(dest), ours),
            "tar": (lambda: fresh(tar_dest).mkdir(), theirs),
        },
    )
    results["unpack"] = {
        "scrollcase (sha+checks+relocate)": row(unpack_times["sc"], raw),
        "zstd -dc | tar -x": row(unpack_times["tar"], raw),
    }
    results["unpackSpeedup"] = {"zstd -dc | tar -x": speedup(unpack_times["sc"], unpack_times["tar"])}
    fresh(dest)
    fresh(tar_dest)
    return results


def measure_real_tree(workdir: Path, tree: Path, repeat: int) -> dict[str, object]:
    """Pack only, scrollcase vs tar|zstd, on a real directory (e.g. a copy of a Python env).

    Synthetic content is never quite like real files; this keeps the parameter choice honest."""
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    files, raw = tree_stats(tree)
    sc_out, tar_out = out / "real-sc.tar.zst", out / "real-tar.tar.zst"
    pack_tree(tree, sc_out)  # warm the page cache
    times = interleaved(
        repeat,
        {
            "sc": (lambda: fresh(sc_out), lambda: pack_tree(tree, sc_out)),
            "tar": (lambda: fresh(tar_out), lambda: shell(f"tar -cf - -C {tree} . | zstd -q -f -T0 -3 -o {tar_out}")),
        },
    )
    result = {
        "tree": str(tree),
        "files": files,
        "bytes": raw,
        "scrollcase": row(times["sc"], raw, sc_out.stat().st_size),
        "tar|zstd -T0 -3": row(times["tar"], raw, tar_out.stat().st_size),
        "speedup": speedup(times["sc"], times["tar"]),
    }
    fresh(sc_out)
    fresh(tar_out)
    return result


RSS_CHILD = """
import resource, subprocess, sys, json
done = subprocess.run(sys.argv[1:], check=True)
print(json.dumps(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
"""

PACK_JOB = (
    "import sys; from pathlib import Path; from scrollcase.format.archive.pack import pack_tree; "
    "r = pack_tree(Path(sys.argv[1]), Path(sys.argv[2])); print(r.size, r.sha256)"
)
UNPACK_JOB = (
    "import sys; from pathlib import Path; from scrollcase.format.archive.unpack import unpack_archive; "
    "unpack_archive(Path(sys.argv[1]), Path(sys.argv[2]), expected_size=int(sys.argv[3]), "
    "expected_sha256=sys.argv[4])"
)


def peak_rss_mb(job: str, *args: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, sys.executable, "-c", job, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.strip().splitlines()
    kib = int(lines[-1])  # Linux reports ru_maxrss in KiB (macOS in bytes)
    return (kib / 1024 if sys.platform != "darwin" else kib / 2**20), "\n".join(lines[:-1])


def measure_rss(workdir: Path, box: Path) -> dict[str, object]:
    big = build_2gb_box(workdir, box)
    _, size = tree_stats(big)
    archive = workdir / "out" / "box2g.tar.zst"
    pack_mb, printed = peak_rss_mb(PACK_JOB, str(big), str(archive))
    archive_size, sha = printed.split()
    dest = fresh(workdir / "out" / "box2g-dest")
    unpack_mb, _ = peak_rss_mb(UNPACK_JOB, str(archive), str(dest), archive_size, sha)
    fresh(dest)
    return {"boxBytes": size, "packPeakRssMB": pack_mb, "unpackPeakRssMB": unpack_mb}


def report(results: dict[str, object]) -> str:
    pack = results["pack"]
    unpack = results["unpack"]
    raw = results["bytes"]
    assert isinstance(pack, dict) and isinstance(unpack, dict) and isinstance(raw, int)
    lines = [
        f"tree: {results['files']} files, {raw / 1e6:.0f} MB",
        "",
        f"{'pack':34} {'seconds':>8} {'MB/s':>8} {'size MB':>8} {'ratio':>6}",
    ]
    for name, row in pack.items():
        lines.append(
            f"{name:34} {row['seconds']:8.2f} {row['MBps']:8.0f} {row['size'] / 1e6:8.1f} "
            f"{results['bytes'] / row['size']:6.2f}"
        )
    lines += ["", f"{'unpack':34} {'seconds':>8} {'MB/s':>8}"]
    for name, row in unpack.items():
        lines.append(f"{name:34} {row['seconds']:8.2f} {row['MBps']:8.0f}")
    s = results["summary"]
    assert isinstance(s, dict)
    lines += ["", *(f"{k}: {v}" for k, v in s.items())]
    return "\n".join(lines)


def _speedup_text(speedup: object) -> str:
    assert isinstance(speedup, dict)
    return (
        f"{speedup['best']}x best vs best; per round median {speedup['roundMedian']}x "
        f"({speedup['roundMin']}-{speedup['roundMax']}x)"
    )


def summarise(results: dict[str, object]) -> dict[str, object]:
    pack, packs, unpacks = results["pack"], results["packSpeedup"], results["unpackSpeedup"]
    assert isinstance(pack, dict) and isinstance(packs, dict) and isinstance(unpacks, dict)
    sc, tar = pack["scrollcase"], pack["tar|zstd -T0 -3"]
    summary: dict[str, object] = {
        "pack speed vs tar|zstd (target >= 1.2x)": _speedup_text(packs["tar|zstd -T0 -3"]),
        "pack size vs tar|zstd (target within 2%)": f"{(sc['size'] / tar['size'] - 1) * 100:+.2f}%",
        "pack speed vs conda-pack (target >= 3x)": _speedup_text(packs["conda-pack tar.zst -3"]),
        "unpack speed vs zstd|tar (target >= 0.8x)": _speedup_text(unpacks["zstd -dc | tar -x"]),
    }
    real = results.get("realTree")
    if isinstance(real, dict):
        r_sc, r_tar = real["scrollcase"], real["tar|zstd -T0 -3"]
        summary["real tree: pack speed vs tar|zstd"] = _speedup_text(real["speedup"])
        summary["real tree: pack size vs tar|zstd"] = f"{(r_sc['size'] / r_tar['size'] - 1) * 100:+.2f}%"
    if "rss" in results:
        summary["peak RSS MB pack/unpack 2 GB box (target < 300)"] = results["rss"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-rss", action="store_true", help="skip the 2 GB peak-RSS runs")
    parser.add_argument(
        "--real-tree",
        type=Path,
        default=None,
        help="also measure pack (scrollcase vs tar|zstd) on this real directory tree",
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    box = build_environment(args.workdir)
    print(f"box ready: {json.loads((args.workdir / 'box.ready.json').read_text())}", flush=True)
    results = measure(args.workdir, box, args.repeat)
    if args.real_tree is not None:
        results["realTree"] = measure_real_tree(args.workdir, args.real_tree, args.repeat)
    if not args.skip_rss:
        rss = measure_rss(args.workdir, box)
        results["rss"] = {k: round(v, 1) if isinstance(v, float) else v for k, v in rss.items()}
    results["summary"] = summarise(results)
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    print(report(results))
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out_dir / f"bench_archive-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
