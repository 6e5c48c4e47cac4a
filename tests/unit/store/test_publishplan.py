"""store/publishplan.py: plan_publish is pure: what goes up, what is skipped, what is copied from earlier
archives, and what is refused before any write."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.format.release import ArchiveFrame, ReleaseManifest, dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import ObjectInfo, Piece, sidecar_text
from scrollcase.store.index import BoxIndex, entry_for, merge_entry
from scrollcase.store.publish import (
    PublishResult,
    size_note,
)
from scrollcase.store.publishplan import LocalArchive, Upload, plan_publish
from scrollcase.store.remote import (
    RemoteState,
)
from scrollcase.store.reuse import EarlierArchive
from tests.support.releases import box_json_for, make_manifest

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


def test_sbom_bytes_for_a_release_that_names_no_sbom_are_not_published() -> None:
    plan = plan_publish(MANIFEST, ARCHIVE, empty(), sbom=b"{}\n")
    assert [u.kind for u in plan.uploads] == ["archive", "sha256", "release"]


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


def relabel_cpu_as_cuda() -> tuple[LocalArchive, ReleaseManifest]:
    """The demo's CPU box under a CUDA name: a self-consistent manifest (target, targetId, keys, driver)."""
    from scrollcase.format.release import object_keys
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
    from scrollcase.format.release import SelfTestReport

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
    from scrollcase.store.index import entry_for

    theirs = entry_for(MANIFEST).model_copy(update={"sha256": "e" * 64})
    index = BoxIndex(boxId=MANIFEST.boxId, versions={MANIFEST.version: {MANIFEST.targetId: theirs}})
    with pytest.raises(ConflictError, match="already lists"):
        plan_publish(MANIFEST, ARCHIVE, RemoteState(objects={}, index_lists_release=False, index=index))


def test_defect4_index_of_another_box_is_refused_and_dangling_entries_are_warned() -> None:

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


def test_a_dest_limit_that_is_not_box_jsons_is_refused() -> None:
    """The index and hosts check DEST against the manifest's relocation before downloading: it must be box.json's."""
    from scrollcase.format.release import ReleaseRelocation

    assert plan_publish(
        MANIFEST.model_copy(update={"relocation": ReleaseRelocation(placeholderBytes=196)}), ARCHIVE, empty()
    )
    lying = MANIFEST.model_copy(update={"relocation": ReleaseRelocation(placeholderBytes=196, maxDestBytes=196)})
    with pytest.raises(IntegrityError) as caught:
        plan_publish(lying, ARCHIVE, empty())  # box.json's relocation has no binary file: no limit
    assert [p.key for p in caught.value.problems] == ["relocation"]


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
    assert [u.kind for u in plan.uploads] == ["archive", "sha256", "release"]
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


def test_a_plan_counts_sent_and_copied_bytes_per_source_and_a_skip_moves_nothing() -> None:
    pieces = (Piece(0, 10, "a"), Piece(10, 15), Piece(15, 40, "b"), Piece(40, 50, "a"))
    step = Upload("archive", "k", 50, SHA, "upload", "not in the store yet", pieces=pieces)
    assert (step.bytes_reused, step.bytes_to_send, step.reused_from()) == (45, 5, {"a": 20, "b": 25})
    assert step.to_json()["reusedFrom"] == [{"key": "a", "bytes": 20}, {"key": "b", "bytes": 25}]
    assert size_note(step) == "50 bytes: 5 to send, 45 to copy from a, b"
    skipped = replace(step, action="skip")
    assert (skipped.bytes_reused, skipped.bytes_to_send) == (0, 0)
    assert "bytesReused" not in skipped.to_json() and skipped.to_json()["bytesToSend"] == 0
    plain = Upload("sha256", "s", 7, SHA, "upload", "not in the store yet", b"1234567")
    assert (plain.bytes_to_send, size_note(plain)) == (7, "7 bytes")
    assert "bytesReused" not in plain.to_json() and "reusedFrom" not in plain.to_json()


def test_a_plan_counts_only_what_it_uploads() -> None:
    state = published()
    objects = dict(state.objects)
    objects[KEYS.release] = None
    plan = plan_publish(MANIFEST, ARCHIVE, RemoteState(objects, True))
    release_size = plan.uploads[2].size
    assert (plan.bytes_to_upload, plan.bytes_to_send, plan.bytes_reused) == (release_size, release_size, 0)
    out = plan.to_json()
    assert (out["bytesToUpload"], out["bytesToSend"], out["bytesReused"]) == (release_size, release_size, 0)
    assert out["index"] == {"key": "boxes/demo-box/index.json", "action": "skip"}  # the index listed it
    assert [u["action"] for u in out["uploads"]] == ["skip", "skip", "upload"]


