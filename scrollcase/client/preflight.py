"""The checks an installer makes before a byte of an archive is extracted (or downloaded): which archive,
size and sha256 to expect, the release's soundness (box.json against the release manifest, the
manifest's own claims: :mod:`scrollcase.format.soundness`), and this machine's GPUs.

``scrollcase unpack`` runs them on a local release manifest or bare archive; ``scrollcase install`` and
``upgrade`` on the manifest they fetched (:func:`~scrollcase.client.install.checked_manifest`).  The GPU
check belongs to installing only: ``unpack_archive``, ``verify`` and the build's self-test unpack never
ask for a GPU (CUDA boxes are built on CPU runners).
"""

from __future__ import annotations

from pathlib import Path

from scrollcase.errors import HostError, Problem, ScrollcaseError, UsageError, describe_path
from scrollcase.format.archive.peek import read_member
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.release import ReleaseManifest, parse_release
from scrollcase.format.soundness import MISSING, Missing, release_problems, require_sound_release
from scrollcase.host.facts import HostProbes
from scrollcase.io.digest import sha256_file
from scrollcase.io.files import ReadErrors, read_bytes
from scrollcase.store.base import SHA256_HEX, read_sidecar, sidecar_path
from scrollcase.targets.gpucheck import SKIP_FIX, GpuCheckResult, gpu_check
from scrollcase.targets.hostgpu import GpuFacts


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


def check_identity(manifest: ReleaseManifest, archive: Path, *, digest_checked: bool = True) -> None:
    """IntegrityError, before a byte is extracted, when the archive's box.json is missing, does not parse
    (an unknown field, a newer schema) or does not describe the release the manifest does
    (:func:`~scrollcase.format.soundness.release_problems`): never skipped.

    Only the start of the archive is decompressed.  ``digest_checked``: the archive's sha256 was checked
    already (a download); when it was not (``unpack`` of a local file), a refusal first hashes the archive,
    and one that is not the release's bytes is left to the unpack, whose wrong-sha256 error says so."""
    inner = f"{describe_path(archive)}!box.json"
    try:
        data = read_member(archive, "box.json")
        box: BoxJson | Missing = MISSING if data is None else parse_box_json(data, inner)
    except OSError:
        return  # the unpack reads the same file and names its error
    except ScrollcaseError:
        if digest_checked or _is_the_release(archive, manifest):
            raise
        return
    problems = release_problems(manifest, manifest_file="the release manifest", box=box, box_file=inner)
    if problems and not digest_checked and not _is_the_release(archive, manifest):
        return
    require_sound_release(
        problems, doing="unpack", archive=describe_path(archive) or str(archive), manifest_file="its release manifest"
    )


def _is_the_release(archive: Path, manifest: ReleaseManifest) -> bool:
    try:
        return sha256_file(archive)[0] == manifest.archive.sha256
    except OSError:
        return False


def check_gpu(manifest: ReleaseManifest | None, source: Path, skip: bool, probes: HostProbes) -> GpuCheckResult:
    """unpack's GPU check for the release ``source`` names (the only I/O: the accelerator's GPU probe)."""
    if manifest is None:
        return GpuCheckResult("skip", "a bare archive names no target: unpack its .release.json to check the GPU")
    kind = manifest.target.spec.kind
    asks = kind.uses_gpu and not skip  # CPU and metal boxes: nothing to ask
    return release_gpu_check(manifest, kind.probe_gpus(probes) if asks else GpuFacts(), skip, describe_path(source))


def release_gpu_check(manifest: ReleaseManifest, gpus: GpuFacts, skip: bool, source: str) -> GpuCheckResult:
    """The install-time check on the manifest (authoritative), against the GPUs ``gpus`` describes."""
    spec = manifest.target.spec
    if skip and spec.kind.uses_gpu:
        return skipped_gpu_check(manifest, source)
    return gpu_check(spec, manifest.compatibility.minNvidiaDriverVersion, manifest.gpu, gpus, source)


def skipped_gpu_check(manifest: ReleaseManifest, source: str) -> GpuCheckResult:
    """``--skip-gpu-check`` for a CUDA box: no check, and a warning that says so."""
    warning = Problem(
        message=f"--skip-gpu-check: the {manifest.targetId} box is installed without checking "
        "this machine's GPU driver and GPUs; it may not run here",
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
