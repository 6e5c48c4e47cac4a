"""``matrix --unpublished`` decides purely (issue 30): a recipe whose (boxId, version, target) the store
already holds is left out, unless its pixi.lock or assets changed since (then it is built, with a warning
on its version line, so that publish refuses it instead of the change going nowhere)."""

from __future__ import annotations

from scrollcase.format.release import ReleaseAsset
from scrollcase.github.matrix import Published, RecipeEntry, plan_matrix
from scrollcase.recipe.model import Asset
from scrollcase.store.index import LOCK, built_from, recipe_inputs
from tests.github_helpers import recipe
from tests.support.releases import make_manifest

CPU, CUDA = recipe("tiny-mlp", "linux-x86_64-cpu"), recipe("tiny-mlp", "linux-x86_64-cuda12.4")
ENTRIES = [RecipeEntry(path=f"recipes/{r.recipeId}", recipe=r) for r in (CPU, CUDA)]
LOCKED = {LOCK: "1" * 64, "asset weights": "2" * 64}


def held(stored: dict[str, str] | None, here: dict[str, str] = LOCKED) -> Published:
    file = f"recipes/{CUDA.recipeId}/recipe.json"
    return Published("s3://boxes/prod/boxes/tiny-mlp/1.0.0/x.release.json", stored, here, file, 7)


def test_a_published_release_with_the_same_inputs_is_left_out_and_named() -> None:
    plan = plan_matrix(ENTRIES, published={CUDA.recipeId: held(dict(LOCKED))})
    assert [e["recipeId"] for e in plan.include] == [CPU.recipeId]
    assert [e["recipeId"] for e in plan.published] == [CUDA.recipeId]
    assert plan.reason == f"all recipes; 1 recipe(s) left out, already published: {CUDA.recipeId} 1.0.0"
    assert plan.warnings == ()
    assert plan.matrix() == {"include": list(plan.include)}  # nothing but include: fromJSON sees no new dimension


def test_every_recipe_published_gives_an_empty_matrix() -> None:
    published = {r.recipeId: held(dict(LOCKED)) for r in (CPU, CUDA)}
    plan = plan_matrix(ENTRIES, published=published)
    assert plan.empty and len(plan.published) == 2


def test_without_published_releases_nothing_is_left_out() -> None:
    plan = plan_matrix(ENTRIES, published={})
    assert len(plan.include) == 2 and plan.published == () and "left out" not in plan.reason


def test_a_published_release_whose_lock_changed_is_built_with_a_warning_on_the_version_line() -> None:
    stored = {**LOCKED, LOCK: "9" * 64}
    plan = plan_matrix(ENTRIES, published={CUDA.recipeId: held(stored)})
    assert [e["recipeId"] for e in plan.include] == [CPU.recipeId, CUDA.recipeId]
    assert plan.published == ()
    (warning,) = plan.warnings
    assert (warning.file, warning.line, warning.key, warning.severity) == (
        f"recipes/{CUDA.recipeId}/recipe.json",
        7,
        "version",
        "warning",
    )
    assert f"{CUDA.recipeId} 1.0.0 is already published (s3://boxes/prod/" in warning.message
    assert "but pixi.lock changed since" in warning.message
    assert (
        warning.fix == f"bump `version` in recipes/{CUDA.recipeId}/recipe.json: a published release is never replaced"
    )


def test_changed_or_added_assets_and_an_unreadable_manifest_are_changes() -> None:
    assert held({**LOCKED, "asset weights": "3" * 64}).changed() == ["asset weights"]
    assert held(dict(LOCKED), {**LOCKED, "asset extra": "4" * 64}).changed() == ["asset extra"]
    assert held(None).changed() == ["s3://boxes/prod/boxes/tiny-mlp/1.0.0/x.release.json (unreadable)"]
    plan = plan_matrix(ENTRIES, published={CUDA.recipeId: held(None)})
    assert len(plan.include) == 2 and len(plan.warnings) == 1


def test_hosted_only_applies_after_published_releases_are_left_out() -> None:
    plan = plan_matrix(ENTRIES, hosted_only=True, published={CPU.recipeId: held(dict(LOCKED))})
    assert plan.include == () and [e["recipeId"] for e in plan.published] == [CPU.recipeId]
    assert "left out, already published" in plan.reason and "self-hosted job(s) left out" in plan.reason


def test_a_release_and_a_recipe_are_compared_by_lock_and_asset_digests() -> None:
    asset = Asset(name="weights", path="w.bin", sha256="5" * 64, size=3)
    manifest = make_manifest(size=1, sha256="0" * 64)
    manifest = manifest.model_copy(
        update={
            "assets": [ReleaseAsset(name="weights", path="w.bin", sha256="5" * 64, size=3, bundled=True)],
            "builtBy": manifest.builtBy.model_copy(update={"lockSha256": "6" * 64}),
        }
    )
    mine = CUDA.model_copy(update={"assets": [asset]})
    assert built_from(manifest) == recipe_inputs(mine, "6" * 64) == {LOCK: "6" * 64, "asset weights": "5" * 64}
    assert recipe_inputs(mine, None) == {"asset weights": "5" * 64}  # no lock committed: a change
