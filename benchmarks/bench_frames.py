"""Framed archives (issue 16): size and speed against the single-frame packer, and the bytes an upgrade
and a rebuild in which one package changed cost.

    python benchmarks/bench_frames.py --workdir /tmp/scrollcase-bench-frames [--repeat 1]

The box is bench_archive's synthetic ~1 GB conda environment (40 packages installed by py-rattler from
a local channel, 30,000+ files, conda-meta records, four 100 MB libraries), cached under --workdir.
"One package changed" is a hard-linked copy of that box in which the largest file of one mid-sized
package is rewritten (new content, same size) — what a release that bumps one package looks like.
``--box DIR --changed wheel/NAME-`` measures an existing box tree instead (e.g. the real torch box).  Measured:

  size:     framed pack_tree vs the single-frame packer scrollcase had before (loaded from git,
            SINGLE_FRAME_REV) vs `tar -cf - -C BOX . | zstd -T0 -3`;
  pack:     seconds of each (warm page cache; the contenders alternate in each round and the order flips
            every round, bench_archive.interleaved; before each timed run, untimed, the previous round's
            output is removed — a file system that discards freed blocks spends ~0.1 s per 400 MB deleting
            it — and dirty pages are written back with sync, so no run waits on the writeback of the one
            before); each ratio best run vs best run and as the median of the per-round ratios;
  unpack:   unpack_archive (sha256, safety checks, relocation) on the framed archive vs
            `zstd -dc | tar -xf -`;
  upgrade:  bytes an upgrade downloads: the frames of the new archive whose sha256 the old one lacks
            (exactly what `scrollcase upgrade` fetches; tests/integration/test_upgrade_cli.py counts them
            at the server), against the archive and against the changed package's own frame;
  rebuild:  pack_tree of the changed box with a warm pack cache (format/archive/packcache.py) holding what the release
            before left (each round starts from that: the changed package's frame is compressed every time)
            vs a full pack of it, alternating as above, and that both give the same bytes; the same pair with
            pack_tree_unhashed, what the build's pack stage runs (its self-test's unpack, which reads every
            byte anyway, computes the archive's sha256).  Before each
            rebuild the two archives the bench keeps for the publish row (7.5 GB with the torch box's
            changed tree: more than this 24 GB machine's page cache holds beside the box and the pack
            cache) are dropped from the page cache, so the rebuild finds the pack cache warm, as the row
            says: without it, rounds that found the cached frames evicted read them from disk (2.2 s
            against 3.0-3.6 s in one run);
  publish:  bytes a publish of the changed release sends when the old one is in the store (the frames
            it holds are copied: docs/publish.md), to a directory store and to a loopback SeaweedFS
            (UploadPartCopy; the bytes of UploadPart bodies counted by a botocore hook), and that the
            published object is byte-identical to the local archive.
``--only publish`` packs the two releases once and measures the publish row alone.
Prints a table and writes JSON to benchmarks/results/bench_frames-<utc>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_archive  # noqa: E402

from scrollcase.format.archive.pack import PackResult, UnhashedPack, pack_tree, pack_tree_unhashed  # noqa: E402
from scrollcase.format.archive.packcache import PackCache  # noqa: E402
from scrollcase.format.archive.packplan import plan_pack  # noqa: E402
from scrollcase.format.archive.unpack import unpack_archive  # noqa: E402
from scrollcase.io.digest import sha256_file  # noqa: E402
from scrollcase.store.base import FileUpload, Store, Transfer  # noqa: E402
from scrollcase.store.local import LocalStore  # noqa: E402
from scrollcase.store.publish import sha256_file_and_pieces  # noqa: E402
from scrollcase.store.reuse import EarlierArchive, plan_reuse  # noqa: E402

SINGLE_FRAME_REV = "e8eba80"  # the last commit whose packer wrote one zstd frame
CHANGED_UNIT = "conda/bench-pkg-17-"  # a mid-sized package of the synthetic box


def _module_at_rev(path: str, name: str, replace: tuple[str, str] | None = None) -> types.ModuleType:
    """``path`` of this repository as it was at SINGLE_FRAME_REV, loaded as module ``name``."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{SINGLE_FRAME_REV}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    if replace is not None:
        source = source.replace(*replace)
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)  # our own history
    return module


