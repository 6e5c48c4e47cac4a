"""Publishing a large archive to a loopback SeaweedFS: scrollcase vs plain boto3 ``upload_file``.

    python benchmarks/bench_publish.py [--size-mb 1024] [--rounds 1]   (the order of contenders rotates every round)

Each contender runs in its own child process (so peak RSS is its own) against a fresh SeaweedFS
(same settings for all, so no upload meets a fuller store than another).  scrollcase's time
includes everything `scrollcase publish` does: hashing the archive to check it against the
manifest, uploading with per-part SHA-256 checksums, sidecar, manifest and index.  Client CPU is
the child's own for the timed part; server CPU is SeaweedFS's over the same upload.  Both run on the
same cores, so on a small machine their sum, not the client's speed, sets the wall time.  boto3 runs
``upload_file`` with default settings (8 MiB parts, 10 threads, CRC32 checksums), and again with
SHA-256 part checksums (the integrity scrollcase requires), to separate the cost of the checksum.
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
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scrollcase.format.archive.pack import pack_tree  # noqa: E402
from scrollcase.format.boxjson import dump_box_json  # noqa: E402
from scrollcase.format.release import ReleaseManifest  # noqa: E402
from tests.support.releases import box_json_for, make_manifest, write_large_archive  # noqa: E402
from tests.support.s3servers import S3Server, seaweedfs  # noqa: E402


def child_scrollcase(endpoint: str, bucket: str, archive: Path, manifest_json: Path) -> dict[str, float]:
    from scrollcase.format.release import parse_release
    from scrollcase.store.factory import make_s3_client
    from scrollcase.store.publish import publish
    from scrollcase.store.s3 import S3Store

    manifest = parse_release(manifest_json.read_bytes())
    store = S3Store(make_s3_client(endpoint), bucket, "bench", endpoint_url=endpoint)
    start, cpu = time.perf_counter(), time.process_time()
    publish(store, manifest, archive)
    return {"seconds": time.perf_counter() - start, "cpuSeconds": time.process_time() - cpu}


def child_boto3(endpoint: str, bucket: str, archive: Path, _: Path) -> dict[str, float]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    start, cpu = time.perf_counter(), time.process_time()
    client.upload_file(str(archive), bucket, f"plain/{archive.name}")
    return {"seconds": time.perf_counter() - start, "cpuSeconds": time.process_time() - cpu}


def child_boto3_sha256(endpoint: str, bucket: str, archive: Path, _: Path) -> dict[str, float]:
    """boto3 with the integrity scrollcase insists on: SHA-256 per part, verified by the server."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    start, cpu = time.perf_counter(), time.process_time()
    client.upload_file(str(archive), bucket, f"plain/{archive.name}", ExtraArgs={"ChecksumAlgorithm": "SHA256"})
    return {"seconds": time.perf_counter() - start, "cpuSeconds": time.process_time() - cpu}


