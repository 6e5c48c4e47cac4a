"""The release manifest (``*.release.json``): what a host app reads to fetch, check and run a box."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from scrollcase.errors import IntegrityError, UsageError, describe_path
from scrollcase.format.identity import BoxName, BoxTarget
from scrollcase.format.provenance import BuildProvenance
from scrollcase.format.relocate import RelocationInfo, max_dest_bytes
from scrollcase.format.versions import FRAME_FORMAT, NewerFormatError, refuse_newer
from scrollcase.io.documents import canonical_json, parse_json_model
from scrollcase.io.files import ReadErrors, read_bytes
from scrollcase.recipe.model import (
    Compatibility,
    MajorMinor,
    RelPath,
    SemVer,
    Sha256,
    document_json_schema,
)
from scrollcase.targets.evidence import GpuEvidence

RELEASE_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _file_name(value: str) -> str:
    """A plain file name: it is joined to the manifest's folder and to store keys, so no path."""
    if value in ("", ".", "..") or any(c in value for c in "/\\\x00") or (len(value) > 1 and value[1] == ":"):
        raise ValueError(
            "must be a plain file name (no '/', '\\', drive or '..'), e.g. box-1.0.0-linux-x86_64-cpu.tar.zst"
        )
    return value


FileName = Annotated[str, AfterValidator(_file_name)]


class ArchiveFrame(_Model):
    """One independent zstd frame of the archive (one package, box.json, one asset…): an upgrade
    fetches only the frames it does not hold (format/archive/frames.py checks the table against the archive)."""

    name: str
    offset: Annotated[int, Field(ge=0, strict=True)]
    size: Annotated[int, Field(gt=0, strict=True)]
    uncompressedSize: Annotated[int, Field(ge=0, strict=True)]
    sha256: Sha256


class ArchiveInfo(_Model):
    name: FileName
    size: Annotated[int, Field(ge=0, strict=True)]  # a JSON integer: not "12", not 12.0
    sha256: Sha256
    format: Literal["tar"] = "tar"
    compression: Literal["zstd"] = "zstd"
    frames: list[ArchiveFrame] | None = None  # absent: an archive packed without a frame table
    # The frame format (format/versions.py): absent is 1, and 1 is never written (the bytes stay as they were).
    frameFormat: Literal[1] | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_frame_format(cls, data: Any) -> Any:
        refuse_newer(data, "frameFormat", FRAME_FORMAT, key="archive.frameFormat")
        return data


class SbomInfo(_Model):
    """The CycloneDX SBOM beside the manifest (``<archive stem>.sbom.json``): a link of the digest chain."""

    name: FileName
    size: Annotated[int, Field(ge=0, strict=True)]
    sha256: Sha256
    format: Literal["CycloneDX-1.6-json"] = "CycloneDX-1.6-json"


class ReleaseRelocation(_Model):
    """What a host checks before downloading: the longest DEST (UTF-8 bytes) the box can be relocated
    to, from box.json's relocation.  maxDestBytes absent: any length (no binary file embeds the placeholder)."""

    placeholderBytes: Annotated[int, Field(gt=0, strict=True)]
    maxDestBytes: Annotated[int, Field(gt=0, strict=True)] | None = None


def release_relocation(info: RelocationInfo) -> ReleaseRelocation:
    """The manifest's (and the index's) summary of box.json's ``relocation``."""
    return ReleaseRelocation(placeholderBytes=len(info.placeholder.encode("utf-8")), maxDestBytes=max_dest_bytes(info))


class ReleaseAsset(_Model):
    name: str
    path: RelPath
    sha256: Sha256
    size: Annotated[int, Field(ge=0, strict=True)]  # a JSON integer: not "12", not 12.0
    bundled: bool
    url: str | None = None  # absolute URL, set for on-demand assets


class ObjectKeys(_Model):
    archive: str
    release: str
    sha256: str


class BuiltBy(_Model):
    scrollcase: str
    pixi: str
    lockSha256: Sha256
    pythonVersion: MajorMinor


class CheckOutcome(_Model):
    """One self-test check (an import, a file, the pythonCode) as run by the box's interpreter."""

    name: str
    kind: Literal["import", "file", "code", "entrypoint"]
    passed: bool
    durationSeconds: float = 0.0
    message: str = ""


class SelfTestReport(_Model):
    passed: bool
    checks: list[CheckOutcome]


