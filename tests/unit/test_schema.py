"""The published JSON Schemas accept what the models accept, for editors and CI linters."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest

from scrollcase.box.release import release_json_schema
from scrollcase.commands.schema import render_schema
from scrollcase.io.files import write_atomic
from scrollcase.recipe.model import recipe_json_schema
from tests.recipe_samples import cuda_recipe

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "recipes").glob("*/recipe.json"))


def _validator() -> jsonschema.Draft202012Validator:
    schema = recipe_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schemas_are_draft_2020_12() -> None:
    for schema in (recipe_json_schema(), release_json_schema()):
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_schema_accepts_the_example_recipes(path: Path) -> None:
    _validator().validate(json.loads(path.read_text(encoding="utf-8")))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize(
    ("key", "value"),
    [("boxId", "Upper"), ("version", "1.0"), ("schemaVersion", 2), ("assets", {}), ("pythonVersion", "3")],
)
def test_schema_rejects_a_bad_recipe(key: str, value: object) -> None:
    data = cuda_recipe()
    data[key] = value
    errors = list(_validator().iter_errors(data))
    assert errors and any(key in e.absolute_path or key == e.path[0] for e in errors if e.path)


def test_schema_rejects_unknown_keys_and_missing_fields() -> None:
    data = cuda_recipe()
    data["extra"] = 1
    del data["boxId"]
    messages = " ".join(e.message for e in _validator().iter_errors(data))
    assert "extra" in messages and "boxId" in messages


def test_render_and_write(tmp_path: Path) -> None:
    text = render_schema("release")
    assert json.loads(text)["title"] == "scrollcase release manifest"
    out = tmp_path / "sub" / "recipe.schema.json"
    write_atomic(out, render_schema("recipe").encode("utf-8"))
    assert json.loads(out.read_text(encoding="utf-8"))["title"] == "scrollcase recipe.json"
    assert [p.name for p in out.parent.iterdir()] == ["recipe.schema.json"]