def single_frame_packer() -> Callable[[Path, Path], object] | None:
    """The packer as it was before frames, from git, with the tree walk of its day (None when git or the
    revision is not there)."""
    try:
        _module_at_rev("scrollcase/format/archive/treewalk.py", "single_frame_treewalk")
        module = _module_at_rev(
            "scrollcase/format/archive/pack.py",
            "single_frame_archive",
            ("scrollcase.format.archive.treewalk", "single_frame_treewalk"),
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    pack: Callable[[Path, Path], object] = module.pack_tree
    return pack


def fresh(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def empty_dir(path: Path) -> None:
    fresh(path)
    path.mkdir()


def changed_box(workdir: Path, box: Path, unit_prefix: str) -> Path:
    """A hard-linked copy of ``box`` in which the largest file of the first unit named ``unit_prefix``
    is rewritten (a new file, same size, its first 64 KiB new): a new build of that one package."""
    copy = workdir / "box-changed"
    if not (copy / "box.json").is_file():
        shutil.rmtree(copy, ignore_errors=True)
        bench_archive.hardlink_copy(box, copy)
        unit = next(u for u in plan_pack(box).units if u.name.startswith(unit_prefix))
        biggest = max((m for m in unit.members if m.kind == "file"), key=lambda m: m.size)
        target = copy / biggest.name
        data = bytearray(target.read_bytes())
        data[: 1 << 16] = os.urandom(min(1 << 16, len(data)))
        mode = target.stat().st_mode
        target.unlink()
        target.write_bytes(bytes(data))
        target.chmod(mode)
    return copy


def measure_sizes(workdir: Path, box: Path, repeat: int) -> dict[str, Any]:
    """Pack and unpack, the contenders alternating in each round (bench_archive.interleaved)."""
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    framed_path, single_path, pipe_path = out / "framed.tar.zst", out / "single.tar.zst", out / "pipe.tar.zst"
    results: dict[str, Any] = {}
    framed: list[PackResult] = []
    pack_tree(box, framed_path)  # untimed: the box's files into the page cache, as the row says ("warm")
    pipe = f"tar -cf - -C {box} . | zstd -q -T0 -3 -o {pipe_path} -f"
    packs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "framed": (lambda: fresh(framed_path), lambda: framed.append(pack_tree(box, framed_path))),
        "tarZstd": (lambda: fresh(pipe_path), lambda: subprocess.run(pipe, shell=True, check=True)),
    }
    single = single_frame_packer()
    if single is not None:
        packs["single"] = (lambda: fresh(single_path), lambda: single(box, single_path))
    times = bench_archive.interleaved(repeat, packs)
    results |= {f"{name}PackSeconds": seconds for name, seconds in times.items()}
    results["framedSize"] = framed[-1].size
    results["frames"] = len(framed[-1].frames)
    results["uncompressedBytes"] = framed[-1].uncompressed_bytes
    results["tarZstdSize"] = pipe_path.stat().st_size
    if single is not None:
        results["singleSize"] = single_path.stat().st_size
    dest = out / "unpacked"
    packed = framed[-1]
    untar = f"zstd -dc {framed_path} | tar -xf - -C {dest}"
    unpacks: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "unpack": (
            lambda: fresh(dest),
            lambda: unpack_archive(framed_path, dest, expected_size=packed.size, expected_sha256=packed.sha256),
        ),
        "tarUnpack": (lambda: empty_dir(dest), lambda: subprocess.run(untar, shell=True, check=True)),
    }
    results |= {f"{name}Seconds": seconds for name, seconds in bench_archive.interleaved(repeat, unpacks).items()}
    for done in (dest, framed_path, single_path, pipe_path):  # 7.5 GB for the torch box: the rebuild's pack
        fresh(done)  # cache would no longer fit in the page cache of a 24 GB machine beside them
    return results


