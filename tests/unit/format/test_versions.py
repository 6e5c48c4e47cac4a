"""format/versions.py: a document or archive format newer than this scrollcase is refused first, by name,
with the fix (upgrade scrollcase); the version this scrollcase writes leaves every document's bytes as they were."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from scrollcase.errors import IntegrityError
from scrollcase.format.boxjson import dump_box_json, parse_box_json
from scrollcase.format.release import dump_release, parse_release
from scrollcase.format.versions import FRAME_FORMAT, SCHEMA_VERSION, UPGRADE_FIX, NewerFormatError
from scrollcase.store.index import BoxIndex, dump_index, entry_for, parse_index
from tests.support.releases import box_json_for, make_manifest

MANIFEST = make_manifest(size=10, sha256="a" * 64)


def _release() -> dict[str, Any]:
    return dict(json.loads(dump_release(MANIFEST)))


def _box() -> dict[str, Any]:
    return dict(json.loads(dump_box_json(box_json_for(MANIFEST))))


def _index() -> dict[str, Any]:
    index = BoxIndex(boxId=MANIFEST.boxId, versions={MANIFEST.version: {MANIFEST.targetId: entry_for(MANIFEST)}})
    return dict(json.loads(dump_index(index)))


def _newer_release_schema(doc: dict[str, Any]) -> None:
    doc["schemaVersion"] = SCHEMA_VERSION + 1
    doc["addedInVersion2"] = True  # a newer version's new field: not reported as an unknown key


def _newer_frames(doc: dict[str, Any]) -> None:
    doc["archive"]["frameFormat"] = FRAME_FORMAT + 1


CASES: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None], Callable[..., object], str]] = [
    ("release manifest", _release, _newer_release_schema, parse_release, "schemaVersion"),
    ("frame format", _release, _newer_frames, parse_release, "archive.frameFormat"),
    ("box.json", _box, _newer_release_schema, parse_box_json, "schemaVersion"),
    ("index", _index, _newer_release_schema, parse_index, "schemaVersion"),
]


@pytest.mark.parametrize(("what", "make", "edit", "parse", "key"), CASES, ids=[c[0] for c in CASES])
def test_a_newer_version_is_refused_naming_the_field_and_the_fix(
    what: str,
    make: Callable[[], dict[str, Any]],
    edit: Callable[[dict[str, Any]], None],
    parse: Callable[..., object],
    key: str,
) -> None:
    doc = make()
    edit(doc)
    with pytest.raises(NewerFormatError) as caught:
        parse(json.dumps(doc).encode(), "dist/x.json")
    error = caught.value
    assert isinstance(error, IntegrityError) and error.exit_code == 8
    assert error.message == f"dist/x.json: {key} is 2, newer than this scrollcase reads (1)"
    assert [(p.file, p.key, p.value, p.fix) for p in error.problems] == [("dist/x.json", key, "2", UPGRADE_FIX)]
    assert error.fix == UPGRADE_FIX and "upgrade scrollcase" in error.render()


@pytest.mark.parametrize("value", [0, "2", None])
def test_a_version_that_is_not_newer_is_left_to_validation(value: object) -> None:
    doc = _release()
    doc["schemaVersion"] = value
    with pytest.raises(IntegrityError) as caught:
        parse_release(json.dumps(doc).encode(), "x.json")
    assert not isinstance(caught.value, NewerFormatError)
    assert [p.key for p in caught.value.problems] == ["schemaVersion"]


def test_frame_format_1_is_read_when_stated_and_never_written() -> None:
    data = dump_release(MANIFEST)
    assert b"frameFormat" not in data and parse_release(data).archive.frameFormat is None
    stated = _release()
    stated["archive"]["frameFormat"] = 1
    assert parse_release(json.dumps(stated).encode()).archive.frameFormat == 1
