"""plan_publish is pure: what goes up, what is skipped, and what is refused before any write; and the
executor's handling of a lost create-if-absent race (on a real directory store)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scrollcase.box.release import ArchiveFrame, ReleaseManifest, dump_release
from scrollcase.errors import ConflictError, IntegrityError
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import FileUpload, ObjectInfo, Piece, Transfer, sidecar_text
from scrollcase.store.index import index_key, parse_index
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import (
    LocalArchive,
    RemoteState,
    earlier_archives,
    plan_publish,
    publish,
    reuse_candidates,
)
from scrollcase.store.reuse import EarlierArchive
from tests.support.releases import box_json_for, make_manifest, write_release

DATA = b"not really a zstd tar, but bytes with a known digest"
SHA = hashlib.sha256(DATA).hexdigest()
MANIFEST = make_manifest(size=len(DATA), sha256=SHA)
ARCHIVE = LocalArchive(
    path=Path("dist") / MANIFEST.archive.name, size=len(DATA), sha256=SHA, box=box_json_for(MANIFEST)
)
KEYS = MANIFEST.keys


def empty() -> RemoteState:
    return RemoteState(objects={}, index_lists_release=False)


def published() -> RemoteState:
    sidecar = sidecar_text(SHA, MANIFEST.archive.name)
    release = dump_release(MANIFEST)
    return RemoteState(
        objects={
            KEYS.archive: ObjectInfo(KEYS.archive, len(DATA), SHA),
            KEYS.sha256: ObjectInfo(KEYS.sha256, len(sidecar), sha256_bytes(sidecar)),
            KEYS.release: ObjectInfo(KEYS.release, len(release), sha256_bytes(release)),
        },
        index_lists_release=True,
    )


def test_fresh_store_uploads_archive_then_sidecar_then_manifest() -> None:
    plan = plan_publish(MANIFEST, ARCHIVE, empty())
    assert [u.kind for u in plan.uploads] == ["archive", "sha256", "release"]
    assert [u.key for u in plan.uploads] == [KEYS.archive, KEYS.sha256, KEYS.release]
    assert all(u.action == "upload" for u in plan.uploads)
    assert plan.index_action == "update"
    assert plan.index_key == "boxes/demo-box/index.json"
    assert plan.bytes_to_upload == len(DATA) + plan.uploads[1].size + plan.uploads[2].size


def test_sidecar_is_sha256sum_format() -> None:
    plan = plan_publish(MANIFEST, ARCHIVE, empty())
    assert plan.uploads[1].data == f"{SHA}  {MANIFEST.archive.name}\n".encode()
    assert plan.uploads[2].data == dump_release(MANIFEST)


def test_identical_release_is_a_no_op() -> None:
    plan = plan_publish(MANIFEST, ARCHIVE, published())
    assert [u.action for u in plan.uploads] == ["skip", "skip", "skip"]
    assert plan.bytes_to_upload == 0
    assert plan.index_action == "skip"


def test_half_published_release_uploads_only_what_is_missing() -> None:
    state = published()
    objects = dict(state.objects)
    objects[KEYS.release] = None
    objects[KEYS.sha256] = None
    plan = plan_publish(MANIFEST, ARCHIVE, RemoteState(objects, False))
    assert [u.action for u in plan.uploads] == ["skip", "upload", "upload"]


def test_different_bytes_under_the_key_is_a_conflict_naming_the_release() -> None:
    objects = dict(published().objects)
    objects[KEYS.archive] = ObjectInfo(KEYS.archive, len(DATA), "f" * 64)
    with pytest.raises(ConflictError) as caught:
        plan_publish(MANIFEST, ARCHIVE, RemoteState(objects, True))
    text = caught.value.render()
    assert "demo-box 1.0.0 linux-x86_64-cuda12.4" in text
    assert "f" * 64 in text and SHA in text
    assert "bump `version`" in text


def test_unknown_remote_digest_is_a_conflict_not_a_guess() -> None:
    objects = {KEYS.archive: ObjectInfo(KEYS.archive, len(DATA), None)}
    with pytest.raises(ConflictError, match="unknown sha256"):
        plan_publish(MANIFEST, ARCHIVE, RemoteState(objects, False))


def test_tampered_archive_is_refused_before_planning_uploads() -> None:
    tampered = LocalArchive(ARCHIVE.path, ARCHIVE.size, hashlib.sha256(b"evil").hexdigest(), box=ARCHIVE.box)
    with pytest.raises(IntegrityError) as caught:
        plan_publish(MANIFEST, tampered, empty(), "dist/x.release.json")
    assert "dist/x.release.json" in caught.value.render()
    assert caught.value.fix


def test_truncated_archive_is_refused() -> None:
    with pytest.raises(IntegrityError, match="bytes"):
        plan_publish(MANIFEST, LocalArchive(ARCHIVE.path, ARCHIVE.size - 1, SHA, box=ARCHIVE.box), empty())


def test_hand_edited_keys_are_refused() -> None:
    edited = MANIFEST.model_copy(update={"keys": MANIFEST.keys.model_copy(update={"archive": "elsewhere"})})
    with pytest.raises(IntegrityError, match="keys"):
        plan_publish(edited, ARCHIVE, empty())


def test_plan_json_has_no_payloads() -> None:
    data = plan_publish(MANIFEST, ARCHIVE, empty()).to_json()
    assert data["release"] == {"boxId": "demo-box", "version": "1.0.0", "targetId": "linux-x86_64-cuda12.4"}
    assert all("data" not in u for u in data["uploads"])
    assert data["index"]["action"] == "update"


def test_byte_progress_reports_each_tenth_once() -> None:
    from scrollcase.store.publish import byte_progress

    lines: list[str] = []
    advance = byte_progress(1000, lines.append)
    for _ in range(100):
        advance(10)
    assert len(lines) == 10
    assert lines[-1] == "  100% (1000 of 1000 bytes)"


# ------------------------------------------------------------ issue 15: everything is checked before a write


def relabel_cpu_as_cuda() -> tuple[LocalArchive, ReleaseManifest]:
    """The demo's CPU box under a CUDA name: a self-consistent manifest (target, targetId, keys, driver)."""
    from scrollcase.box.release import object_keys
    from scrollcase.recipe.model import Target

    cpu = make_manifest(size=len(DATA), sha256=SHA, cuda=None)
    target = Target(platform="linux", arch="x86_64", accelerator="cuda", cudaVersion="12.4")
    tid = "linux-x86_64-cuda12.4"
    forged = cpu.model_copy(
        update={
            "target": target,
            "targetId": tid,
            "compatibility": cpu.compatibility.model_copy(update={"minNvidiaDriverVersion": "550.54"}),
            "keys": object_keys(cpu.boxId, cpu.version, tid, cpu.archive.name),
        }
    )
    return LocalArchive(ARCHIVE.path, len(DATA), SHA, box=box_json_for(cpu)), forged


