"""The box index model and its pure merge."""

from __future__ import annotations

import json

import pytest

from scrollcase.errors import ConflictError, StoreError
from scrollcase.store.index import (
    BoxIndex,
    dump_index,
    entry_for,
    index_json_schema,
    merge_entry,
    parse_index,
)
from tests.support.releases import make_manifest

CUDA = make_manifest(size=10, sha256="a" * 64)
CPU = make_manifest(size=20, sha256="b" * 64, cuda=None)


def test_entry_carries_what_a_host_needs_to_choose() -> None:
    entry = entry_for(CUDA)
    assert entry.targetId == "linux-x86_64-cuda12.4"
    assert entry.minNvidiaDriverVersion == "550.54"
    assert entry.archive == CUDA.keys.archive and entry.release == CUDA.keys.release
    assert (entry.sha256, entry.size) == ("a" * 64, 10)
    assert entry_for(CPU).minNvidiaDriverVersion is None


def test_merge_into_missing_index_creates_it() -> None:
    merged = merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA))
    assert merged is not None
    assert merged.boxId == "demo-box"
    assert list(merged.versions["1.0.0"]) == ["linux-x86_64-cuda12.4"]


def test_merge_keeps_other_targets_and_versions() -> None:
    first = merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA))
    second = merge_entry(first, "demo-box", "1.0.0", entry_for(CPU))
    assert second is not None
    assert sorted(second.versions["1.0.0"]) == ["linux-x86_64-cpu", "linux-x86_64-cuda12.4"]
    newer = make_manifest(version="1.1.0", size=5, sha256="c" * 64)
    third = merge_entry(second, "demo-box", "1.1.0", entry_for(newer))
    assert third is not None and sorted(third.versions) == ["1.0.0", "1.1.0"]


def test_merge_of_listed_entry_is_nothing_to_write() -> None:
    index = merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA))
    assert merge_entry(index, "demo-box", "1.0.0", entry_for(CUDA)) is None


def test_merge_of_a_different_entry_for_the_same_release_is_a_conflict() -> None:
    index = merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA))
    other = entry_for(make_manifest(size=11, sha256="d" * 64))
    with pytest.raises(ConflictError, match=r"already lists demo-box 1\.0\.0"):
        merge_entry(index, "demo-box", "1.0.0", other)


def test_dump_parse_round_trip_is_canonical() -> None:
    index = merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA))
    assert index is not None
    data = dump_index(index)
    assert parse_index(data, "index.json") == index
    assert dump_index(parse_index(data, "index.json")) == data
    assert json.loads(data)["schemaVersion"] == 1


def test_invalid_index_names_the_file_and_key() -> None:
    with pytest.raises(StoreError) as caught:
        bad = b'{"schemaVersion": 1, "boxId": "demo-box", "versions": {"1.0.0": {"x": {}}}, "extra": 1}'
        parse_index(bad, "s3://b/boxes/demo-box/index.json")
    text = caught.value.render()
    assert "s3://b/boxes/demo-box/index.json" in text and "extra" in text
    with pytest.raises(StoreError, match="not valid JSON"):
        parse_index(b"{", "index.json")


def test_schema_comes_from_the_model() -> None:
    schema = index_json_schema()
    assert schema["title"] == "scrollcase box index"
    assert set(schema["required"]) == {"boxId"}
    assert BoxIndex.model_json_schema()["properties"].keys() == schema["properties"].keys()


def test_a_real_index_validates_against_the_published_schema() -> None:
    import jsonschema

    index = merge_entry(merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA)), "demo-box", "1.0.0", entry_for(CPU))
    assert index is not None
    validator = jsonschema.Draft202012Validator(index_json_schema())
    assert list(validator.iter_errors(json.loads(dump_index(index)))) == []
    broken = json.loads(dump_index(index))
    del broken["versions"]["1.0.0"]["linux-x86_64-cpu"]["sha256"]
    assert list(validator.iter_errors(broken)) != []


def test_entry_carries_the_longest_dest_and_older_entries_parse_without_it() -> None:
    from scrollcase.box.release import ReleaseRelocation

    limit = ReleaseRelocation(placeholderBytes=196, maxDestBytes=196)
    entry = entry_for(CPU.model_copy(update={"relocation": limit}))
    assert entry.relocation == limit and entry_for(CPU).relocation is None
    index = merge_entry(None, "demo-box", "1.0.0", entry)
    assert index is not None
    raw = json.loads(dump_index(index))
    assert raw["versions"]["1.0.0"][CPU.targetId]["relocation"] == {"maxDestBytes": 196, "placeholderBytes": 196}
    del raw["versions"]["1.0.0"][CPU.targetId]["relocation"]
    assert parse_index(json.dumps(raw).encode(), "index.json").versions["1.0.0"][CPU.targetId].relocation is None
    schema = json.dumps(index_json_schema())  # `scrollcase schema index` documents the field
    assert '"maxDestBytes"' in schema and '"placeholderBytes"' in schema
