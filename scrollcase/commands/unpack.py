"""``scrollcase unpack ARCHIVE|RELEASE.json DEST``: check the host's GPU, verify, extract safely, relocate.

The GPU check (:mod:`scrollcase.host.gpucheck`) belongs to this installer command only: ``unpack_archive``,
``verify`` and the build's self-test unpack never ask for a GPU (CUDA boxes are built on CPU runners).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from scrollcase.box.agreement import disagreements, shown
from scrollcase.box.boxjson import BoxJson, parse_box_json
from scrollcase.box.peek import read_member
from scrollcase.box.release import ReleaseManifest, parse_release
from scrollcase.box.unpack import UnpackResult, unpack_archive
from scrollcase.client.install import check_dest_fits
from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import HostError, IntegrityError, Problem, ScrollcaseError, UsageError, describe_path
from scrollcase.host.facts import GpuFacts, HostProbes, gather_gpus
from scrollcase.host.gpucheck import SKIP_FIX, GpuCheckResult, gpu_check
from scrollcase.io.files import ReadErrors, read_bytes
from scrollcase.store.base import SHA256_HEX, read_sidecar, sidecar_path

NAME = "unpack"
HELP = "verify and unpack a box archive into a folder"
DESCRIPTION = (
    "Check a box archive's size and sha256, extract it safely into DEST and relocate "
    "it there.  DEST appears only when everything matched (it must not exist, or be "
    "an empty folder).  Given a *.release.json, the archive named in it is taken from "
    "the same folder and its size and sha256 come from the manifest; given a bare "
    "*.tar.zst, pass --sha256 or keep a '<archive>.sha256' file beside it.  For a CUDA "
    "release, nvidia-smi must first show a driver >= compatibility.minNvidiaDriverVersion "
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


def read_manifest(source: Path) -> ReleaseManifest | None:
    """The release manifest when ``source`` is one (``*.json``); None for a bare archive."""
    return _parse(source) if source.name.endswith(".json") else None


def _parse(source: Path) -> ReleaseManifest:
    return parse_release(_read(source), file=describe_path(source) or str(source))


def expected_digest(
    source: Path, sha256: str | None, size: int | None, manifest: ReleaseManifest | None = None
) -> tuple[Path, int, str]:
    """(archive path, expected size, expected sha256) from a manifest, an option or a sidecar."""
    if source.name.endswith(".json"):
        if sha256 or size is not None:
            raise UsageError(
                "--sha256/--size conflict with a release manifest, which already names them",
                fix="drop --sha256/--size, or pass the .tar.zst instead of the manifest",
            )
        info = (manifest or _parse(source)).archive
        return source.parent / info.name, info.size, info.sha256
    digest = sha256 or _sidecar(source)
    if not SHA256_HEX.match(digest):
        raise UsageError(
            f"--sha256 must be 64 hex digits (got {digest!r})",
            fix="copy the digest from the release manifest or the .sha256 file",
        )
    actual = source.stat().st_size if source.is_file() else -1
    return source, actual if size is None else size, digest.lower()


_MANIFEST_FIX = "check the path of the release manifest"
_READ_MANIFEST = ReadErrors(
    UsageError, missing="cannot read {path}: {strerror}", missing_fix=_MANIFEST_FIX, fix=_MANIFEST_FIX
)


def _read(path: Path) -> bytes:
    return read_bytes(path, _READ_MANIFEST, shown=describe_path(path))


def _sidecar(archive: Path) -> str:
    digest = read_sidecar(archive)
    if digest is None:
        raise UsageError(
            f"no sha256 for {describe_path(archive)}: pass --sha256 or provide {describe_path(sidecar_path(archive))}",
            fix="unpack the .release.json instead, or pass --sha256 HEX",
        )
    return digest


def identity_problems(manifest: ReleaseManifest, box: BoxJson, file: str) -> list[Problem]:
    """Where the archive's box.json names another box, version, target or DEST limit than the manifest."""
    return [
        Problem(
            message="box.json and the release manifest disagree",
            file=file,
            key=key,
            value=f"{shown(inside)!r} vs {shown(outside)!r}",
            fix="unpack the release manifest built with this archive",
        )
        for key, inside, outside in disagreements(box, manifest)
    ]


