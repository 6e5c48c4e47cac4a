"""The box index model and its pure merge."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from scrollcase.errors import ConflictError, StoreError
from scrollcase.format.release import ReleaseRelocation
from scrollcase.recipe.model import Target
from scrollcase.store.base import Blob
from scrollcase.store.index import (
    MAX_ATTEMPTS,
    BoxIndex,
    IndexEntry,
    dump_index,
    entry_for,
    index_json_schema,
    index_key,
    merge_entry,
    parse_index,
    update_index,
)
from scrollcase.store.local import LocalStore
from scrollcase.targets.evidence import GpuEvidence
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


def test_entry_carries_the_longest_dest_and_older_entries_parse_without_it() -> None:
    from scrollcase.format.release import ReleaseRelocation

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


class _RivalStore(LocalStore):
    """A directory store where another publisher writes the index between each of our reads and our
    write (``rivals`` times), as two CI jobs publishing at once do: a real write to the same directory."""

    def __init__(self, root: Path, rivals: int) -> None:
        super().__init__(root)
        self.rivals = rivals
        self.reads = 0

    def get_bytes(self, key: str) -> Blob | None:
        blob = super().get_bytes(key)
        self.reads += 1
        if self.reads <= self.rivals:
            rival = entry_for(make_manifest(version=f"0.{self.reads}.0", size=self.reads, sha256="e" * 64))
            assert update_index(LocalStore(self.root), "demo-box", f"0.{self.reads}.0", rival)
        return blob


def _listed(store: LocalStore) -> dict[str, list[str]]:
    blob = store.get_bytes(index_key("demo-box"))
    assert blob is not None
    return {v: sorted(t) for v, t in parse_index(blob.data, "index.json").versions.items()}


def test_entries_and_indexes_cannot_change_after_they_are_made() -> None:
    index = merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA))
    assert index is not None
    with pytest.raises(ValidationError, match="frozen"):
        index.boxId = "other-box"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        index.versions["1.0.0"]["linux-x86_64-cuda12.4"].size = 1  # type: ignore[misc]


def test_an_empty_archive_has_size_zero_and_a_negative_size_is_refused() -> None:
    raw = json.loads(dump_index(merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA)) or BoxIndex(boxId="x")))
    raw["versions"]["1.0.0"]["linux-x86_64-cuda12.4"]["size"] = 0
    assert parse_index(json.dumps(raw).encode(), "index.json").versions["1.0.0"]["linux-x86_64-cuda12.4"].size == 0
    for wrong in (-1, "10", 10.0):  # strict: a size is a JSON integer, never a string or a float
        raw["versions"]["1.0.0"]["linux-x86_64-cuda12.4"]["size"] = wrong
        with pytest.raises(StoreError, match="not a valid scrollcase box index"):
            parse_index(json.dumps(raw).encode(), "index.json")


def test_the_dump_leaves_out_what_an_entry_does_not_have() -> None:
    index = merge_entry(None, "demo-box", "1.0.0", entry_for(CPU))
    assert index is not None
    entry = json.loads(dump_index(index))["versions"]["1.0.0"]["linux-x86_64-cpu"]
    assert not {"minNvidiaDriverVersion", "relocation"} & entry.keys()
    assert None not in entry.values()


def test_update_index_creates_then_adds_then_has_nothing_to_write(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert update_index(store, "demo-box", "1.0.0", entry_for(CUDA)) is True
    assert update_index(store=store, box_id="demo-box", version="1.0.0", entry=entry_for(CPU)) is True
    before = (tmp_path / index_key("demo-box")).read_bytes()
    assert update_index(store, "demo-box", "1.0.0", entry_for(CUDA)) is False
    assert (tmp_path / index_key("demo-box")).read_bytes() == before
    assert _listed(store) == {"1.0.0": ["linux-x86_64-cpu", "linux-x86_64-cuda12.4"]}
    other = entry_for(make_manifest(size=11, sha256="d" * 64))
    with pytest.raises(ConflictError, match="already lists"):
        update_index(store, "demo-box", "1.0.0", other)


@pytest.mark.parametrize("other", ["alpha-box", "zulu-box"])  # sorting before and after demo-box
def test_update_index_refuses_the_index_of_another_box(tmp_path: Path, other: str) -> None:
    store = LocalStore(tmp_path)
    assert update_index(store, other, "1.0.0", entry_for(CUDA))
    (tmp_path / index_key("demo-box")).parent.mkdir(parents=True)
    (tmp_path / index_key(other)).rename(tmp_path / index_key("demo-box"))
    with pytest.raises(StoreError, match=f"is the index of box '{other}'"):
        update_index(store, "demo-box", "1.0.0", entry_for(CPU))


def test_a_rival_that_creates_the_index_first_is_kept_and_merged(tmp_path: Path) -> None:
    store = _RivalStore(tmp_path, rivals=1)
    delays: list[float] = []
    assert update_index(store, "demo-box", "1.0.0", entry_for(CUDA), sleep=delays.append) is True
    assert store.reads == 2 and len(delays) == 1
    assert _listed(store) == {"0.1.0": ["linux-x86_64-cuda12.4"], "1.0.0": ["linux-x86_64-cuda12.4"]}


def test_a_rival_that_changes_the_index_is_kept_and_merged(tmp_path: Path) -> None:
    assert update_index(LocalStore(tmp_path), "demo-box", "1.0.0", entry_for(CPU))
    store = _RivalStore(tmp_path, rivals=2)
    delays: list[float] = []
    assert update_index(store, "demo-box", "1.0.0", entry_for(CUDA), sleep=delays.append) is True
    assert store.reads == 3 and len(delays) == 2
    assert _listed(store) == {
        "0.1.0": ["linux-x86_64-cuda12.4"],
        "0.2.0": ["linux-x86_64-cuda12.4"],
        "1.0.0": ["linux-x86_64-cpu", "linux-x86_64-cuda12.4"],
    }


def test_an_index_that_keeps_changing_is_given_up_after_ten_attempts_with_capped_jittered_backoff(
    tmp_path: Path,
) -> None:
    store = _RivalStore(tmp_path, rivals=100)
    delays: list[float] = []
    random.seed(1234)  # the jitter's draws, made known: nothing else in update_index draws from `random`
    with pytest.raises(StoreError, match="kept changing: gave up after 10 attempts") as caught:
        update_index(store, "demo-box", "1.0.0", entry_for(CUDA), sleep=delays.append)
    assert "rerun publish" in caught.value.render()
    assert store.reads == MAX_ATTEMPTS == 10 and len(delays) == 10
    # 0.05 s doubled each attempt, capped at 2 s, each times a random factor in [0.5, 1.5)
    random.seed(1234)
    assert delays == [min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()) for attempt in range(10)]
    for attempt, delay in enumerate(delays):
        base = min(2.0, 0.05 * 2**attempt)
        assert 0.5 * base <= delay < 1.5 * base, (attempt, delay)
    assert "1.0.0" not in _listed(store)
    with pytest.raises(StoreError, match="gave up after 3 attempts"):
        update_index(
            _RivalStore(tmp_path / "b", rivals=100),
            "demo-box",
            "1.0.0",
            entry_for(CUDA),
            attempts=3,
            sleep=delays.append,
        )


def test_a_real_index_validates_against_the_published_schema() -> None:
    import jsonschema

    index = merge_entry(merge_entry(None, "demo-box", "1.0.0", entry_for(CUDA)), "demo-box", "1.0.0", entry_for(CPU))
    assert index is not None
    validator = jsonschema.Draft202012Validator(index_json_schema())
    assert list(validator.iter_errors(json.loads(dump_index(index)))) == []
    broken = json.loads(dump_index(index))
    del broken["versions"]["1.0.0"]["linux-x86_64-cpu"]["sha256"]
    assert list(validator.iter_errors(broken)) != []


# An index entry is the published release: a merge of an entry that differs in ANY field, not only the archive's
# sha256, is a conflict (a silent keep would leave the index vouching for a manifest, driver minimum or GPU
# evidence that is not the published one).
OTHER_VALUES: dict[str, object] = {
    "target": Target(platform="linux", arch="aarch64", accelerator="cuda", cudaVersion="12.4"),
    "archive": "boxes/demo-box/1.0.0/other.tar.zst",
    "release": "boxes/demo-box/1.0.0/other.release.json",
    "sha256Key": "boxes/demo-box/1.0.0/other.tar.zst.sha256",
    "sha256": "d" * 64,
    "releaseSha256": "e" * 64,
    "size": 11,
    "minNvidiaDriverVersion": "560.35.03",
    "minHostAppVersion": "3.0.0",
    "minRamGb": 16.0,
    "gpu": GpuEvidence(cudaRuntime="12.4", source="none"),
    "relocation": ReleaseRelocation(placeholderBytes=196, maxDestBytes=100),
}


def test_every_field_but_the_key_is_covered() -> None:
    assert set(OTHER_VALUES) == set(IndexEntry.model_fields) - {"targetId"}


@pytest.mark.parametrize("name", sorted(OTHER_VALUES))
def test_an_entry_that_differs_in_any_field_is_a_conflict(name: str) -> None:
    listed = entry_for(CUDA)
    assert getattr(listed, name) != OTHER_VALUES[name]
    index = merge_entry(None, "demo-box", "1.0.0", listed)
    other = listed.model_copy(update={name: OTHER_VALUES[name]})
    with pytest.raises(ConflictError) as raised:
        merge_entry(index, "demo-box", "1.0.0", other)
    assert name in str(raised.value) or name in ("sha256", "size")
    assert merge_entry(index, "demo-box", "1.0.0", listed.model_copy()) is None  # an equal entry: nothing to write
