"""Which releases a store already holds, for ``scrollcase matrix --unpublished``: each box's index read
once, and for each release it lists, what it was built from (its release manifest's ``pixi.lock`` and
asset digests), so a recipe changed without a version bump is never mistaken for published."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scrollcase.errors import IntegrityError
from scrollcase.format.release import ReleaseManifest, parse_release
from scrollcase.recipe.model import Recipe
from scrollcase.store.base import ReadableStore
from scrollcase.store.index import BoxIndex, read_index

LOCK = "pixi.lock"


@dataclass(frozen=True)
class HeldRelease:
    """A release the store's index lists: where its manifest is, and what it was built from (None: the
    manifest is missing or not a release manifest)."""

    release: str
    inputs: Mapping[str, str] | None


def built_from(manifest: ReleaseManifest) -> dict[str, str]:
    """A release's inputs as the matrix compares them: ``pixi.lock`` and ``asset <name>`` -> sha256."""
    return {LOCK: manifest.builtBy.lockSha256, **{f"asset {a.name}": a.sha256 for a in manifest.assets}}


def recipe_inputs(recipe: Recipe, lock_sha256: str | None) -> dict[str, str]:
    """The same for a recipe's folder now (no ``pixi.lock`` entry when none is committed)."""
    lock = {LOCK: lock_sha256} if lock_sha256 is not None else {}
    return {**lock, **{f"asset {a.name}": a.sha256 for a in recipe.assets}}


@dataclass
class HeldReleases:
    """Reads a store's box indexes (each once) and the release manifests they list."""

    store: ReadableStore
    indexes: dict[str, BoxIndex | None] = field(default_factory=dict)

    def find(self, box_id: str, version: str, target_id: str) -> HeldRelease | None:
        """The release the store holds for (box, version, target); None when its index does not list it."""
        if box_id not in self.indexes:
            self.indexes[box_id] = read_index(self.store, box_id)
        index = self.indexes[box_id]
        entry = index.versions.get(version, {}).get(target_id) if index is not None else None
        if entry is None:
            return None
        url = self.store.url_for(entry.release)
        blob = self.store.get_bytes(entry.release)
        if blob is None:
            return HeldRelease(url, None)
        try:
            return HeldRelease(url, built_from(parse_release(blob.data, url)))
        except IntegrityError:
            return HeldRelease(url, None)