class ParityOutcome(_Model):
    """One parity finding: a script run on one accelerator (``kind="run"``), or one output on one
    accelerator compared with the reference accelerator (``kind="compare"``)."""

    accelerator: str
    output: str
    passed: bool
    kind: Literal["run", "compare"] = "compare"
    message: str = ""
    durationSeconds: float | None = None
    elements: int | None = None
    violations: int | None = None  # elements outside absolute + relative*|ref|
    maxAbsoluteError: float | None = None
    maxRelativeError: float | None = None
    cosine: float | None = None
    worstIndex: list[int] | None = None
    referenceValue: float | None = None
    candidateValue: float | None = None


class ParityReport(_Model):
    passed: bool
    reference: str
    accelerators: list[str]
    tolerances: dict[str, float]
    results: list[ParityOutcome]
    devices: dict[str, dict[str, Any]] = Field(default_factory=dict)  # each run's meta.json


class ReleaseName(BoxName):
    """The box's name, and the version of the recipe it was built from."""

    recipeVersion: SemVer


# The box's identity (shared with box.json; ``recipeVersion`` between its name and target), then where the
# archive is and what checked it.  No docstring: it would become the JSON Schema's description.
class ReleaseManifest(BoxTarget, ReleaseName):
    compatibility: Compatibility
    archive: ArchiveInfo
    pythonEntryPoint: RelPath
    modelCacheSubdir: RelPath
    weights: Literal["bundled", "on-demand"]
    assets: list[ReleaseAsset]
    keys: ObjectKeys
    builtBy: BuiltBy
    selfTest: SelfTestReport | None = None
    parity: ParityReport | None = None
    gpu: GpuEvidence | None = None  # the box's GPU evidence (box.json's), for hosts choosing a release
    sbom: SbomInfo | None = None  # absent in releases built before SBOMs
    provenance: BuildProvenance | None = None  # only when built on GitHub Actions (format/provenance.py)
    relocation: ReleaseRelocation | None = None  # absent in releases built before it: only box.json knows


def object_prefix(box_id: str, version: str, target_id: str) -> str:
    return f"boxes/{box_id}/{version}/{target_id}"


def object_keys(box_id: str, version: str, target_id: str, archive_name: str) -> ObjectKeys:
    prefix = object_prefix(box_id, version, target_id)
    release_name = archive_name.removesuffix(".tar.zst") + ".release.json"
    return ObjectKeys(
        archive=f"{prefix}/{archive_name}",
        release=f"{prefix}/{release_name}",
        sha256=f"{prefix}/{archive_name}.sha256",
    )


# Wall-clock timings differ on every run; they go to JUnit and the console, never into the manifest, so a
# rebuild of the same inputs gives the same manifest bytes and republishing it is a no-op, not a conflict.
_RUN_TIMINGS: Any = {
    "selfTest": {"checks": {"__all__": {"durationSeconds"}}},
    "parity": {"results": {"__all__": {"durationSeconds"}}},
}


def dump_release(manifest: ReleaseManifest) -> bytes:
    """Canonical bytes: sorted keys, two-space indent, trailing newline, no run timings."""
    return canonical_json(manifest.model_dump(mode="json", exclude_none=True, exclude=_RUN_TIMINGS))


def parse_release(data: bytes | str, file: str = "release.json") -> ReleaseManifest:
    try:
        return parse_json_model(
            data,
            ReleaseManifest,
            file=file,
            error=IntegrityError,
            invalid="{file} is not a valid release manifest",
            json_fix="rebuild the box or re-download the release manifest",
            fix="rebuild the box with this scrollcase version",
        )
    except NewerFormatError as exc:
        raise exc.in_file(file) from None


# A path the user gave: missing is a usage error.
_READ_RELEASE = ReadErrors(
    UsageError,
    missing="cannot read release manifest {path}: no such file",
    missing_fix="pass the *.release.json that `scrollcase build` wrote (in .scrollcase/dist/)",
    unreadable="cannot read release manifest {path}: {strerror}",
    fix="check the path and its permissions",
)


def load_release(path: Path) -> ReleaseManifest:
    """Read and validate the release manifest at ``path``."""
    return parse_release(read_bytes(path, _READ_RELEASE), file=describe_path(path) or str(path))


def release_json_schema() -> dict[str, Any]:
    return document_json_schema(ReleaseManifest, "release", "scrollcase release manifest")