OTHER_DIGESTS = ("0" * 64, "f" * 64)  # sorting before and after any real sha256


@pytest.mark.parametrize(
    ("size", "sha"), [(len(DATA) + 1, SHA), (len(DATA) - 1, SHA), *((len(DATA), d) for d in OTHER_DIGESTS)]
)
def test_an_archive_of_another_size_or_digest_is_refused(size: int, sha: str) -> None:
    with pytest.raises(IntegrityError, match="does not match"):
        plan_publish(MANIFEST, LocalArchive(ARCHIVE.path, size, sha, box=ARCHIVE.box), empty())


@pytest.mark.parametrize(
    ("size", "sha"), [(len(DATA) + 1, SHA), (len(DATA) - 1, SHA), *((len(DATA), d) for d in OTHER_DIGESTS)]
)
def test_a_stored_archive_of_another_size_or_digest_is_a_conflict(size: int, sha: str) -> None:
    objects = {KEYS.archive: ObjectInfo(KEYS.archive, size, sha)}
    with pytest.raises(ConflictError, match="already published with different bytes"):
        plan_publish(MANIFEST, ARCHIVE, RemoteState(objects, False))


@pytest.mark.parametrize(
    ("size", "sha"), [(3, "0" * 64), (2, sha256_bytes(b"{}\n")), (4, sha256_bytes(b"{}\n")), (3, "f" * 64)]
)
def test_an_sbom_of_another_size_or_digest_is_refused(size: int, sha: str) -> None:
    from scrollcase.format.release import SbomInfo

    manifest = MANIFEST.model_copy(update={"sbom": SbomInfo(name="x.sbom.json", size=size, sha256=sha)})
    with pytest.raises(IntegrityError, match=r"but release\.json records"):
        plan_publish(manifest, ARCHIVE, empty(), "release.json", sbom=b"{}\n")
    same = manifest.model_copy(update={"sbom": SbomInfo(name="x", size=3, sha256=sha256_bytes(b"{}\n"))})
    assert plan_publish(same, ARCHIVE, empty(), "r", sbom=b"{}\n").uploads[2].kind == "sbom"


def test_a_refusal_names_its_first_problem_and_an_sbom_its_size() -> None:
    archive, forged = relabel_cpu_as_cuda()
    with pytest.raises(IntegrityError) as caught:
        plan_publish(forged, archive, empty(), "x.release.json")
    first, last = caught.value.problems[0], caught.value.problems[-1]
    assert first.message != last.message
    assert f"one sound release ({first.key}: {first.message})" in caught.value.message
    from scrollcase.format.release import SbomInfo

    manifest = MANIFEST.model_copy(update={"sbom": SbomInfo(name="x.sbom.json", size=9, sha256="0" * 64)})
    with pytest.raises(IntegrityError) as sbom:
        plan_publish(manifest, ARCHIVE, empty(), "release.json", sbom=b"{}\n")
    found = sha256_bytes(b"{}\n")
    assert [p.key for p in sbom.value.problems] == ["sbom"]
    assert sbom.value.problems[0].message.startswith(
        f"x.sbom.json is 3 bytes with sha256 {found}, but release.json records 9"
    )


def test_the_plan_and_its_parts_cannot_change() -> None:
    plan = plan_publish(MANIFEST, ARCHIVE, empty())
    result = PublishResult(plan, "store", True, (), False)
    for fact in (ARCHIVE, plan.uploads[0], empty(), plan, result):
        name = next(iter(vars(fact)))
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(fact, name, getattr(fact, name))


def test_a_plan_names_its_release() -> None:
    assert plan_publish(MANIFEST, ARCHIVE, empty()).release == "demo-box 1.0.0 linux-x86_64-cuda12.4"


def test_an_index_that_does_not_list_the_release_is_to_be_updated() -> None:
    other = make_manifest(version="0.9.0", size=1, sha256=SHA)
    index = merge_entry(None, "demo-box", "0.9.0", entry_for(other))
    assert plan_publish(MANIFEST, ARCHIVE, RemoteState({}, False, index=index)).index_action == "update"
    listing = merge_entry(index, "demo-box", MANIFEST.version, entry_for(MANIFEST))
    assert plan_publish(MANIFEST, ARCHIVE, RemoteState({}, False, index=listing)).index_action == "skip"


def test_a_missing_and_a_failed_self_test_are_told_apart() -> None:
    from scrollcase.format.release import SelfTestReport

    for report, said in ((None, "has no self-test report"), (SelfTestReport(passed=False, checks=[]), "failed")):
        with pytest.raises(IntegrityError) as caught:
            plan_publish(MANIFEST.model_copy(update={"selfTest": report}), ARCHIVE, empty())
        assert said in caught.value.problems[0].message
