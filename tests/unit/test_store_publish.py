"""plan_publish is pure: what goes up, what is skipped, and what is refused before any write."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scrollcase.digest import sha256_bytes
from scrollcase.errors import ConflictError, IntegrityError
from scrollcase.release import dump_release
from scrollcase.store.base import ObjectInfo, sidecar_text
from scrollcase.store.publish import LocalArchive, RemoteState, plan_publish
from tests.support.releases import make_manifest

DATA = b"not really a zstd tar, but bytes with a known digest"
SHA = hashlib.sha256(DATA).hexdigest()
MANIFEST = make_manifest(size=len(DATA), sha256=SHA)
ARCHIVE = LocalArchive(path=Path("dist") / MANIFEST.archive.name, size=len(DATA), sha256=SHA)
KEYS = MANIFEST.keys


def empty() -> RemoteState:
    return RemoteState(objects={}, index_lists_release=False)


def published() -> RemoteState:
    sidecar = sidecar_text(SHA, MANIFEST.archive.name)
    release = dump_release(MANIFEST)
    return RemoteState(objects={
        KEYS.archive: ObjectInfo(KEYS.archive, len(DATA), SHA),
        KEYS.sha256: ObjectInfo(KEYS.sha256, len(sidecar), sha256_bytes(sidecar)),
        KEYS.release: ObjectInfo(KEYS.release, len(release), sha256_bytes(release)),
    }, index_lists_release=True)


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
    tampered = LocalArchive(ARCHIVE.path, ARCHIVE.size, hashlib.sha256(b"evil").hexdigest())
    with pytest.raises(IntegrityError) as caught:
        plan_publish(MANIFEST, tampered, empty(), "dist/x.release.json")
    assert "dist/x.release.json" in caught.value.render()
    assert caught.value.fix


def test_truncated_archive_is_refused() -> None:
    with pytest.raises(IntegrityError, match="bytes"):
        plan_publish(MANIFEST, LocalArchive(ARCHIVE.path, ARCHIVE.size - 1, SHA), empty())


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