def measure_upgrade_and_rebuild(
    workdir: Path, box: Path, repeat: int, unit_prefix: str
) -> tuple[dict[str, Any], PackResult, PackResult]:
    """The upgrade's bytes, and the rebuild against a full pack of the same tree, alternating in each round
    (the output of the run before removed and every dirty page written back first: a short burst, the
    rebuild's 2.5 GB on the torch box, would otherwise wait on the writeback of the full pack before it,
    which a real rebuild, minutes after the last one, does not)."""
    out = workdir / "out"
    cache_dir = workdir / "packcache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    # The changed tree first: it hard-links the box's files, as a build links them from the wheel and package
    # caches, so the release before remembers their digests by inode when it fills the pack cache.
    changed = changed_box(workdir, box, unit_prefix)
    old = pack_tree(box, out / "old.tar.zst", cache=PackCache.open(cache_dir))
    full: list[PackResult] = []
    reused: list[tuple[PackResult, PackCache]] = []
    unhashed: list[UnhashedPack] = []

    as_built = cache_state(cache_dir)  # what the release before left: every frame but the changed package's

    def rebuild() -> None:
        cache = PackCache.open(cache_dir)
        reused.append((pack_tree(changed, out / "new-reuse.tar.zst", cache=cache), cache))

    def rebuild_as_built() -> None:
        unhashed.append(pack_tree_unhashed(changed, out / "new-reuse.tar.zst", cache=PackCache.open(cache_dir)))

    def before_rebuild() -> None:
        fresh(out / "new-reuse.tar.zst")
        restore_cache_state(cache_dir, as_built)  # each round compresses the changed package, as a rebuild does
        drop_from_page_cache(out / "old.tar.zst", out / "new-full.tar.zst")

    # Untimed, as the row says ("warm pack cache"): the cached frames into the page cache.  Without it the first
    # round's rebuild read the torch runtime box's 2.6 GB of frames from disk (5.9 s against 1.8-2.4 s after).
    rebuild()
    reused.clear()
    times = bench_archive.interleaved(
        repeat,
        {
            "full": (
                lambda: fresh(out / "new-full.tar.zst"),
                lambda: full.append(pack_tree(changed, out / "new-full.tar.zst")),
            ),
            "rebuild": (before_rebuild, rebuild),
            # what the build's pack stage runs: the archive's sha256 is left to its self-test's unpack
            "fullUnhashed": (
                lambda: fresh(out / "new-full-unhashed.tar.zst"),
                lambda: unhashed.append(pack_tree_unhashed(changed, out / "new-full-unhashed.tar.zst")),
            ),
            "rebuildUnhashed": (before_rebuild, rebuild_as_built),
        },
    )
    fresh(out / "new-full-unhashed.tar.zst")
    new = full[-1]
    have = {f.sha256 for f in old.frames}
    fetched = [f for f in new.frames if f.sha256 not in have]
    package = next(f for f in new.frames if f.name.startswith(unit_prefix))
    return (
        {
            "changedUnit": package.name,
            "upgradeBytes": sum(f.size for f in fetched),
            "upgradeFrames": [f.name for f in fetched],
            "archiveSize": new.size,
            "changedPackageFrame": package.size,
            "fullPackSeconds": times["full"],
            "rebuildPackSeconds": times["rebuild"],
            "fullUnhashedPackSeconds": times["fullUnhashed"],
            "rebuildUnhashedPackSeconds": times["rebuildUnhashed"],
            "rebuildSameBytes": reused[-1][0].sha256 == new.sha256 and all(u.frames == new.frames for u in unhashed),
            "rebuildFramesReused": reused[-1][1].hits,
        },
        old,
        new,
    )


