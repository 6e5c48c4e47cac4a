"""store/remote.py: what the store holds for a release, read before a publish is planned: its keys, the
stored manifest, the index and its dangling entries, and the earlier framed archives to copy from (best first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.errors import StoreError
from scrollcase.format.release import ArchiveFrame, ReleaseManifest, dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.index import BoxIndex, dump_index, entry_for, index_key, merge_entry
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.publishplan import LocalArchive, plan_publish
from scrollcase.store.remote import (
    MAX_REUSE_SOURCES,
    dangling_entries,
    earlier_archives,
    read_remote_state,
    reuse_candidates,
)
from scrollcase.store.reuse import EarlierArchive
from tests.support.releases import box_json_for, make_manifest, write_release
from tests.unit.store.test_publishplan import ARCHIVE, MANIFEST, OTHER_DIGESTS, SHA


def framed_release(version: str, tags: tuple[str, ...] = ("a", "b")) -> ReleaseManifest:
    rows = [
        ArchiveFrame(name=t, offset=10 * n, size=10, uncompressedSize=10, sha256=sha256_bytes(t.encode()))
        for n, t in enumerate(tags)
    ]
    draft = make_manifest(version=version, size=10 * len(tags), sha256=sha256_bytes(version.encode()))
    return draft.model_copy(update={"archive": draft.archive.model_copy(update={"frames": rows})})


def _store_with(tmp_path: Path, manifests: list[ReleaseManifest]) -> tuple[LocalStore, BoxIndex]:
    store = LocalStore(tmp_path / "store")
    index: BoxIndex | None = None
    for manifest in manifests:
        store.put_bytes(manifest.keys.release, dump_release(manifest))
        index = merge_entry(index, "demo-box", manifest.version, entry_for(manifest)) or index
    assert index is not None
    store.put_bytes(index_key("demo-box"), dump_index(index))
    return store, index


def test_earlier_archives_reads_four_manifests_at_most_and_notes_those_the_index_does_not_vouch_for(
    tmp_path: Path,
) -> None:
    versions = ["0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0"]
    store, index = _store_with(tmp_path, [framed_release(v) for v in versions])
    release = {v: store.path_for(index.versions[v]["linux-x86_64-cuda12.4"].release) for v in versions}
    release["0.6.0"].unlink()
    release["0.5.0"].write_bytes(release["0.5.0"].read_bytes() + b"\n")  # not the bytes the index vouches for
    other = framed_release("0.3.0").model_copy(update={"archive": framed_release("9.9.9").archive})
    release["0.3.0"].write_bytes(dump_release(other))
    entry = index.versions["0.3.0"]["linux-x86_64-cuda12.4"]
    index = index.model_copy(
        update={
            "versions": {**index.versions, "0.3.0": {entry.targetId: entry.model_copy(update={"releaseSha256": None})}}
        }
    )
    found, notes = earlier_archives(store, index, MANIFEST, set())
    kept = index.versions["0.4.0"]["linux-x86_64-cuda12.4"]
    assert found == (
        EarlierArchive(
            kept.archive, f"demo-box 0.4.0 {kept.targetId}", tuple(framed_release("0.4.0").archive.frames or [])
        ),
    )
    assert notes == (
        f"not reusing the frames of demo-box 0.6.0 linux-x86_64-cuda12.4: {release['0.6.0']} is missing",
        f"not reusing the frames of demo-box 0.5.0 linux-x86_64-cuda12.4: {release['0.5.0']} has sha256 "
        f"{sha256_bytes(release['0.5.0'].read_bytes())}, the index says "
        f"{index.versions['0.5.0']['linux-x86_64-cuda12.4'].releaseSha256}",
        f"not reusing the frames of demo-box 0.3.0 linux-x86_64-cuda12.4: {release['0.3.0']} describes another "
        "archive than the index entry",
    )  # 0.2.0, the fifth, is never read: four sources are enough
    assert MAX_REUSE_SOURCES == 4


def test_an_earlier_manifest_that_is_not_a_manifest_is_passed_over(tmp_path: Path) -> None:
    store, index = _store_with(tmp_path, [framed_release("0.9.0")])
    entry = index.versions["0.9.0"]["linux-x86_64-cuda12.4"]
    store.path_for(entry.release).write_bytes(b"{not json")
    unvouched = index.model_copy(
        update={"versions": {"0.9.0": {entry.targetId: entry.model_copy(update={"releaseSha256": None})}}}
    )
    found, notes = earlier_archives(store, unvouched, MANIFEST, set())
    assert found == () and len(notes) == 1 and "not valid JSON" in notes[0]


def test_newer_versions_come_first_by_their_numbers() -> None:
    manifests = [framed_release(v) for v in ("0.9.0", "0.10.0", "1.0.0-rc.1", "0.10.0+local.2", "2.0.0")]
    index = BoxIndex(boxId="demo-box")
    for m in manifests:
        index = merge_entry(index, "demo-box", m.version, entry_for(m)) or index
    current = framed_release("3.0.0")
    assert [v for v, _ in reuse_candidates(index, current, set())] == [
        "2.0.0",
        "1.0.0-rc.1",
        "0.10.0",
        "0.10.0+local.2",
        "0.9.0",
    ]
    assert next(v for v, _ in reuse_candidates(index, framed_release("2.0.0"), set())) == "1.0.0-rc.1"  # not itself


def test_read_remote_state_of_an_empty_store_and_of_a_published_release(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    release = write_release(tmp_path / "dist")
    keys = release.manifest.keys
    state = read_remote_state(store, release.manifest)
    assert state.objects == {keys.archive: None, keys.sha256: None, keys.release: None}
    assert (state.index, state.index_lists_release, state.dangling, state.earlier) == (None, False, (), ())
    publish(store, release.manifest, release.archive_path)
    state = read_remote_state(store, release.manifest)
    assert state.index_lists_release and state.index is not None and state.dangling == ()
    assert state.index_file == str(tmp_path / "store" / "boxes/demo-box/index.json")
    archive = state.objects[keys.archive]
    assert archive is not None and (archive.size, archive.sha256) == (
        release.manifest.archive.size,
        release.manifest.archive.sha256,
    )


def test_read_remote_state_warns_of_dangling_entries_and_finds_earlier_frames_only_for_a_new_archive(
    tmp_path: Path,
) -> None:
    old, gone = framed_release("0.9.0"), framed_release("0.8.0")
    store, _ = _store_with(tmp_path, [old, gone])
    store.put_bytes(old.keys.archive, b"x" * 20)
    new = framed_release("1.0.0", ("a", "c"))
    state = read_remote_state(store, new)
    assert state.dangling == (f"demo-box 0.8.0 linux-x86_64-cuda12.4 ({gone.keys.archive})",)
    assert [e.key for e in state.earlier] == [old.keys.archive] and state.notes == ()
    assert not state.index_lists_release
    plan_warnings = plan_publish(
        new, LocalArchive(ARCHIVE.path, 20, new.archive.sha256, box=box_json_for(new)), state
    ).warnings
    assert plan_warnings == (
        f"{state.index_file} lists demo-box 0.8.0 linux-x86_64-cuda12.4 ({gone.keys.archive}), but its files "
        "are missing from the store",
    )
    store.put_bytes(new.keys.archive, b"y" * 20)
    assert read_remote_state(store, new).earlier == ()  # already there: nothing to copy into
    unframed = MANIFEST.model_copy(update={"version": "1.0.0"})
    assert read_remote_state(store, unframed).earlier == ()


def test_read_remote_state_of_an_index_of_another_box_looks_no_further(tmp_path: Path) -> None:
    store, _ = _store_with(tmp_path, [framed_release("0.9.0")])
    path = store.path_for(index_key("demo-box"))
    path.write_bytes(path.read_bytes().replace(b'"demo-box"', b'"other-box"', 1))
    state = read_remote_state(store, framed_release("1.0.0"))
    assert state.index is not None and state.index.boxId == "other-box"
    assert (state.dangling, state.earlier, state.index_lists_release) == ((), (), False)
    with pytest.raises(StoreError, match="is the index of box 'other-box'"):
        plan_publish(MANIFEST, ARCHIVE, state)


def test_dangling_entries_are_listed_in_version_and_target_order_with_the_missing_keys() -> None:
    manifests = [
        make_manifest(version=v, cuda=c, size=1, sha256=SHA) for v in ("1.0.0", "0.9.0") for c in ("12.4", None)
    ]
    index = BoxIndex(boxId="demo-box")
    for m in manifests:
        index = merge_entry(index, "demo-box", m.version, entry_for(m)) or index
    missing = {manifests[0].keys.archive, manifests[0].keys.release, manifests[3].keys.release}
    assert dangling_entries(index, missing) == (
        f"demo-box 0.9.0 linux-x86_64-cpu ({manifests[3].keys.release})",
        f"demo-box 1.0.0 linux-x86_64-cuda12.4 ({manifests[0].keys.release}, {manifests[0].keys.archive})",
    )
    assert dangling_entries(index, set()) == ()


def test_a_pre_release_ranks_by_its_own_numbers() -> None:
    index = BoxIndex(boxId="demo-box")
    for m in (framed_release(v) for v in ("1.0.2", "1.0.3-rc.1")):
        index = merge_entry(index, "demo-box", m.version, entry_for(m)) or index
    assert [v for v, _ in reuse_candidates(index, framed_release("2.0.0"), set())] == ["1.0.3-rc.1", "1.0.2"]


def test_a_release_with_build_metadata_ranks_by_its_numbers() -> None:
    index = BoxIndex(boxId="demo-box")
    for m in (framed_release(v) for v in ("1.0.2", "1.0.3+build.7")):
        index = merge_entry(index, "demo-box", m.version, entry_for(m)) or index
    assert [v for v, _ in reuse_candidates(index, framed_release("2.0.0"), set())] == ["1.0.3+build.7", "1.0.2"]


@pytest.mark.parametrize("digest", OTHER_DIGESTS)
def test_an_earlier_manifest_of_another_digest_than_vouched_is_passed_over_whichever_way_it_sorts(
    tmp_path: Path, digest: str
) -> None:
    store, index = _store_with(tmp_path, [framed_release("0.9.0")])
    entry = index.versions["0.9.0"]["linux-x86_64-cuda12.4"]
    vouched = index.model_copy(
        update={"versions": {"0.9.0": {entry.targetId: entry.model_copy(update={"releaseSha256": digest})}}}
    )
    found, notes = earlier_archives(store, vouched, MANIFEST, set())
    assert found == () and len(notes) == 1 and notes[0].endswith(f"the index says {digest}")


@pytest.mark.parametrize("digest", OTHER_DIGESTS)
def test_an_earlier_manifest_of_another_archive_is_passed_over(tmp_path: Path, digest: str) -> None:
    store, index = _store_with(tmp_path, [framed_release("0.9.0")])
    entry = index.versions["0.9.0"]["linux-x86_64-cuda12.4"]
    other = framed_release("0.9.0")
    other = other.model_copy(update={"archive": other.archive.model_copy(update={"sha256": digest})})
    store.path_for(entry.release).write_bytes(dump_release(other))
    unvouched = index.model_copy(
        update={"versions": {"0.9.0": {entry.targetId: entry.model_copy(update={"releaseSha256": None})}}}
    )
    found, notes = earlier_archives(store, unvouched, MANIFEST, set())
    assert found == () and notes[0].endswith("describes another archive than the index entry")


def test_other_targets_come_after_the_same_target_whichever_way_they_sort() -> None:
    index = BoxIndex(boxId="demo-box")
    for version, cuda in (("1.0.0", "12.8"), ("0.9.0", "12.4"), ("1.0.0", None)):
        m = make_manifest(version=version, cuda=cuda, size=1, sha256=SHA)
        index = merge_entry(index, "demo-box", version, entry_for(m)) or index
    current = make_manifest(version="1.1.0", size=1, sha256=SHA)
    order = [(v, e.targetId) for v, e in reuse_candidates(index, current, set())]
    assert order == [
        ("0.9.0", "linux-x86_64-cuda12.4"),
        ("1.0.0", "linux-x86_64-cpu"),
        ("1.0.0", "linux-x86_64-cuda12.8"),
    ]


@pytest.mark.parametrize("other", ["alpha-box", "other-box"])  # sorting before and after demo-box
def test_read_remote_state_stops_at_the_index_of_another_box_either_way(tmp_path: Path, other: str) -> None:
    store, _ = _store_with(tmp_path, [framed_release("0.9.0")])
    path = store.path_for(index_key("demo-box"))
    path.write_bytes(path.read_bytes().replace(b'"demo-box"', f'"{other}"'.encode(), 1))
    state = read_remote_state(store, framed_release("1.0.0"))
    assert state.index is not None and state.index.boxId == other
    assert (state.earlier, state.dangling) == ((), ())  # another box's entries are not checked against this one
