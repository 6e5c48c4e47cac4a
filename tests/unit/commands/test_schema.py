"""The published JSON Schemas accept what the models accept, for editors and CI linters."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest

from scrollcase import cli
from scrollcase.commands.schema import render_schema
from scrollcase.format.release import release_json_schema
from scrollcase.io.files import write_atomic
from scrollcase.recipe.model import recipe_json_schema
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.recipe_samples import cuda_recipe
from tests.support.releases import write_release

REPO = Path(__file__).resolve().parents[3]
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


def test_schema_index_validates_an_index_that_publish_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`scrollcase schema index` (docs/publish.md, "The box index": the JSON Schema comes from the
    model) accepts the index a real publish writes and rejects one a host app could not trust."""
    assert cli.main(["schema", "index"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    release = write_release(tmp_path / "dist")
    publish(LocalStore(tmp_path / "store"), release.manifest, release.archive_path)
    index = json.loads((tmp_path / "store" / "boxes" / "demo-box" / "index.json").read_text(encoding="utf-8"))
    validator.validate(index)
    entry = index["versions"]["1.0.0"]["linux-x86_64-cuda12.4"]
    entry["size"] = "big"
    entry["surprise"] = True
    del index["boxId"]
    paths = sorted("/".join(map(str, e.absolute_path)) or e.message for e in validator.iter_errors(index))
    assert len(paths) == 3, paths
    assert "versions/1.0.0/linux-x86_64-cuda12.4/size" in paths