def server_cpu(server: S3Server) -> float:
    """CPU seconds the server process has used so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CHILDREN = {"scrollcase": child_scrollcase, "boto3": child_boto3, "boto3-sha256": child_boto3_sha256}


def run_child(name: str, server: S3Server, bucket: str, archive: Path, manifest: Path) -> dict[str, float]:
    env = {
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
        "PATH": "/usr/bin:/bin",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, server.endpoint, bucket, str(archive), str(manifest)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def large_release(tmp: Path, size: int) -> ReleaseManifest:
    """A real (if synthetic) box of ``size`` random bytes plus its box.json, as publish requires, packed
    at level 1 (random bytes stay their size) without holding the payload in memory."""
    draft = make_manifest(box_id="bench-box", size=0, sha256="0" * 64)
    tree = tmp / "box"
    tree.mkdir()
    (tree / "box.json").write_bytes(dump_box_json(box_json_for(draft)))
    write_large_archive(tree / "payload.bin", size)
    packed = pack_tree(tree, tmp / draft.archive.name, level=1)
    shutil.rmtree(tree)
    return draft.model_copy(
        update={"archive": draft.archive.model_copy(update={"size": packed.size, "sha256": packed.sha256})}
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", nargs=5, metavar=("NAME", "ENDPOINT", "BUCKET", "ARCHIVE", "MANIFEST"))
    args = parser.parse_args()
    if args.child:
        name, endpoint, bucket, archive, manifest = args.child
        result = CHILDREN[name](endpoint, bucket, Path(archive), Path(manifest))
        result["peakRssMiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    import boto3

    size = args.size_mb * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        from scrollcase.format.release import dump_release

        manifest = large_release(Path(tmp), size)
        archive = Path(tmp) / manifest.archive.name
        manifest_path = Path(tmp) / "bench.release.json"
        manifest_path.write_bytes(dump_release(manifest))
        rows: list[tuple[str, int, dict[str, float]]] = []
        names = list(CHILDREN)
        for round_number in range(args.rounds):
            # The order rotates every round, so no contender always goes first or last.
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                # A fresh server for every upload: each contender meets the same empty store, and
                # rounds do not fill the server's volumes.
                with seaweedfs() as server:
                    client = boto3.client(
                        "s3",
                        endpoint_url=server.endpoint,
                        aws_access_key_id=server.access_key,
                        aws_secret_access_key=server.secret_key,
                        region_name="us-east-1",
                    )
                    client.create_bucket(Bucket="bench")
                    before = server_cpu(server)
                    result = run_child(name, server, "bench", archive, manifest_path)
                    result["serverCpuSeconds"] = server_cpu(server) - before
                    rows.append((name, round_number, result))
    print(f"archive: {args.size_mb} MiB, server: SeaweedFS on 127.0.0.1")
    print(
        f"{'contender':<12} {'round':>5} {'seconds':>9} {'MiB/s':>8} {'peak RSS MiB':>13} "
        f"{'client CPU s':>13} {'server CPU s':>13} {'total CPU s':>12}"
    )
    for name, round_number, result in sorted(rows, key=lambda r: (r[1], names.index(r[0]))):
        seconds, rss = result["seconds"], result["peakRssMiB"]
        client_cpu, server_cpu_s = result["cpuSeconds"], result["serverCpuSeconds"]
        print(
            f"{name:<12} {round_number:>5} {seconds:>9.2f} {args.size_mb / seconds:>8.1f} {rss:>13.1f} "
            f"{client_cpu:>13.2f} {server_cpu_s:>13.2f} {client_cpu + server_cpu_s:>12.2f}"
        )
    print(summary(rows))


def summary(rows: list[tuple[str, int, dict[str, float]]]) -> str:
    """Medians per contender, and scrollcase's speed-up over plain boto3 per round and overall."""
    seconds: dict[str, dict[int, float]] = {}
    for name, round_number, result in rows:
        seconds.setdefault(name, {})[round_number] = result["seconds"]
    medians = {name: statistics.median(by_round.values()) for name, by_round in seconds.items()}
    # Client and server share this machine's cores, so the CPU both spend bounds the wall time.
    cpu = {
        name: statistics.median(r["cpuSeconds"] + r["serverCpuSeconds"] for n, _, r in rows if n == name)
        for name in seconds
    }
    ratios = [seconds["boto3"][r] / seconds["scrollcase"][r] for r in sorted(seconds["scrollcase"])]
    lines = [
        "median seconds: " + ", ".join(f"{name} {value:.2f}" for name, value in medians.items()),
        "median CPU seconds, client + server: " + ", ".join(f"{name} {value:.2f}" for name, value in cpu.items()),
        f"scrollcase vs boto3 defaults (target >= 1x): {medians['boto3'] / medians['scrollcase']:.2f}x on "
        f"medians; per round " + ", ".join(f"{r:.2f}x" for r in ratios),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
