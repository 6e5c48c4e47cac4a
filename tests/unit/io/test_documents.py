"""Canonical JSON bytes and pydantic ValidationError -> located Problems (io/documents.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scrollcase.errors import IntegrityError, StoreError
from scrollcase.io.documents import (
    MAX_DOCUMENT_BYTES,
    MAX_JSON_DEPTH,
    canonical_json,
    json_depth,
    load_json,
    parse_json_model,
    read_document,
    validation_problems,
)
from scrollcase.io.files import ReadErrors


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


# --- bounds: a document's size and depth (docs/install.md#limits) ------------------------------------------


def test_json_depth_counts_nesting_and_ignores_brackets_inside_strings() -> None:
    assert [json_depth(b"1"), json_depth(b"[]"), json_depth(b'{"a": [1, {"b": 2}]}')] == [0, 1, 3]
    assert json_depth(b'{"a": "[[[[{{{{ \\" [[["}') == 1
    assert json_depth(b"[" * 200_000) == 200_000
    assert json_depth(b'["unclosed [[[[') == 1  # not JSON (the parser says why); its string runs to the end


def test_json_depth_stays_linear_on_an_unclosed_string_of_escaped_quotes() -> None:
    """Each escaped quote could start a string that never closes: scanning on from each one to the end
    is quadratic (minutes for these 200 KB under pytest's timeout); one scan to the end is not."""
    assert json_depth(b'["' + b'\\"' * 100_000) == 1


def test_json_nested_deeper_than_the_limit_is_the_callers_error_not_a_recursion_error() -> None:
    """Python's parser raises RecursionError on 200,000 '[' (exit 70 and a traceback in the CLI)."""
    with pytest.raises(IntegrityError) as caught:
        _parse(b"[" * 200_000 + b"]" * 200_000)
    assert (
        caught.value.message
        == f"doc.json nests JSON arrays or objects more than {MAX_JSON_DEPTH} levels deep: refusing it"
    )
    assert caught.value.fix == "j" and caught.value.problems[0].file == "doc.json"
    deep_enough = b'{"name": "a", "inner": {"size": 1}, "x": ' + b"[" * 62 + b"]" * 62 + b"}"
    with pytest.raises(IntegrityError) as caught:  # 64 levels: within the limit, so the model judges it
        _parse(deep_enough)
    assert caught.value.message == "doc.json is not a doc"


def test_a_document_larger_than_its_limit_is_refused_before_it_is_parsed() -> None:
    padded = b'{"name": "a", "inner": {"size": 1}}' + b" " * MAX_DOCUMENT_BYTES
    with pytest.raises(IntegrityError) as caught:
        _parse(padded)
    assert caught.value.message == (
        f"doc.json is {len(padded)} bytes: refusing a document larger than {MAX_DOCUMENT_BYTES} bytes (16 MiB)"
    )
    doc = parse_json_model(
        padded, _Doc, file="d", error=IntegrityError, invalid="x", json_fix="j", fix="f", max_bytes=len(padded)
    )
    assert doc.name == "a"


def test_load_json_bounds_str_input_by_its_utf8_bytes() -> None:
    with pytest.raises(StoreError, match="refusing a document larger than 4 bytes"):
        load_json('"éé"', file="u", error=StoreError, fix="f", max_bytes=4)
    assert load_json('"é"', file="u", error=StoreError, fix="f", max_bytes=4) == "é"


_READ = ReadErrors(StoreError, fix="restore it")


def test_read_document_refuses_a_large_file_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "index.json"
    with huge.open("wb") as sparse:
        sparse.truncate(300 << 20)  # 300 MiB that take no disk: only a read would cost memory
    with pytest.raises(StoreError) as caught:
        read_document(huge, _READ, max_bytes=MAX_DOCUMENT_BYTES, shown="store/index.json")
    assert caught.value.message.startswith(f"store/index.json is {300 << 20} bytes: refusing a document larger")
    assert caught.value.fix == "restore it"
    small = tmp_path / "small.json"
    small.write_bytes(b"{}")
    assert read_document(small, _READ, max_bytes=2) == b"{}"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_read_document_stops_at_the_limit_when_the_size_is_not_known_up_front() -> None:
    """A device (or a file growing while it is read) states no size: at most limit + 1 bytes are read."""
    with pytest.raises(StoreError, match=r"^/dev/zero is more than 1025 bytes: refusing"):
        read_document(Path("/dev/zero"), _READ, max_bytes=1024)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_read_document_does_not_wait_for_a_fifo_put_in_a_documents_place(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "box.json")  # opening it for reading would block until a writer came
    assert read_document(tmp_path / "box.json", _READ, max_bytes=10) == b""


def test_read_document_reports_a_missing_file_with_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        read_document(tmp_path / "nope.json", _READ, max_bytes=10)