def check_identity(manifest: ReleaseManifest, archive: Path) -> None:
    """IntegrityError, before a byte is extracted, when box.json names another release than the manifest.

    Only the start of the archive is decompressed; its sha256 is checked by the unpack itself."""
    inner = f"{describe_path(archive)}!box.json"
    try:
        data = read_member(archive, "box.json")
        box = parse_box_json(data, inner) if data is not None else None
    except (OSError, ValueError, ScrollcaseError):
        return  # unreadable, corrupt or invalid: the unpack reports what is wrong (a wrong sha256 first)
    problems = identity_problems(manifest, box, inner) if box is not None else []
    if problems:
        raise IntegrityError(
            f"refusing to unpack: {describe_path(archive)} is not the box its release manifest describes",
            problems=problems,
            fix="unpack the archive and release manifest that `scrollcase build` wrote together",
        )


def check_gpu(manifest: ReleaseManifest | None, source: Path, skip: bool, probes: HostProbes) -> GpuCheckResult:
    """The install-time GPU check for the release (the only I/O: nvidia-smi, for CUDA boxes)."""
    if manifest is None:
        return GpuCheckResult("skip", "a bare archive names no target: unpack its .release.json to check the GPU")
    spec = manifest.target.spec
    if skip and spec.is_cuda:
        return skipped_gpu_check(manifest, describe_path(source))
    host = gather_gpus(probes) if spec.is_cuda else GpuFacts()  # CPU and metal boxes: nothing to ask
    return gpu_check(spec, manifest.compatibility.minNvidiaDriverVersion, manifest.gpu, host, describe_path(source))


def skipped_gpu_check(manifest: ReleaseManifest, source: str) -> GpuCheckResult:
    """``--skip-gpu-check`` for a CUDA box: no check, and a warning that says so."""
    warning = Problem(
        message=f"--skip-gpu-check: the {manifest.targetId} box is installed without checking "
        "this machine's NVIDIA driver and GPUs; it may not run here",
        file=source,
        severity="warning",
    )
    return GpuCheckResult("skip", "skipped (--skip-gpu-check)", (warning,))


def refuse(
    manifest: ReleaseManifest, result: GpuCheckResult, not_done: str = "extracted", other: str = "another target"
) -> HostError:
    """The failed GPU check as the error, before anything was ``not_done``."""
    return HostError(
        f"refusing to install {manifest.boxId} {manifest.version} ({manifest.targetId}): this machine "
        f"cannot run it; nothing was {not_done}",
        problems=result.problems,
        fix=f"fix the problems above, use the box for {other}, or {SKIP_FIX}",
    )


def report_gpu(console: Console, result: GpuCheckResult) -> None:
    """The check's findings on stderr: warnings always, the summary and notices as progress."""
    console.progress(f"gpu check: {result.status}: {result.summary}")
    for problem in result.problems:
        if problem.severity == "warning":
            print(problem.render(), file=console.stderr, flush=True)
        elif problem.severity == "notice":
            console.progress(problem.render())


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
        check_identity(manifest, archive)
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
        {**to_json(result, archive, seconds), "gpuCheck": check.to_json()},
        f"unpacked {result.files} files ({result.uncompressed_bytes / 1e6:.1f} MB) into "
        f"{result.dest} in {seconds:.1f}s; sha256 {result.sha256} verified; "
        f"{result.relocated_files} files relocated",
    )
    return 0


def to_json(result: UnpackResult, archive: Path, seconds: float) -> dict[str, object]:
    return {
        "archive": str(archive),
        "dest": str(result.dest),
        "size": result.size,
        "sha256": result.sha256,
        "files": result.files,
        "entries": result.entries,
        "uncompressedBytes": result.uncompressed_bytes,
        "relocatedFiles": result.relocated_files,
        "seconds": round(seconds, 3),
    }
