"""``scrollcase unpack ARCHIVE|RELEASE.json DEST``: check the host's GPU, verify, extract safely, relocate.

The checks before extracting (digest, identity, GPU) are :mod:`scrollcase.client.preflight`'s.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from scrollcase.client.install import check_dest_fits
from scrollcase.client.preflight import check_gpu, check_identity, expected_digest, read_manifest, refuse
from scrollcase.commands import CommandArgs, SubParsers, add_command, handler, report_gpu, unpack_json
from scrollcase.console import Console
from scrollcase.errors import UsageError, describe_path
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.host.facts import HostProbes

NAME = "unpack"
HELP = "verify and unpack a box archive into a folder"
DESCRIPTION = (
    "Check a box archive's size and sha256, extract it safely into DEST and relocate "
    "it there.  DEST appears only when everything matched (it must not exist, or be "
    "an empty folder).  Given a *.release.json, the archive named in it is taken from "
    "the same folder and its size and sha256 come from the manifest; given a bare "
    "*.tar.zst, pass --sha256 or keep a '<archive>.sha256' file beside it.  For a CUDA "
    "release, the host's GPU driver must first be >= compatibility.minNvidiaDriverVersion "
    "and a GPU that one of gpu.framework.archList runs on; otherwise nothing is "
    "extracted and the exit code is 11 (HostError)."
)


@dataclass(frozen=True)
class UnpackArgs(CommandArgs):
    source: Path
    dest: Path
    sha256: str | None
    size: int | None
    skip_gpu_check: bool


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument(
        "source",
        metavar="ARCHIVE|RELEASE.json",
        type=Path,
        help="a box archive (.tar.zst) or its release manifest (.release.json)",
    )
    p.add_argument("dest", metavar="DEST", type=Path, help="folder to create")
    p.add_argument("--sha256", help="expected sha256 of a bare archive (default: <archive>.sha256)")
    p.add_argument("--size", type=int, help="expected size in bytes of a bare archive (optional)")
    p.add_argument(
        "--skip-gpu-check",
        action="store_true",
        help="install a CUDA box without checking this machine's NVIDIA driver and GPUs (prints a warning)",
    )
    p.set_defaults(handler=handler(UnpackArgs, run))


def run(args: UnpackArgs, console: Console, probes: HostProbes | None = None) -> int:
    if args.source.name in ("", ".", ".."):
        raise UsageError(
            f"ARCHIVE|RELEASE.json must name a file (got {str(args.source)!r})",
            fix="pass the *.release.json (or the .tar.zst) to unpack",
        )
    manifest = read_manifest(args.source)
    archive, size, sha256 = expected_digest(args.source, args.sha256, args.size, manifest)
    if manifest is not None:
        check_dest_fits(args.dest, manifest.relocation, "; nothing was extracted")
    if manifest is not None and archive.is_file() and archive.stat().st_size == size:
        check_identity(manifest, archive, digest_checked=False)
    check = check_gpu(manifest, args.source, args.skip_gpu_check, probes or HostProbes())
    if manifest is not None and check.errors:
        raise refuse(manifest, check)
    report_gpu(console, check)
    console.progress(f"unpacking {describe_path(archive)} -> {describe_path(args.dest)}")
    start = time.monotonic()
    meter = console.meter("unpacking", size)
    result = unpack_archive(archive, args.dest, expected_size=size, expected_sha256=sha256, on_bytes=meter)
    meter.finish()
    seconds = time.monotonic() - start
    console.result(
        {**unpack_json(result, archive, seconds), "gpuCheck": check.to_json()},
        f"unpacked {result.files} files ({result.uncompressed_bytes / 1e6:.1f} MB) into "
        f"{result.dest} in {seconds:.1f}s; sha256 {result.sha256} verified; "
        f"{result.relocated_files} files relocated",
    )
    return 0
