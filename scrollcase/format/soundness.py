"""What box.json and the release manifest both state, compared in one place.

publish refuses a manifest that disagrees with its archive's box.json, unpack and install refuse it
before extracting, verify after unpacking: each renders the disagreements in its own words, from this one
list of fields.
"""

from __future__ import annotations

from pydantic import BaseModel

from scrollcase.format.boxjson import BoxJson
from scrollcase.format.release import ReleaseManifest, release_relocation

# The fields both documents carry (the manifest's relocation summarises box.json's, when it has one).
SHARED_FIELDS = ("boxId", "version", "target", "targetId", "pythonEntryPoint", "modelCacheSubdir", "gpu")


def disagreements(box: BoxJson, manifest: ReleaseManifest) -> list[tuple[str, object, object]]:
    """(field, box.json's value, the manifest's value) for every shared field on which they differ."""
    pairs: dict[str, tuple[object, object]] = {
        key: (getattr(box, key), getattr(manifest, key)) for key in SHARED_FIELDS
    }
    if manifest.relocation is not None:  # absent in releases built before it: nothing to compare
        pairs["relocation"] = (release_relocation(box.relocation), manifest.relocation)
    return [(key, inside, outside) for key, (inside, outside) in pairs.items() if inside != outside]


def shown(value: object) -> object:
    """A field's value as JSON shows it (models without their unset fields)."""
    return value.model_dump(mode="json", exclude_none=True) if isinstance(value, BaseModel) else value
