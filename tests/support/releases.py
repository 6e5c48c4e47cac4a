"""Synthetic releases for store and publish tests: random bytes as the archive, a real ReleaseManifest."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scrollcase.recipe import Compatibility, Target
from scrollcase.release import (
    ArchiveInfo,
    BuiltBy,
    ReleaseManifest,
    dump_release,
    object_keys,
)
from scrollcase.targets import target_id


@dataclass(frozen=True)
class SyntheticRelease:
    manifest: ReleaseManifest
    manifest_path: Path
    archive_path: Path


def make_manifest(*, box_id: str = "demo-box", version: str = "1.0.0", cuda: str | None = "12.4",
                  size: int, sha256: str, driver: str = "550.54") -> ReleaseManifest:
    accelerator: Literal["cuda", "cpu"] = "cuda" if cuda else "cpu"
    target = Target(platform="linux", arch="x86_64", accelerator=accelerator, cudaVersion=cuda)
    tid = target_id("linux", "x86_64", accelerator, cuda)
    name = f"{box_id}-{version}-{tid}.tar.zst"
    return ReleaseManifest(
        boxId=box_id, modelId="demo-model", runtimeId="torch", version=version, sourceRevision="abc123",
        recipeId=f"{box_id}-{tid}", recipeVersion="1.0.0", target=target, targetId=tid,
        compatibility=Compatibility(minHostAppVersion="2.0.0", minRamGb=8,
                                    minNvidiaDriverVersion=driver if cuda else None),
        archive=ArchiveInfo(name=name, size=size, sha256=sha256),
        pythonEntryPoint="venv/bin/python", modelCacheSubdir="demo", weights="bundled", assets=[],
        keys=object_keys(box_id, version, tid, name),
        builtBy=BuiltBy(scrollcase="0.1.0", pixi="0.40.0", lockSha256="0" * 64, pythonVersion="3.11"),
    )


def write_release(directory: Path, *, size: int = 4096, data: bytes | None = None, box_id: str = "demo-box",
                  version: str = "1.0.0", cuda: str | None = "12.4") -> SyntheticRelease:
    """Write ``<archive>.tar.zst`` (random bytes) and its ``.release.json`` into ``directory``."""
    payload = data if data is not None else os.urandom(size)
    manifest = make_manifest(box_id=box_id, version=version, cuda=cuda, size=len(payload),
                             sha256=hashlib.sha256(payload).hexdigest())
    directory.mkdir(parents=True, exist_ok=True)
    archive_path = directory / manifest.archive.name
    archive_path.write_bytes(payload)
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
