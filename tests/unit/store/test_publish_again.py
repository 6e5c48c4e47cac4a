"""A release published a second time (issue 30): the same archive rebuilt by a later tag differs from the
stored release manifest only in ``provenance`` and is "already published"; anything else under the same
version is a conflict that says what differs.  Planned purely, then on a real directory store."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Unpack

import pytest

from scrollcase.errors import ConflictError
from scrollcase.format.provenance import BuildProvenance, describe_provenance
from scrollcase.format.release import ReleaseManifest, dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import ObjectInfo, WriteOptions, sidecar_text
from scrollcase.store.index import BoxIndex, entry_for, index_key, merge_entry, parse_index
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.publishplan import LocalArchive, plan_publish
from scrollcase.store.remote import RemoteState, read_remote_state
from tests.support.releases import box_json_for, make_manifest, write_release

DATA = b"the archive both tags built, byte for byte"
SHA = hashlib.sha256(DATA).hexdigest()
FIRST = BuildProvenance(repository="octo/boxes", ref="refs/tags/v1.0.0", commit="a" * 40, runId="101")
SECOND = BuildProvenance(repository="octo/boxes", ref="refs/tags/v1.0.1", commit="b" * 40, runId="202")


def built(provenance: BuildProvenance | None, size: int = len(DATA), sha: str = SHA) -> ReleaseManifest:
    return make_manifest(size=size, sha256=sha).model_copy(update={"provenance": provenance})


def archive_of(manifest: ReleaseManifest) -> LocalArchive:
    size, sha = manifest.archive.size, manifest.archive.sha256
    return LocalArchive(path=Path("dist") / manifest.archive.name, size=size, sha256=sha, box=box_json_for(manifest))


def store_holding(stored: ReleaseManifest, *, indexed: bool = True, archive_sha: str | None = None) -> RemoteState:
    """What read_remote_state finds after ``stored`` was published (its archive's digest: ``archive_sha``)."""
    keys, release = stored.keys, dump_release(stored)
    sidecar = sidecar_text(stored.archive.sha256, stored.archive.name)
    index = merge_entry(None, stored.boxId, stored.version, entry_for(stored)) if indexed else None
    return RemoteState(
        objects={
            keys.archive: ObjectInfo(keys.archive, stored.archive.size, archive_sha or stored.archive.sha256),
            keys.sha256: ObjectInfo(keys.sha256, len(sidecar), sha256_bytes(sidecar)),
            keys.release: ObjectInfo(keys.release, len(release), sha256_bytes(release)),
        },
        index_lists_release=False,  # as read_remote_state computes it for another manifest than the stored one
        index=index,
        stored_release=stored,
    )


def test_the_same_archive_rebuilt_by_a_later_tag_is_already_published_and_keeps_the_first_provenance() -> None:
    stored, again = built(FIRST), built(SECOND)
    plan = plan_publish(again, archive_of(again), store_holding(stored))
    assert [(u.kind, u.action) for u in plan.uploads] == [("archive", "skip"), ("sha256", "skip"), ("release", "skip")]
    assert plan.bytes_to_upload == 0 and plan.index_action == "skip"
    assert plan.kept == stored and plan.index_entry == entry_for(stored)
    notice = plan.already_published_notice()
    assert notice is not None
    assert "octo/boxes refs/tags/v1.0.0 at aaaaaaaaaaaa (run 101)" in notice  # the provenance the store keeps
    assert "refs/tags/v1.0.1" in notice and "differs only in provenance" in notice
    assert "already published by octo/boxes refs/tags/v1.0.0" in plan.uploads[-1].reason
    assert plan.to_json()["alreadyPublished"] is True
    assert plan.to_json()["keptProvenance"] == FIRST.model_dump(mode="json")


def test_the_same_archive_built_by_a_newer_scrollcase_is_already_published() -> None:
    """An adopter's ``@v1`` moves between two of their tags: builtBy.scrollcase differs, the archive does not."""
    stored = built(FIRST)
    newer = built(SECOND)
    newer = newer.model_copy(update={"builtBy": newer.builtBy.model_copy(update={"scrollcase": "9.9.9"})})
    plan = plan_publish(newer, archive_of(newer), store_holding(stored))
    assert plan.kept == stored and plan.bytes_to_upload == 0


def test_the_same_archive_from_another_lock_is_a_conflict_naming_built_by() -> None:
    stored = built(FIRST)
    other = built(SECOND)
    other = other.model_copy(update={"builtBy": other.builtBy.model_copy(update={"lockSha256": "c" * 64})})
    with pytest.raises(ConflictError, match="builtBy"):
        plan_publish(other, archive_of(other), store_holding(stored))


def test_a_release_first_built_outside_actions_is_already_published_for_a_tag_build() -> None:
    plan = plan_publish(built(SECOND), archive_of(built(SECOND)), store_holding(built(None)))
    assert plan.kept == built(None) and plan.bytes_to_upload == 0
    assert "a build outside GitHub Actions (no provenance)" in (plan.already_published_notice() or "")


def test_an_interrupted_first_publish_is_completed_with_the_stored_manifest_in_the_index() -> None:
    """The manifest is in the store but the index was never written: the kept manifest is indexed, with
    the digest of the bytes the store holds (not of this build's manifest)."""
    stored, again = built(FIRST), built(SECOND)
    plan = plan_publish(again, archive_of(again), store_holding(stored, indexed=False))
    assert plan.index_action == "update" and plan.kept == stored
    assert plan.index_entry.releaseSha256 == sha256_bytes(dump_release(stored))
    assert plan.index_entry.releaseSha256 != sha256_bytes(dump_release(again))


def test_an_identical_manifest_is_not_reported_as_kept() -> None:
    state = store_holding(built(FIRST))
    plan = plan_publish(built(FIRST), archive_of(built(FIRST)), RemoteState(state.objects, True, state.index))
    assert plan.kept is None and plan.already_published_notice() is None
    assert [u.action for u in plan.uploads] == ["skip", "skip", "skip"]


def test_other_archive_bytes_under_the_same_version_name_both_digests_and_the_fix() -> None:
    other = "c" * 64
    again = built(SECOND)
    with pytest.raises(ConflictError) as caught:
        plan_publish(again, archive_of(again), store_holding(built(FIRST, sha=other), archive_sha=other))
    message = caught.value.message
    assert f"its archive {again.keys.archive} holds {len(DATA)} bytes with sha256 {other} (stored)" in message
    assert f"this build's archive is {len(DATA)} bytes with sha256 {SHA} (new)" in message
    fix = caught.value.fix or ""
    assert "bump `version` in recipes/demo-box-linux-x86_64-cuda12.4/recipe.json (now 1.0.0)" in fix


def test_a_stored_manifest_naming_another_archive_is_a_conflict_naming_both() -> None:
    """The stored archive itself is gone (deleted by hand), so only the stored manifest says what it was."""
    other = "d" * 64
    state = store_holding(built(FIRST, sha=other))
    objects = {**state.objects, built(FIRST).keys.archive: None}
    again = built(SECOND)
    with pytest.raises(ConflictError) as caught:
        plan_publish(
            again, archive_of(again), RemoteState(objects, False, state.index, stored_release=state.stored_release)
        )
    assert f"names {len(DATA)} bytes with sha256 {other} (stored)" in caught.value.message
    assert f"this build's archive is {len(DATA)} bytes with sha256 {SHA} (new)" in caught.value.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("modelId", "another-model"), ("sourceRevision", "v2"), ("recipeVersion", "1.0.1")],
)
def test_the_same_archive_with_other_identity_fields_is_a_conflict_naming_them(field: str, value: str) -> None:
    stored = built(FIRST).model_copy(update={field: value})
    again = built(SECOND)
    with pytest.raises(ConflictError) as caught:
        plan_publish(again, archive_of(again), store_holding(stored))
    message = caught.value.message
    assert f"already published with the same archive (sha256 {SHA}) but another release manifest" in message
    assert f"differs from this build's in {field} (provenance aside)" in message
    assert "different bytes" not in message