def test_defect1_cpu_box_relabelled_as_cuda_is_refused() -> None:
    archive, forged = relabel_cpu_as_cuda()
    with pytest.raises(IntegrityError) as caught:
        plan_publish(forged, archive, empty(), "x.release.json")
    keys = {p.key for p in caught.value.problems}
    assert {"target", "targetId", "gpu"} <= keys, caught.value.render()


def test_defect1_relabelled_box_json_too_is_caught_by_the_gpu_evidence() -> None:
    """Even when box.json was forged along with the manifest, the evidence (a CPU box) does not fit."""
    _, forged = relabel_cpu_as_cuda()
    archive = LocalArchive(ARCHIVE.path, len(DATA), SHA, box=box_json_for(forged))
    with pytest.raises(IntegrityError) as caught:
        plan_publish(forged, archive, empty())
    assert [p.key for p in caught.value.problems] == ["gpu"]
    assert "needs CUDA 12.4" in caught.value.render()


def test_defect1_box_json_of_another_box_or_version_is_refused() -> None:
    other = box_json_for(make_manifest(size=len(DATA), sha256=SHA, box_id="other-box", version="2.0.0"))
    with pytest.raises(IntegrityError) as caught:
        plan_publish(MANIFEST, LocalArchive(ARCHIVE.path, len(DATA), SHA, box=other), empty())
    assert {p.key for p in caught.value.problems} == {"boxId", "version"}


def test_defect1_failed_or_missing_self_test_is_refused() -> None:
    from scrollcase.box.release import SelfTestReport

    for report in (SelfTestReport(passed=False, checks=[]), None):
        manifest = MANIFEST.model_copy(update={"selfTest": report})
        with pytest.raises(IntegrityError) as caught:
            plan_publish(manifest, ARCHIVE, empty())
        assert [p.key for p in caught.value.problems] == ["selfTest.passed"]


