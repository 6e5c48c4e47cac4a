from __future__ import annotations

import json

from scrollcase.recipe.jsonpos import has_duplicate_keys, position_map, render_path

TEXT = """{
  "a": 1,
  "b": {"c": [10, {"d": "x, y: }"}], "e": []},
  "f": "q\\"uote",
  "g": null
}
"""


def test_positions_of_keys_and_values() -> None:
    pos = position_map(TEXT)
    assert pos.value_at(()) == (1, 1)
    assert pos.key_at(("a",)) == (2, 3)
    assert pos.value_at(("a",)) == (2, 8)
    assert pos.value_at(("b", "c", 0)) == (3, 15)
    assert pos.value_at(("b", "c", 1, "d")) == (3, 25)
    assert pos.value_at(("b", "e")) == (3, 43)
    assert pos.value_at(("f",)) == (4, 8)
    assert pos.value_at(("g",)) == (5, 8)


def test_missing_paths_fall_back_to_the_nearest_ancestor() -> None:
    pos = position_map(TEXT)
    assert pos.value_at(("b", "nope", 3)) == pos.value_at(("b",))
    assert pos.key_at(("b", "zzz")) == pos.value_at(("b",))


def test_duplicates_are_recorded_with_the_later_position() -> None:
    text = '{"a": {"x": 1,\n "x": 2}, "a": 3}'
    assert has_duplicate_keys(text)
    pos = position_map(text)
    assert [(p, pos.line_col(o)) for p, o in pos.duplicates] == [(("a", "x"), (2, 2)), (("a",), (2, 11))]
    assert not has_duplicate_keys(json.dumps({"a": {"a": 1}}))


def test_deep_nesting_does_not_recurse() -> None:
    text = "[" * 5000 + "]" * 5000
    assert position_map(text).value_at((0,) * 4999) == (1, 5000)


def test_render_path() -> None:
    assert render_path(("assets", 0, "sha256")) == "assets[0].sha256"
    assert render_path(()) == ""