def test_the_same_archive_with_other_compatibility_and_self_test_lists_each_field() -> None:
    stored = built(FIRST)
    stored = stored.model_copy(
        update={
            "compatibility": stored.compatibility.model_copy(update={"minRamGb": 64.0}),
            "selfTest": None,
        }
    )
    again = built(SECOND)
    with pytest.raises(ConflictError, match=r"differs from this build's in compatibility, selfTest \(provenance"):
        plan_publish(again, archive_of(again), store_holding(stored))


def test_stored_bytes_that_are_no_manifest_are_a_conflict_naming_their_digest() -> None:
    state = store_holding(built(FIRST))
    key = built(FIRST).keys.release
    objects = {**state.objects, key: ObjectInfo(key, 5, "e" * 64)}
    again = built(SECOND)
    with pytest.raises(ConflictError) as caught:
        plan_publish(again, archive_of(again), RemoteState(objects, False, state.index))
    assert f"different bytes: {key} holds 5 bytes with sha256 {'e' * 64} (stored)" in caught.value.message


def test_an_index_entry_of_the_same_archive_with_another_manifest_digest_says_so() -> None:
    stored = entry_for(built(FIRST))
    index = BoxIndex(boxId="demo-box", versions={"1.0.0": {stored.targetId: stored}})
    with pytest.raises(ConflictError) as caught:
        merge_entry(index, "demo-box", "1.0.0", entry_for(built(SECOND)))
    assert f"the same archive (sha256 {SHA}), but releaseSha256 differ" in caught.value.message
    other = entry_for(built(SECOND, sha="f" * 64))
    with pytest.raises(ConflictError, match=f"its archive has sha256 {SHA} .* this publish's {'f' * 64}"):
        merge_entry(index, "demo-box", "1.0.0", other)


