"""`scrollcase install` and `upgrade` against a flooding HTTP store (issue 32: peak RSS under 150 MB whatever the
store sends, and disk use under the declared sizes).

    python benchmarks/bench_hostile_store.py [--workdir /tmp/scrollcase-bench-hostile] [--payload 4000000]

Two framed releases of a synthetic box (tests/support/framedreleases.py: 4 packages of ``--payload`` random bytes,
1.0.0 and 1.0.1 differing in one package) are published by the real publish into a directory store and served on
127.0.0.1 by tests/support/hostilehttp.py in a thread of this process.  Each scenario runs
`python -m scrollcase … --json` in a fresh process with its own $SCROLLCASE_CACHE_DIR:

  baseline:      install from the honest server (for scale);
  endless index: the index is a 200 without Content-Length and zeros without end;
  huge length:   the index claims Content-Length 300 MiB, then zeros;
  endless archive: the archive is a 200 without Content-Length and zeros without end;
  endless frame: 1.0.0 installed honestly, then `upgrade`, whose ranged frame reads get a correct 206 and
                 Content-Range and then zeros without end (before #32: ~300 MB written per frame).

Measured per scenario: the exit code, the child's peak RSS (GNU ``/usr/bin/time -f %M``), the most disk the
cache and DEST held at once beyond what they held before (polled every 20 ms while it runs; the declared size is
what the release says may be written: 0 for an index, the archive's size, the new frames' sizes), the bytes the
server sent, the wall time.  Prints a table; writes JSON to benchmarks/results/bench_hostile_store-<utc>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import hostilehttp  # noqa: E402
from tests.support.framedreleases import BOX  # noqa: E402
from tests.support.hostilehttp import Attack, Flood, HostileState, published_store, serve_hostile  # noqa: E402
from tests.support.releases import SyntheticRelease  # noqa: E402

RSS_BAR_MB = 150.0
TIME = "/usr/bin/time"  # GNU time: the child's own peak RSS


@dataclass
class Outcome:
    scenario: str
    exit_code: int
    error: str
    peak_rss_mb: float
    disk_peak_bytes: int
    declared_bytes: int
    server_sent_bytes: int
    seconds: float


def tree_bytes(*folders: Path) -> int:
    total = 0
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                with contextlib.suppress(OSError):  # a temp file renamed or removed under the walk
                    total += os.lstat(os.path.join(root, name)).st_size
    return total


def run_cli(argv: list[str], cache: Path, watch: list[Path]) -> tuple[int, str, float, int, float]:
    """(exit code, error name, peak RSS MiB, most bytes under ``watch`` beyond the start, seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env |= {"SCROLLCASE_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    before = tree_bytes(*watch)
    peak = before
    start = time.monotonic()
    # GNU time's %M, not this process's wait4: Linux carries a forked child's high-water mark (this process's
    # ~100 MB) across exec, so ru_maxrss of a direct child would report this process, not scrollcase
    rss_file = cache.parent.with_name(f"{cache.parent.name}.rss")  # beside the watched folder, not in it
    timed = [TIME, "-f", "%M", "-o", str(rss_file), sys.executable, "-m", "scrollcase", *argv, "--json"]
    child = subprocess.Popen(timed, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, tree_bytes(*watch))

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    assert child.stdout is not None
    out = child.stdout.read()
    child.wait()
    seconds = time.monotonic() - start
    done.set()
    watcher.join()
    peak = max(peak, tree_bytes(*watch))
    error = json.loads(out).get("error", "") if out.strip() else ""
    rss_kib = int(rss_file.read_text().split()[-1])
    return child.returncode, error, rss_kib / 1024, peak - before, seconds


def scenario(
    name: str,
    work: Path,
    state: HostileState,
    url: str,
    argv: Callable[[Path], list[str]],
    declared: int,
    attack: tuple[str, Attack] | None,
    prepare: Callable[[Path, Path], None] | None = None,
) -> Outcome:
    home = work / name.replace(" ", "-")
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    cache, dest = home / "cache", home / "box"
    state.attacks.clear()
    if prepare is not None:
        prepare(cache, dest)
    state.flooded.clear()
    sent_before = state.sent
    if attack is not None:
        state.attacks[attack[0]] = attack[1]
    code, error, rss, disk, seconds = run_cli(argv(dest), cache, [home])  # the cache is inside home
    sent = state.sent - sent_before + sum(state.flooded.values())
    return Outcome(name, code, error, round(rss, 1), disk, declared, sent, round(seconds, 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-hostile"))
    parser.add_argument("--payload", type=int, default=4_000_000, help="bytes per package (4 packages)")
    parser.add_argument(
        "--flood-cap",
        type=int,
        default=hostilehttp.FLOOD_CAP,
        help="bytes after which a flood stops by itself "
        "(for a run against a scrollcase that does not stop reading: it then reads them all)",
    )
    args = parser.parse_args()
    hostilehttp.FLOOD_CAP = args.flood_cap
    work: Path = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    releases, store = published_store(work / "releases", payload=args.payload)
    new: SyntheticRelease = releases["1.0.1"]
    old_frames = {f.sha256 for f in releases["1.0.0"].manifest.archive.frames or []}
    new_frames = sum(f.size for f in new.manifest.archive.frames or [] if f.sha256 not in old_frames)
    state = HostileState()
    outcomes: list[Outcome] = []
    with serve_hostile(store, state) as server:
        url = server.url

        def install(dest: Path) -> list[str]:
            return ["install", "--store", url, "--box", BOX, str(dest)]

        def install_old(cache: Path, dest: Path) -> None:
            code, *_ = run_cli(["install", "--store", url, "--box", BOX, "--version", "1.0.0", str(dest)], cache, [])
            assert code == 0, "the honest install of 1.0.0 failed"

        runs: list[tuple[str, Callable[[Path], list[str]], int, tuple[str, Attack] | None, object]] = [
            ("baseline", install, -1, None, None),  # no bound: archive, frame cache and tree are all kept
            ("endless index", install, 0, ("/index.json", Flood()), None),
            ("huge length", install, 0, ("/index.json", Flood(length=300 << 20)), None),
            ("endless archive", install, new.manifest.archive.size, (".tar.zst", Flood()), None),
            ("endless frame", lambda d: ["upgrade", "--store", url, str(d)], new_frames, (".tar.zst", Flood(True)), 1),
        ]
        for name, argv, declared, attack, needs_old in runs:
            prepare = install_old if needs_old else None
            outcomes.append(scenario(name, work, state, url, argv, declared, attack, prepare))
    report(outcomes)
    results = REPO / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (results / f"bench_hostile_store-{stamp}.json").write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    return 0 if all(o.peak_rss_mb < RSS_BAR_MB for o in outcomes) else 1


def report(outcomes: list[Outcome]) -> None:
    head = f"{'scenario':<16} {'exit':>4} {'error':<15} {'RSS MiB':>8} {'disk peak':>11} {'declared':>10}"
    print(f"{head} {'sent':>12} {'s':>6}")
    for o in outcomes:
        print(
            f"{o.scenario:<16} {o.exit_code:>4} {o.error:<15} {o.peak_rss_mb:>8.1f} {o.disk_peak_bytes:>11,} "
            f"{o.declared_bytes:>10,} {o.server_sent_bytes:>12,} {o.seconds:>6.2f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