def test_defect1_cuda_release_without_gpu_evidence_and_archive_without_box_json() -> None:
    manifest = MANIFEST.model_copy(update={"gpu": None})
    archive = LocalArchive(ARCHIVE.path, len(DATA), SHA, box=box_json_for(manifest))
    with pytest.raises(IntegrityError, match="no GPU evidence"):
        plan_publish(manifest, archive, empty())
    with pytest.raises(IntegrityError, match=r"has no box\.json"):
        plan_publish(MANIFEST, LocalArchive(ARCHIVE.path, len(DATA), SHA), empty())


def test_defect2_index_listing_other_bytes_is_a_conflict_at_planning_time() -> None:
    from scrollcase.store.index import BoxIndex, entry_for

    theirs = entry_for(MANIFEST).model_copy(update={"sha256": "e" * 64})
    index = BoxIndex(boxId=MANIFEST.boxId, versions={MANIFEST.version: {MANIFEST.targetId: theirs}})
    with pytest.raises(ConflictError, match="already lists"):
        plan_publish(MANIFEST, ARCHIVE, RemoteState(objects={}, index_lists_release=False, index=index))


def test_defect4_index_of_another_box_is_refused_and_dangling_entries_are_warned() -> None:
    from scrollcase.errors import StoreError
    from scrollcase.store.index import BoxIndex

    with pytest.raises(StoreError, match="index of box 'someone-else'") as caught:
        plan_publish(MANIFEST, ARCHIVE, RemoteState({}, False, index=BoxIndex(boxId="someone-else")))
    assert not isinstance(caught.value, ConflictError) and caught.value.exit_code == 9
    plan = plan_publish(
        MANIFEST,
        ARCHIVE,
        RemoteState({}, False, index=BoxIndex(boxId=MANIFEST.boxId), dangling=("demo-box 0.9.0 linux-x86_64-cpu (k)",)),
    )
    assert len(plan.warnings) == 1 and "0.9.0" in plan.warnings[0]
    assert plan.to_json()["warnings"] == list(plan.warnings)


# --- lost races (docs/publish.md, Guarantees 4 and 5) ------------------------------------------------


class RacingStore(LocalStore):
    """A directory store where a rival publisher creates the archive key just before our upload of it
    (between our HEAD and our create-if-absent write): the race a second CI job can win."""

    def __init__(self, root: Path, rival: bytes) -> None:
        super().__init__(root)
        self.rival = rival

    def put_file(self, key: str, upload: FileUpload) -> Transfer:
        rival = self.path_for(key)
        rival.parent.mkdir(parents=True, exist_ok=True)
        rival.write_bytes(self.rival)
        return super().put_file(key, upload)


def test_lost_race_to_identical_bytes_succeeds_and_completes_the_release(tmp_path: Path) -> None:
    """docs/publish.md Guarantee 5: "Two publishers of the same release both succeed: one writes, the
    other finds identical bytes" -- also when the other wrote the archive after our HEAD."""
    release = write_release(tmp_path / "dist")
    store = RacingStore(tmp_path / "store", rival=release.archive_path.read_bytes())
    result = publish(store, release.manifest, release.archive_path)
    assert list(result.uploaded) == [release.manifest.keys.sha256, release.manifest.keys.release]
    assert result.index_written
    assert (tmp_path / "store" / release.manifest.keys.release).read_bytes() == dump_release(release.manifest)


def test_lost_race_to_different_bytes_is_a_conflict_and_publishes_no_manifest(tmp_path: Path) -> None:
    """docs/publish.md Guarantee 4: a key that already holds different bytes is a ConflictError -- a
    publisher that lost the archive race to other bytes must not go on to upload its sidecar and a
    manifest that would point at someone else's archive."""
    release = write_release(tmp_path / "dist")
    store = RacingStore(tmp_path / "store", rival=b"another build's archive")
    with pytest.raises(ConflictError, match="already published with different bytes"):
        publish(store, release.manifest, release.archive_path)
    keys = release.manifest.keys
    assert not (tmp_path / "store" / keys.sha256).exists()
    assert not (tmp_path / "store" / keys.release).exists()
    assert not (tmp_path / "store" / "boxes/demo-box/index.json").exists()


