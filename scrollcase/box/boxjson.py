"""``box.json``: the small description every box carries at its archive root.

A host app (and ``scrollcase verify``/``unpack``) reads it to find the interpreter, the model cache,
the self-test to re-run, and which files embed the install prefix (``relocation``).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scrollcase.box.evidence import GpuEvidence
from scrollcase.box.identity import BoxIdentity
from scrollcase.box.relocate import RelocationInfo
from scrollcase.errors import IntegrityError, Problem
from scrollcase.recipe.model import RelPath, SelfTest, Sha256

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


def dump_box_json(box: BoxJson) -> bytes:
    """Canonical bytes (sorted keys, two-space indent, trailing newline): part of a reproducible archive."""
    data = box.model_dump(mode="json", exclude_none=True)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


def parse_box_json(data: bytes | str, file: str = "box.json") -> BoxJson:
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{file} is not valid JSON: {exc}", fix="rebuild the box") from None
    try:
        return BoxJson.model_validate(raw)
    except ValidationError as exc:
        problems = [Problem(message=e["msg"], file=file, key=".".join(str(p) for p in e["loc"])) for e in exc.errors()]
        raise IntegrityError(
            f"{file} does not describe a box this scrollcase understands",
            problems=problems,
            fix="rebuild the box with this scrollcase version",
        ) from None