def drop_from_page_cache(*paths: Path) -> None:
    """Write back, then let the kernel drop, the cached pages of ``paths`` (Linux; elsewhere nothing)."""
    advise = getattr(os, "posix_fadvise", None)
    for path in paths:
        if advise is None or not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cache_state(cache_dir: Path) -> dict[Path, bytes | None]:
    """The pack cache's files: its two indexes' bytes, and every frame (None: left where it is)."""
    files = [path for path in cache_dir.rglob("*") if path.is_file()]
    return {path: path.read_bytes() if path.suffix == ".json" else None for path in files}


def restore_cache_state(cache_dir: Path, state: dict[Path, bytes | None]) -> None:
    """The pack cache as ``state`` saw it: frames cached since removed, the indexes as they were."""
    for path in [p for p in cache_dir.rglob("*") if p.is_file() and p not in state]:
        path.unlink()
    for path, data in state.items():
        if data is not None:
            path.write_bytes(data)


OLD_KEY = "boxes/bench/1.0.0/bench-1.0.0.tar.zst"
NEW_KEY = "boxes/bench/1.0.1/bench-1.0.1.tar.zst"
WHOLE_KEY = "boxes/bench/1.0.1-whole/bench-1.0.1.tar.zst"


def publish_pair(store: Store, old: PackResult, new: PackResult) -> tuple[Transfer, float, float]:
    """Put the old archive, then the new one as publish does it: the frames the old one holds are copied
    (plan_reuse, shaped by the store), the rest sent, each piece hashed in one read of the new archive.
    Then the new archive once more under another key, sent whole (what publish did before): its seconds."""
    store.put_file(OLD_KEY, FileUpload(old.path, old.size, old.sha256))
    start = time.perf_counter()
    pieces = store.reuse_layout(new.size, plan_reuse(new.frames, [EarlierArchive(OLD_KEY, "1.0.0", tuple(old.frames))]))
    sha, size, parts = sha256_file_and_pieces(new.path, pieces) if pieces else (new.sha256, new.size, ())
    transfer = store.put_file(NEW_KEY, FileUpload(new.path, size, sha, parts, pieces))
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    store.put_file(WHOLE_KEY, FileUpload(new.path, new.size, new.sha256))
    return transfer, seconds, time.perf_counter() - start


def measure_publish(workdir: Path, old: PackResult, new: PackResult, s3: bool) -> dict[str, Any]:
    """The publish row: bytes sent for the new release, to a directory and to SeaweedFS."""
    results: dict[str, Any] = {"publishArchiveSize": new.size}
    root = workdir / "store"
    shutil.rmtree(root, ignore_errors=True)
    local = LocalStore(root)
    transfer, seconds, whole = publish_pair(local, old, new)
    same = sha256_file(local.path_for(NEW_KEY))[0] == new.sha256
    results["publishLocal"] = {
        "sent": transfer.sent,
        "reused": transfer.reused,
        "seconds": seconds,
        "wholeSeconds": whole,
        "same": same,
    }
    shutil.rmtree(root, ignore_errors=True)
    if s3:
        results["publishS3"] = publish_s3(old, new)
    return results


def publish_s3(old: PackResult, new: PackResult) -> dict[str, Any]:
    from scrollcase.store.s3 import S3Store
    from tests.support.s3servers import new_bucket, s3_client, seaweedfs

    with seaweedfs() as server:
        bucket = new_bucket(server)
        client = s3_client(server)
        wire = {"uploadPart": 0}

        def count(request: Any, event_name: str = "", **_: Any) -> None:
            if event_name.endswith(".UploadPart"):
                wire["uploadPart"] += int(request.headers.get("Content-Length") or 0)

        client.meta.events.register("before-send.s3", count)
        store = S3Store(client, bucket, "bench", endpoint_url=server.endpoint)
        transfer, seconds, whole = publish_pair(store, old, new)
        body = client.get_object(Bucket=bucket, Key=f"bench/{NEW_KEY}")["Body"]
        digest = hashlib.sha256()
        for chunk in body.iter_chunks(1 << 20):
            digest.update(chunk)
    return {
        "sent": transfer.sent,
        "reused": transfer.reused,
        "seconds": seconds,
        "wholeSeconds": whole,
        "same": digest.hexdigest() == new.sha256,
        # on the wire, less the old release's own upload and the whole one after
        "uploadPartBytes": wire["uploadPart"] - old.size - new.size,
        "verifiedCopies": store.verified_copies,
    }