def test_a_dest_limit_that_is_not_box_jsons_is_refused() -> None:
    """The index and hosts check DEST against the manifest's relocation before downloading: it must be box.json's."""
    from scrollcase.box.release import ReleaseRelocation

    assert plan_publish(
        MANIFEST.model_copy(update={"relocation": ReleaseRelocation(placeholderBytes=196)}), ARCHIVE, empty()
    )
    lying = MANIFEST.model_copy(update={"relocation": ReleaseRelocation(placeholderBytes=196, maxDestBytes=196)})
    with pytest.raises(IntegrityError) as caught:
        plan_publish(lying, ARCHIVE, empty())  # box.json's relocation has no binary file: no limit
    assert [p.key for p in caught.value.problems] == ["relocation"]


# --- reusing the frames of earlier releases (docs/publish.md, "Reusing earlier releases") --------------


def framed(frames: list[tuple[str, int]]) -> tuple[ReleaseManifest, LocalArchive]:
    rows, offset = [], 0
    for tag, size in frames:
        rows.append(
            ArchiveFrame(name=tag, offset=offset, size=size, uncompressedSize=size, sha256=sha256_bytes(tag.encode()))
        )
        offset += size
    manifest = MANIFEST.model_copy(
        update={"archive": MANIFEST.archive.model_copy(update={"size": offset, "frames": rows})}
    )
    return manifest, LocalArchive(path=ARCHIVE.path, size=offset, sha256=SHA, box=ARCHIVE.box)


def test_plan_copies_the_frames_an_earlier_archive_holds() -> None:
    manifest, archive = framed([("a", 100), ("b2", 30), ("c", 200)])
    old, _ = framed([("a", 100), ("b", 40), ("c", 200)])
    source = EarlierArchive("boxes/demo-box/0.9.0/x.tar.zst", "demo-box 0.9.0", tuple(old.archive.frames or []))
    plan = plan_publish(manifest, archive, RemoteState({}, False, earlier=(source,)))
    step = plan.uploads[0]
    assert step.pieces == (Piece(0, 100, source.key, 0), Piece(100, 130), Piece(130, 330, source.key, 140))
    assert (step.bytes_to_send, step.bytes_reused) == (30, 300)
    assert plan.bytes_to_send == 30 + sum(u.size for u in plan.uploads[1:])
    out = plan.to_json()
    assert out["bytesReused"] == 300 and out["uploads"][0]["reusedFrom"] == [{"key": source.key, "bytes": 300}]
    shaped = plan_publish(manifest, archive, RemoteState({}, False, earlier=(source,)), layout=lambda _s, _p: ())
    assert shaped.uploads[0].pieces == () and shaped.bytes_reused == 0  # the store could not use the copies


def test_an_archive_already_published_is_skipped_not_copied() -> None:
    manifest, archive = framed([("a", 100)])
    source = EarlierArchive("k", "l", tuple(manifest.archive.frames or []))
    objects = {manifest.keys.archive: ObjectInfo(manifest.keys.archive, 100, SHA)}
    plan = plan_publish(manifest, archive, RemoteState(objects, False, earlier=(source,)))
    assert plan.uploads[0].action == "skip" and plan.uploads[0].pieces == () and plan.bytes_reused == 0


def test_earlier_releases_are_read_same_target_first_newest_first(tmp_path: Path) -> None:
    """Only releases whose manifest the index vouches for, the same target before others, newest first."""
    store = LocalStore(tmp_path / "store")
    for version, cuda in [("0.9.0", "12.4"), ("1.1.0", "12.4"), ("1.0.0", None), ("0.10.0", "12.4")]:
        release = write_release(tmp_path / version / str(cuda), version=version, cuda=cuda)
        publish(store, release.manifest, release.archive_path)
    current = write_release(tmp_path / "new", version="1.0.1")
    index = parse_index(store.get_bytes(index_key("demo-box")).data, "index.json")  # type: ignore[union-attr]
    found, notes = earlier_archives(store, index, current.manifest, set())
    assert found == () and notes == ()  # none of them has a frame table
    order = [(v, e.targetId) for v, e in reuse_candidates(index, current.manifest, set())]
    assert order == [
        ("1.1.0", "linux-x86_64-cuda12.4"),
        ("0.10.0", "linux-x86_64-cuda12.4"),
        ("0.9.0", "linux-x86_64-cuda12.4"),
        ("1.0.0", "linux-x86_64-cpu"),
    ]
    gone = {index.versions["1.1.0"]["linux-x86_64-cuda12.4"].archive}
    assert [v for v, _ in reuse_candidates(index, current.manifest, gone)] == ["0.10.0", "0.9.0", "1.0.0"]
