"""What signing adds to a publish (#34): the demo's release published to a fresh directory store without signed
metadata and to one set up by `scrollcase trust init`, side by side (the order alternating each round), through
the CLI in a fresh process (what a release job pays) and in-process (``store.publish.publish``, no interpreter
start).  Prints each run and the medians.

    python benchmarks/bench_sign_publish.py [--release RELEASE.json] [--rounds 7]

Without ``--release`` it runs ``scrollcase demo`` once in a temporary folder for the release.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scrollcase.format.release import load_release
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.signing import init_store, sign_release
from scrollcase.trust.keys import ONLINE_ROLES, generate_keys, load_keys

KINDS = ("plain", "signed")


def demo_release(work: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", str(work / "demo"), "-q"], check=False
    )
    if done.returncode != 0:
        sys.exit(f"scrollcase demo failed ({done.returncode})")
    (release,) = (work / "demo" / ".scrollcase" / "dist").glob("*.release.json")
    return release


def fresh_store(root: Path, kind: str, keys: Path) -> Path:
    if kind == "signed":
        init_store(LocalStore(root), generate_keys(keys), [])
    return root


def cli_run(release: Path, store: Path, keys: Path) -> float:
    argv = [sys.executable, "-m", "scrollcase", "publish", str(release), "--to", str(store), "--keys", str(keys), "-q"]
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def cli_cpu_run(release: Path, store: Path, keys: Path) -> float:
    """The same, counted in the child's CPU seconds (user + system): steadier than wall time on a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_run(release, store, keys)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def in_process_run(release: Path, store: Path, keys: Path) -> float:
    manifest = load_release(release)
    online = load_keys(keys, {}, ONLINE_ROLES)
    start = time.perf_counter()
    publish(LocalStore(store), manifest, release.with_name(manifest.archive.name), keys=online)
    return time.perf_counter() - start


def signing_step(release: Path, work: Path, rounds: int) -> None:
    """The signing step alone, as publish runs it after the index (``sign_release``): the release published to a
    plain store, the store then set up (no release adopted), the step timed."""
    manifest = load_release(release)
    keys = generate_keys(work / "keys")
    times = []
    for n in range(rounds):
        store = LocalStore(work / f"step-{n}")
        publish(store, manifest, release.with_name(manifest.archive.name))
        init_store(store, keys, [])
        start = time.perf_counter()
        sign_release(store, manifest, keys, progress=lambda _: None)
        times.append(time.perf_counter() - start)
    runs = ", ".join(f"{1000 * t:.1f}" for t in times)
    print(f"sign_release alone: {runs} ms; median {1000 * statistics.median(times):.1f} ms")


def measure(name: str, run: Callable[[Path, Path, Path], float], release: Path, work: Path, rounds: int) -> None:
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for n in range(rounds):
        for kind in KINDS if n % 2 == 0 else KINDS[::-1]:
            keys = work / "keys"
            store = fresh_store(work / f"{name}-{n}-{kind}", kind, keys)
            times[kind].append(run(release, store, keys))
    plain, signed = (statistics.median(times[kind]) for kind in KINDS)
    print(f"{name}: " + "; ".join(f"{kind} {', '.join(f'{t:.3f}' for t in times[kind])} s" for kind in KINDS))
    print(
        f"{name}: median plain {plain:.3f} s, signed {signed:.3f} s: signing adds {signed - plain:+.3f} s "
        f"({100 * (signed - plain) / plain:+.1f}%); best {min(times['plain']):.3f} vs {min(times['signed']):.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sign-") as folder:
        work = Path(folder)
        release = args.release.resolve() if args.release else demo_release(work)
        print(f"release {release} ({load_release(release).archive.size} bytes archive)")
        signing_step(release, work, args.rounds)
        measure("in-process", in_process_run, release, work, args.rounds)
        measure("cli", cli_run, release, work, args.rounds)
        measure("cli-cpu", cli_cpu_run, release, work, args.rounds)


if __name__ == "__main__":
    main()
