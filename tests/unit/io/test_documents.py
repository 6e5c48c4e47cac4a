"""Canonical JSON bytes and pydantic ValidationError -> located Problems (io/documents.py)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scrollcase.errors import IntegrityError
from scrollcase.io.documents import canonical_json, parse_json_model, validation_problems


class _Inner(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    size: int = Field(ge=0)


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    inner: _Inner


def _errors(raw: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Doc.model_validate(raw)
    return caught.value


def test_canonical_json_sorts_keys_indents_and_ends_with_a_newline() -> None:
    assert canonical_json({"b": 1, "a": ["é"]}) == b'{\n  "a": [\n    "\\u00e9"\n  ],\n  "b": 1\n}\n'


def test_every_mistake_is_one_problem_keyed_by_its_dotted_path() -> None:
    problems = validation_problems(_errors({"inner": {"size": -1}, "extra": 1}), "doc.json", fix="rebuild")
    by_key = {p.key: p for p in problems}
    assert set(by_key) == {"name", "inner.size", "extra"}
    assert all(p.file == "doc.json" and p.fix == "rebuild" and p.value is None for p in problems)


def test_values_are_shown_cut_and_never_for_a_missing_field() -> None:
    problems = validation_problems(_errors({"name": "x" * 500, "inner": {}}), values=False)
    assert {p.key for p in problems} == {"inner.size"}
    (wrong,) = validation_problems(_errors({"name": 5, "inner": {"size": 1}}), values=True)
    assert (wrong.key, wrong.value) == ("name", "5")
    (missing,) = validation_problems(_errors({"name": "x", "inner": {}}), values=True)
    assert missing.value is None


def test_a_document_that_is_not_an_object_has_no_key() -> None:
    (problem,) = validation_problems(_errors([1, 2]))
    assert problem.key is None


def _parse(data: bytes) -> _Doc:
    return parse_json_model(
        data, _Doc, file="doc.json", error=IntegrityError, invalid="{file} is not a doc", json_fix="j", fix="f"
    )


def test_parse_json_model_returns_the_frozen_model() -> None:
    assert _parse(b'{"name": "a", "inner": {"size": 1}}') == _Doc(name="a", inner=_Inner(size=1))


def test_parse_json_model_reports_bad_json_and_bad_content_with_the_callers_error() -> None:
    with pytest.raises(IntegrityError) as caught:
        _parse(b"{")
    assert caught.value.message.startswith("doc.json is not valid JSON: ") and caught.value.fix == "j"
    with pytest.raises(IntegrityError) as caught:
        _parse(b'{"name": "a"}')
    assert caught.value.message == "doc.json is not a doc" and caught.value.fix == "f"
    assert [(p.key, p.file) for p in caught.value.problems] == [("inner", "doc.json")]