def summarise(r: dict[str, Any]) -> dict[str, Any]:
    def best(key: str) -> float:
        return float(min(r[key]))

    def num(key: str) -> float:
        return float(r[key])

    def round_median(numerator: str, denominator: str) -> float:
        """The median of the per-round ratio: both ran back to back in each round, least hurt by drift."""
        return float(statistics.median(n / d for n, d in zip(r[numerator], r[denominator], strict=True)))

    summary: dict[str, Any] = {
        "upgradeBytesVsArchive": num("upgradeBytes") / num("archiveSize"),
        "upgradeBytesVsPackageFrame": num("upgradeBytes") / num("changedPackageFrame"),
        "rebuildVsFullPack": best("rebuildPackSeconds") / best("fullPackSeconds"),
        "rebuildVsFullPackRoundMedian": round_median("rebuildPackSeconds", "fullPackSeconds"),
        "buildRebuildVsFullPack": best("rebuildUnhashedPackSeconds") / best("fullUnhashedPackSeconds"),
        "buildRebuildVsFullPackRoundMedian": round_median("rebuildUnhashedPackSeconds", "fullUnhashedPackSeconds"),
        "framedVsTarZstdSize": num("framedSize") / num("tarZstdSize"),
        "framedPackSpeedupVsTarZstd": best("tarZstdPackSeconds") / best("framedPackSeconds"),
        "framedPackSpeedupVsTarZstdRoundMedian": round_median("tarZstdPackSeconds", "framedPackSeconds"),
        "unpackSpeedupVsTar": best("tarUnpackSeconds") / best("unpackSeconds"),
        "unpackSpeedupVsTarRoundMedian": round_median("tarUnpackSeconds", "unpackSeconds"),
    }
    if "singleSize" in r:
        summary["framedVsSingleFrameSize"] = num("framedSize") / num("singleSize")
        summary["framedPackVsSingleFrameTime"] = best("framedPackSeconds") / best("singlePackSeconds")
        summary["singlePackSpeedupVsTarZstd"] = best("tarZstdPackSeconds") / best("singlePackSeconds")
        summary["singlePackSpeedupVsTarZstdRoundMedian"] = round_median("tarZstdPackSeconds", "singlePackSeconds")
    return summary


def report(r: dict[str, Any], s: dict[str, Any]) -> str:
    mb = 1e6
    lines = [
        f"box: {r['uncompressedBytes'] / mb:.0f} MB of tar, {r['frames']} frames",
        f"{'':34} {'size MB':>10} {'pack s':>8}",
        f"{'framed pack_tree':34} {r['framedSize'] / mb:>10.1f} {min(r['framedPackSeconds']):>8.2f}",
    ]
    if "singleSize" in r:
        lines.append(
            f"{'single-frame packer (' + SINGLE_FRAME_REV + ')':34} {r['singleSize'] / mb:>10.1f} "
            f"{min(r['singlePackSeconds']):>8.2f}"
        )
    lines += [
        f"{'tar | zstd -T0 -3':34} {r['tarZstdSize'] / mb:>10.1f} {min(r['tarZstdPackSeconds']):>8.2f}",
        f"unpack: unpack_archive {min(r['unpackSeconds']):.2f} s, zstd -dc | tar -x {min(r['tarUnpackSeconds']):.2f} s",
        f"upgrade with {r['changedUnit']} changed: {r['upgradeBytes'] / mb:.2f} MB of {r['archiveSize'] / mb:.1f} MB "
        f"({100 * s['upgradeBytesVsArchive']:.2f}%; {s['upgradeBytesVsPackageFrame']:.2f}x the package's frame); "
        f"frames {r['upgradeFrames']}",
        f"rebuild with the pack cache: {min(r['rebuildPackSeconds']):.2f} s "
        f"vs full pack {min(r['fullPackSeconds']):.2f} s "
        f"({100 * s['rebuildVsFullPack']:.1f}%; per-round median {100 * s['rebuildVsFullPackRoundMedian']:.1f}%), "
        f"{r['rebuildFramesReused']} frames reused, "
        f"same bytes: {r['rebuildSameBytes']}",
        f"the build's pack stage (pack_tree_unhashed: the self-test's unpack hashes the archive): rebuild "
        f"{min(r['rebuildUnhashedPackSeconds']):.2f} s vs full pack {min(r['fullUnhashedPackSeconds']):.2f} s "
        f"({100 * s['buildRebuildVsFullPack']:.1f}%; "
        f"per-round median {100 * s['buildRebuildVsFullPackRoundMedian']:.1f}%)",
        "summary: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()}),
    ]
    return "\n".join(lines)


