"""Synthetic releases for store and publish tests: a real ReleaseManifest and a real (tiny) box archive.

The archive is a scrollcase-packed tree holding the ``box.json`` that matches the manifest (publish
reads it) and ``payload.bin``, random bytes that give the archive its size.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import BoxJson, dump_box_json
from scrollcase.format.release import (
    ArchiveInfo,
    BuiltBy,
    CheckOutcome,
    ReleaseManifest,
    SbomInfo,
    SelfTestReport,
    dump_release,
    object_keys,
)
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo
from scrollcase.recipe.model import Compatibility, SelfTest, Target
from scrollcase.targets.evidence import GpuEvidence, RuntimePackage
from scrollcase.targets.vocabulary import target_id


@dataclass(frozen=True)
class SyntheticRelease:
    manifest: ReleaseManifest
    manifest_path: Path
    archive_path: Path


def make_manifest(
    *,
    box_id: str = "demo-box",
    version: str = "1.0.0",
    cuda: str | None = "12.4",
    size: int,
    sha256: str,
    driver: str = "550.54",
) -> ReleaseManifest:
    """A manifest as `scrollcase build` writes it: self-test passed, GPU evidence that fits the target."""
    accelerator: Literal["cuda", "cpu"] = "cuda" if cuda else "cpu"
    target = Target(platform="linux", arch="x86_64", accelerator=accelerator, cudaVersion=cuda)
    tid = target_id("linux", "x86_64", accelerator, cuda)
    name = f"{box_id}-{version}-{tid}.tar.zst"
    return ReleaseManifest(
        boxId=box_id,
        modelId="demo-model",
        runtimeId="torch",
        version=version,
        sourceRevision="abc123",
        recipeId=f"{box_id}-{tid}",
        recipeVersion="1.0.0",
        target=target,
        targetId=tid,
        compatibility=Compatibility(
            minHostAppVersion="2.0.0", minRamGb=8, minNvidiaDriverVersion=driver if cuda else None
        ),
        archive=ArchiveInfo(name=name, size=size, sha256=sha256),
        pythonEntryPoint="venv/bin/python",
        modelCacheSubdir="demo",
        weights="bundled",
        assets=[],
        keys=object_keys(box_id, version, tid, name),
        builtBy=BuiltBy(scrollcase="0.1.0", pixi="0.40.0", lockSha256="0" * 64, pythonVersion="3.11"),
        selfTest=SelfTestReport(passed=True, checks=[CheckOutcome(name="import json", kind="import", passed=True)]),
        gpu=evidence_for(cuda),
    )


def evidence_for(cuda: str | None) -> GpuEvidence:
    """GPU evidence from the box's files: the CUDA runtime wheel of ``cuda``, or none for a CPU box."""
    if cuda is None:
        return GpuEvidence(source="none")
    package = RuntimePackage(name=f"nvidia-cuda-runtime-cu{cuda.split('.')[0]}", version=f"{cuda}.127", kind="pypi")
    return GpuEvidence(cudaRuntime=cuda, source="files", runtimePackages=[package])


def box_json_for(manifest: ReleaseManifest) -> BoxJson:
    """The ``box.json`` a build of ``manifest`` packs at the archive's root."""
    return BoxJson(
        boxId=manifest.boxId,
        modelId=manifest.modelId,
        runtimeId=manifest.runtimeId,
        version=manifest.version,
        sourceRevision=manifest.sourceRevision,
        recipeId=manifest.recipeId,
        target=manifest.target,
        targetId=manifest.targetId,
        pythonVersion=manifest.builtBy.pythonVersion,
        pythonEntryPoint=manifest.pythonEntryPoint,
        envDir="venv",
        modelCacheSubdir=manifest.modelCacheSubdir,
        weights=manifest.weights,
        assets=[],
        selfTest=SelfTest(imports=["json"]),
        relocation=RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[]),
        gpu=manifest.gpu,
    )


def pack_box(path: Path, box: BoxJson, payload: bytes) -> tuple[int, str]:
    """Pack ``box.json`` and ``payload.bin`` into the archive ``path``; (size, sha256)."""
    tree = Path(tempfile.mkdtemp(prefix="synthetic-box-"))
    try:
        (tree / "box.json").write_bytes(dump_box_json(box))
        (tree / "payload.bin").write_bytes(payload)
        packed = pack_tree(tree, path, level=1)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return packed.size, packed.sha256


def write_release(
    directory: Path,
    *,
    size: int = 4096,
    data: bytes | None = None,
    box_id: str = "demo-box",
    version: str = "1.0.0",
    cuda: str | None = "12.4",
    sbom: bytes | None = None,
) -> SyntheticRelease:
    """Write ``<archive>.tar.zst`` and its ``.release.json`` (with ``sbom``: and that ``.sbom.json``,
    named in the manifest) into ``directory``: a box whose payload is
    ``data``, or random bytes sized so that the archive is about ``size`` bytes (within the tar padding,
    a few hundred bytes; read the exact size from ``manifest.archive.size``)."""
    draft = make_manifest(box_id=box_id, version=version, cuda=cuda, size=0, sha256="0" * 64)
    directory.mkdir(parents=True, exist_ok=True)
    archive_path = directory / draft.archive.name
    box = box_json_for(draft)
    if data is not None:
        packed_size, packed_sha = pack_box(archive_path, box, data)
    else:
        length = size
        for _ in range(2):  # random bytes are stored raw: the second pass lands close to ``size``
            packed_size, packed_sha = pack_box(archive_path, box, os.urandom(length))
            if packed_size == size or length == 0:
                break
            length = max(0, length - (packed_size - size))
    manifest = draft.model_copy(
        update={"archive": draft.archive.model_copy(update={"size": packed_size, "sha256": packed_sha})}
    )
    if sbom is not None:
        name = manifest.archive.name.replace(".tar.zst", ".sbom.json")
        (directory / name).write_bytes(sbom)
        info = SbomInfo(name=name, size=len(sbom), sha256=hashlib.sha256(sbom).hexdigest())
        manifest = manifest.model_copy(update={"sbom": info})
    manifest_path = directory / manifest.archive.name.replace(".tar.zst", ".release.json")
    manifest_path.write_bytes(dump_release(manifest))
    return SyntheticRelease(manifest, manifest_path, archive_path)


def write_large_archive(path: Path, size: int, chunk: int = 8 * 1024 * 1024) -> str:
    """Write ``size`` pseudo-random bytes without holding them in memory; return the sha256."""
    digest = hashlib.sha256()
    block = os.urandom(chunk)
    with path.open("wb") as out:
        written = 0
        counter = 0
        while written < size:
            # Vary every block so no store can deduplicate it away.
            piece = (counter.to_bytes(8, "little") + block[8:])[: min(chunk, size - written)]
            out.write(piece)
            digest.update(piece)
            written += len(piece)
            counter += 1
    return digest.hexdigest()
