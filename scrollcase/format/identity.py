"""Which box this is and what it runs on: defined once for ``box.json`` and the release manifest.

Both documents start with the same fields, copied from the recipe by :func:`identity_of`.  The identity is
two parts, :class:`BoxName` and :class:`BoxTarget`, because the release manifest names the recipe version
between them (``recipeVersion`` after ``recipeId``) and pydantic lays out fields base by base, last base
first: ``class BoxIdentity(BoxTarget, BoxName)`` gives the name, then the target.  Field order is what the
JSON Schema's ``required`` lists and validation errors follow (the documents' bytes sort their keys), so
both documents keep exactly the order they had before the identity was shared.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from scrollcase.format.versions import SCHEMA_VERSION, refuse_newer
from scrollcase.recipe.model import Identifier, Recipe, SemVer, Target


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Document(_Model):
    # Not identity, but the first field of both documents (as it always was: field order is the order of
    # validation errors and of the schema's ``required``).  A document whose version moves on redeclares
    # it; a redeclared field keeps its place.
    schemaVersion: Literal[1] = 1

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: Any) -> Any:
        refuse_newer(data, "schemaVersion", SCHEMA_VERSION)  # before any other finding (format/versions.py)
        return data


class BoxName(_Document):
    boxId: Identifier
    modelId: Identifier
    runtimeId: Identifier
    version: SemVer
    sourceRevision: str
    recipeId: Identifier


class BoxTarget(_Model):
    target: Target
    targetId: str


class BoxIdentity(BoxTarget, BoxName):
    """The whole identity, name then target, as ``box.json`` carries it."""


def identity_of(recipe: Recipe) -> BoxIdentity:
    """The identity of the box ``recipe`` builds: the recipe's fields of the same names, and the target id
    (derived, not written in the recipe)."""
    copied = {name: getattr(recipe, name) for name in BoxIdentity.model_fields if name not in _NOT_COPIED}
    return BoxIdentity(**copied, targetId=recipe.target_id)


_NOT_COPIED = ("schemaVersion", "targetId")  # each document's own version; the id derived from the target


def identity_fields(identity: BoxIdentity) -> dict[str, Any]:
    """The identity as constructor arguments of a document that carries it (values kept as they are; the
    document's own ``schemaVersion`` left to it)."""
    return {key: value for key, value in identity if key != "schemaVersion"}
