"""The box identity, defined once: derived from the recipe, shared by box.json and the release manifest,
with both documents' field order exactly as before (the schema's ``required`` and validation errors
follow it)."""

from __future__ import annotations

from scrollcase.format.boxjson import BoxJson
from scrollcase.format.identity import BoxIdentity, identity_fields, identity_of
from scrollcase.format.release import ReleaseManifest
from scrollcase.recipe.model import Recipe
from tests.recipe_samples import cuda_recipe

IDENTITY = ["boxId", "modelId", "runtimeId", "version", "sourceRevision", "recipeId", "target", "targetId"]


def test_identity_is_derived_from_the_recipe() -> None:
    recipe = Recipe.model_validate(cuda_recipe())
    identity = identity_of(recipe)
    assert identity.targetId == recipe.target_id and identity.target == recipe.target
    assert (identity.boxId, identity.version, identity.recipeId) == (recipe.boxId, recipe.version, recipe.recipeId)
    assert list(identity_fields(identity)) == IDENTITY
    assert identity_fields(identity)["target"] is recipe.target  # passed on as is, not re-validated from a dump


def test_both_documents_carry_the_identity_in_their_old_field_order() -> None:
    assert list(BoxIdentity.model_fields) == ["schemaVersion", *IDENTITY]
    assert list(BoxJson.model_fields)[:10] == ["schemaVersion", *IDENTITY, "pythonVersion"]
    assert list(ReleaseManifest.model_fields)[:11] == [
        "schemaVersion",
        *IDENTITY[:6],
        "recipeVersion",
        *IDENTITY[6:],
        "compatibility",
    ]