def pack_pair(workdir: Path, box: Path, unit_prefix: str) -> tuple[PackResult, PackResult]:
    """The old release and the release with one package changed, each packed once (``--only publish``)."""
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    changed = changed_box(workdir, box, unit_prefix)
    return pack_tree(box, out / "old.tar.zst"), pack_tree(changed, out / "new-full.tar.zst")


def publish_summary(r: dict[str, Any]) -> dict[str, Any]:
    size = float(r["publishArchiveSize"])
    summary = {"publishSentVsArchive": r["publishLocal"]["sent"] / size}
    if "publishS3" in r:
        summary["publishS3SentVsArchive"] = r["publishS3"]["sent"] / size
    return summary


def publish_report(r: dict[str, Any]) -> list[str]:
    mb, size = 1e6, r["publishArchiveSize"]
    lines = []
    for where, key in (("a directory", "publishLocal"), ("SeaweedFS", "publishS3")):
        if key in r:
            p = r[key]
            lines.append(
                f"publish to {where} holding the old release: sent {p['sent'] / mb:.2f} MB of {size / mb:.1f} MB "
                f"({100 * p['sent'] / size:.2f}%), reused {p['reused'] / mb:.1f} MB, {p['seconds']:.2f} s "
                f"(sent whole: {p['wholeSeconds']:.2f} s), same bytes: {p['same']}"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/scrollcase-bench-frames"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--box", type=Path, default=None, help="an existing box tree instead of the synthetic one")
    parser.add_argument("--changed", default=CHANGED_UNIT, help="name prefix of the unit to change (e.g. wheel/torch-)")
    parser.add_argument("--only", choices=["publish"], default=None, help="measure only the publish row")
    parser.add_argument("--no-s3", action="store_true", help="publish to a directory store only (no SeaweedFS)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    box = args.box or bench_archive.build_environment(args.workdir)
    results: dict[str, Any] = {"box": str(box)}
    if args.only == "publish":
        old, new = pack_pair(args.workdir, box, args.changed)
        results |= measure_publish(args.workdir, old, new, not args.no_s3)
        summary = publish_summary(results)
        text = "\n".join([*publish_report(results), "summary: " + json.dumps(summary)])
    else:
        results |= measure_sizes(args.workdir, box, args.repeat)
        upgrade, old, new = measure_upgrade_and_rebuild(args.workdir, box, args.repeat, args.changed)
        results |= upgrade
        results |= measure_publish(args.workdir, old, new, not args.no_s3)
        summary = summarise(results) | publish_summary(results)
        results["medianFramedPackSeconds"] = statistics.median(results["framedPackSeconds"])
        text = "\n".join([report(results, summary), *publish_report(results)])
    results["summary"] = summary
    results["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": os.getloadavg()}
    print(text)
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (out_dir / f"bench_frames-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