def test_describe_provenance_names_repository_ref_commit_and_run() -> None:
    assert describe_provenance(FIRST) == "octo/boxes refs/tags/v1.0.0 at aaaaaaaaaaaa (run 101)"


# ------------------------------------------------------------------------------ on a real directory store


def rebuilt(tmp_path: Path, provenance: BuildProvenance | None) -> tuple[Path, ReleaseManifest, Path]:
    """The first release's archive, a second time, with a manifest naming ``provenance``."""
    first = write_release(tmp_path / "dist")
    manifest = first.manifest.model_copy(update={"provenance": provenance})
    return first.archive_path, manifest, tmp_path / "store"


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def test_a_second_tag_publishes_nothing_to_a_directory_store(tmp_path: Path) -> None:
    archive, manifest, root = rebuilt(tmp_path, SECOND)
    store = LocalStore(root)
    publish(store, manifest.model_copy(update={"provenance": FIRST}), archive)
    before = snapshot(root)
    result = publish(store, manifest, archive)
    assert (result.uploaded, result.index_written) == ((), False)
    assert snapshot(root) == before  # nothing written, not even touched
    assert result.plan.kept is not None and result.plan.kept.provenance == FIRST
    stored = parse_index((root / index_key("demo-box")).read_bytes(), "index.json")
    assert stored.versions["1.0.0"]["linux-x86_64-cuda12.4"].releaseSha256 == sha256_bytes(
        dump_release(manifest.model_copy(update={"provenance": FIRST}))
    )
    assert read_remote_state(store, manifest).stored_release == result.plan.kept


class RivalManifestStore(LocalStore):
    """A directory store where another run's release manifest lands just before ours (a lost race)."""

    def __init__(self, root: Path, rival: bytes) -> None:
        super().__init__(root)
        self.rival = rival

    def put_bytes(self, key: str, data: bytes, **write: Unpack[WriteOptions]) -> str:
        if key.endswith(".release.json") and not self.path_for(key).exists():
            super().put_bytes(key, self.rival, if_none_match=True)
        return super().put_bytes(key, data, **write)


def test_a_race_lost_to_a_manifest_that_differs_only_in_provenance_keeps_it(tmp_path: Path) -> None:
    archive, manifest, root = rebuilt(tmp_path, SECOND)
    rival = dump_release(manifest.model_copy(update={"provenance": FIRST}))
    result = publish(RivalManifestStore(root, rival), manifest, archive)
    assert (root / manifest.keys.release).read_bytes() == rival
    assert result.plan.kept is not None and result.plan.kept.provenance == FIRST
    assert manifest.keys.release not in result.uploaded and result.index_written
    index = parse_index((root / index_key("demo-box")).read_bytes(), "index.json")
    assert index.versions["1.0.0"]["linux-x86_64-cuda12.4"].releaseSha256 == sha256_bytes(rival)


def test_a_race_lost_to_a_manifest_with_other_fields_is_a_conflict_naming_them(tmp_path: Path) -> None:
    archive, manifest, root = rebuilt(tmp_path, SECOND)
    rival = dump_release(manifest.model_copy(update={"sourceRevision": "elsewhere", "provenance": FIRST}))
    with pytest.raises(ConflictError, match=r"differs from this build's in sourceRevision \(provenance aside\)"):
        publish(RivalManifestStore(root, rival), manifest, archive)
    assert not (root / index_key("demo-box")).exists()
