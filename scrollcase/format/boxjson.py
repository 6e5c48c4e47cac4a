"""``box.json``: the small description every box carries at its archive root.

A host app (and ``scrollcase verify``/``unpack``) reads it to find the interpreter, the model cache,
the self-test to re-run, and which files embed the install prefix (``relocation``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scrollcase.errors import IntegrityError
from scrollcase.format.filedigests import BoxFile, BoxLink
from scrollcase.format.identity import BoxIdentity
from scrollcase.format.relocate import RelocationInfo
from scrollcase.format.versions import NewerFormatError
from scrollcase.io.documents import MAX_BOX_JSON_BYTES, canonical_json, parse_json_model
from scrollcase.recipe.model import RelPath, SelfTest, Sha256, document_json_schema
from scrollcase.targets.evidence import GpuEvidence

BOX_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BoxAsset(_Model):
    name: str
    path: RelPath  # relative to modelCacheSubdir
    sha256: Sha256
    size: Annotated[int, Field(ge=0)]
    bundled: bool


class BoxJson(BoxIdentity):  # the box's identity (shared with the release manifest), then how to run it
    pythonVersion: str
    pythonEntryPoint: RelPath
    envDir: RelPath
    modelCacheSubdir: RelPath
    weights: Literal["bundled", "on-demand"]
    assets: list[BoxAsset]
    selfTest: SelfTest
    relocation: RelocationInfo
    gpu: GpuEvidence | None = None  # what the box's files and interpreter showed at build time
    # Every file (size, sha256 as packed: relocated files in their placeholder form) and symlink but
    # box.json itself: what `scrollcase verify --installed` compares an installed box with.
    files: list[BoxFile] = Field(default_factory=list)
    links: list[BoxLink] = Field(default_factory=list)


def dump_box_json(box: BoxJson) -> bytes:
    """Canonical bytes (sorted keys, two-space indent, trailing newline): part of a reproducible archive."""
    return canonical_json(box.model_dump(mode="json", exclude_none=True))


def parse_box_json(data: bytes | str, file: str = "box.json") -> BoxJson:
    try:
        return parse_json_model(
            data,
            BoxJson,
            file=file,
            error=IntegrityError,
            invalid="{file} does not describe a box this scrollcase understands",
            json_fix="rebuild the box",
            fix="rebuild the box with this scrollcase version",
            max_bytes=MAX_BOX_JSON_BYTES,
        )
    except NewerFormatError as exc:
        raise exc.in_file(file) from None


def box_json_schema() -> dict[str, Any]:
    return document_json_schema(BoxJson, "box", "scrollcase box.json")
