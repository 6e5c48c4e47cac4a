"""store/publish.py, the executor: measuring the archive, the uploads in order and their progress, the
lost create-if-absent races (on a real directory store), and what a publish reports."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Unpack

import pytest

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.format.release import dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.base import CHUNK, FileUpload, ObjectInfo, Piece, Transfer, WriteOptions
from scrollcase.store.index import index_key, parse_index
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import (
    PublishResult,
    archive_upload,
    byte_progress,
    measure_archive,
    publish,
    sha256_file_and_pieces,
)
from scrollcase.store.publishplan import LocalArchive, Upload, plan_publish
from scrollcase.store.remote import (
    RemoteState,
    earlier_archives,
    read_remote_state,
    reuse_candidates,
)
from scrollcase.store.reuse import EarlierArchive
from tests.support.releases import SyntheticRelease, box_json_for, write_release
from tests.unit.store.test_publishplan import (
    DATA,
    OTHER_DIGESTS,
    SHA,
    empty,
    framed,
)


def test_byte_progress_reports_each_tenth_once() -> None:
    from scrollcase.store.publish import byte_progress

    lines: list[str] = []
    advance = byte_progress(1000, lines.append)
    for _ in range(100):
        advance(10)
    assert len(lines) == 10
    assert lines[-1] == "  100% (1000 of 1000 bytes)"


# ------------------------------------------------------------ issue 15: everything is checked before a write


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


# --- reusing the frames of earlier releases (docs/publish.md, "Reusing earlier releases") --------------


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


# --- the plan's and the result's accounting, and the executor's edges ---------------------------------


def _result(dry_run: bool, sent: Transfer) -> PublishResult:
    manifest, archive = framed([("a", 100), ("b2", 30), ("c", 200)])
    old, _ = framed([("a", 100), ("b", 40), ("c", 200)])
    source = EarlierArchive("old", "demo-box 0.9.0", tuple(old.archive.frames or []))
    plan = plan_publish(manifest, archive, RemoteState({}, False, earlier=(source,)))
    return PublishResult(plan, "store", dry_run, () if dry_run else ("k",), not dry_run, sent)


def test_a_result_reports_what_went_up_and_a_dry_run_what_would() -> None:
    dry = _result(True, Transfer(0))
    small = sum(u.size for u in dry.plan.uploads[1:])
    assert dry.bytes_line() == (
        f"would send {30 + small} bytes, would reuse 300 bytes from earlier releases (90.9% of the archive)"
    )
    assert "bytesSent" not in dry.to_json() and dry.to_json()["dryRun"] is True
    done = _result(False, Transfer(sent=31, reused=299))
    assert done.bytes_line() == "sent 31 bytes, reused 299 bytes from earlier releases (90.6% of the archive)"
    out = done.to_json()
    assert (out["bytesSent"], out["bytesReused"], out["uploaded"], out["indexWritten"]) == (31, 299, ["k"], True)
    assert (out["store"], out["dryRun"]) == ("store", False)
    assert _result(False, Transfer(sent=5)).bytes_line() == "sent 5 bytes, reused 0 bytes from earlier releases"


def test_byte_progress_reports_each_step_it_passes_once_and_survives_an_empty_file() -> None:
    lines: list[str] = []
    advance = byte_progress(1000, lines.append, steps=4)
    for count in (100, 150, 10, 490, 250):
        advance(count)
    assert lines == ["  25% (250 of 1000 bytes)", "  75% (750 of 1000 bytes)", "  100% (1000 of 1000 bytes)"]
    empty: list[str] = []
    byte_progress(0, empty.append)(0)
    assert empty == []


def test_byte_progress_in_a_thousand_steps_reports_each_step_once() -> None:
    lines: list[str] = []
    advance = byte_progress(10_000, lines.append, steps=1000)  # steps past 256: counts no small int stands for
    for count in (3000, 1, 9, 1):
        advance(count)
    assert lines == ["  30% (3000 of 10000 bytes)", "  30% (3010 of 10000 bytes)"]


def test_measure_archive_hashes_the_pieces_the_store_sends(tmp_path: Path) -> None:
    from scrollcase.store.s3 import S3Store

    path = tmp_path / "big.tar.zst"
    data = os.urandom(11 * 1024 * 1024)
    path.write_bytes(data)
    part = 5 * 1024 * 1024
    measured = measure_archive(path, S3Store(None, "bucket", part_size=part))  # type: ignore[arg-type]
    assert (measured.size, measured.sha256) == (len(data), sha256_bytes(data))
    assert measured.part_sha256 == tuple(sha256_bytes(data[i : i + part]) for i in (0, part, 2 * part))
    whole = measure_archive(path, LocalStore(tmp_path / "store"))
    assert (whole.size, whole.sha256, whole.part_sha256) == (len(data), sha256_bytes(data), ())
    with pytest.raises(IntegrityError, match="does not exist"):
        measure_archive(tmp_path / "missing.tar.zst", LocalStore(tmp_path / "store"))


def test_the_pieces_are_hashed_in_one_read_that_also_sees_a_grown_file(tmp_path: Path) -> None:
    path = tmp_path / "a"
    data = os.urandom(3 * CHUNK + 5)
    path.write_bytes(data)
    pieces = (Piece(0, CHUNK + 1), Piece(CHUNK + 1, 3 * CHUNK + 5, "old", 7))
    whole, size, parts = sha256_file_and_pieces(path, pieces)
    assert (whole, size) == (sha256_bytes(data), len(data))
    assert parts == (sha256_bytes(data[: CHUNK + 1]), sha256_bytes(data[CHUNK + 1 :]))
    path.write_bytes(data + b"grown")
    assert sha256_file_and_pieces(path, pieces)[:2] == (sha256_bytes(data + b"grown"), len(data) + 5)
    step = Upload("archive", "k", len(data), sha256_bytes(data), "upload", "", pieces=pieces)
    with pytest.raises(IntegrityError, match="changed while it was being published"):
        archive_upload(step, LocalArchive(path, len(data), sha256_bytes(data)), lambda _: None)
    path.write_bytes(data)
    upload = archive_upload(step, LocalArchive(path, len(data), sha256_bytes(data)), lambda _: None)
    assert (upload.size, upload.sha256, tuple(upload.part_sha256), upload.pieces) == (len(data), whole, parts, pieces)


def test_an_unframed_archive_goes_up_whole_with_its_measured_part_digests(tmp_path: Path) -> None:
    step = Upload("archive", "k", 3, SHA, "upload", "", pieces=(Piece(0, 3),))
    notes: list[str] = []
    upload = archive_upload(step, LocalArchive(tmp_path / "a", 3, SHA, ("p1", "p2")), len, notes.append)
    assert (upload.size, upload.sha256, tuple(upload.part_sha256), tuple(upload.pieces)) == (3, SHA, ("p1", "p2"), ())
    assert upload.progress is len and upload.notice is not None
    upload.notice("why")
    assert notes == ["why"]


def test_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    lines: list[str] = []
    result = publish(
        LocalStore(tmp_path / "store"), release.manifest, release.archive_path, dry_run=True, progress=lines.append
    )
    assert (result.dry_run, result.uploaded, result.index_written) == (True, (), False)
    assert [u.action for u in result.plan.uploads] == ["upload"] * 3 and result.plan.index_action == "update"
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").rglob("*"))
    assert lines[0].startswith(f"checking {release.archive_path} against release.json")


class VanishingStore(RacingStore):
    """A rival creates the archive key before our write and removes it again before we look (a bucket
    being cleaned by hand): refused as existing, then absent."""

    def put_file(self, key: str, upload: FileUpload) -> Transfer:
        try:
            return super().put_file(key, upload)
        finally:
            self.path_for(key).unlink()


def test_a_key_refused_as_existing_that_is_then_absent_is_a_store_error(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    store = VanishingStore(tmp_path / "store", rival=b"whatever")
    with pytest.raises(StoreError, match="was refused as existing but is absent") as caught:
        publish(store, release.manifest, release.archive_path)
    assert not isinstance(caught.value, ConflictError)
    assert not (tmp_path / "store" / release.manifest.keys.release).exists()


class NoDigestStore(LocalStore):
    """A directory store that, like S3 for objects another tool wrote, knows no sha256 of an object; a
    rival publisher writes each small object just before us (``rival``: its bytes, None: ours)."""

    def __init__(self, root: Path, rival: bytes | None) -> None:
        super().__init__(root)
        self.rival = rival

    def head(self, key: str) -> ObjectInfo | None:
        info = super().head(key)
        return None if info is None else ObjectInfo(key, info.size, None, info.etag)

    def put_bytes(self, key: str, data: bytes, **write: Unpack[WriteOptions]) -> str:
        if not key.endswith("index.json"):
            super().put_bytes(key, data if self.rival is None else self.rival, if_none_match=True)
        return super().put_bytes(key, data, **write)


def test_a_lost_race_for_a_small_object_without_a_digest_compares_its_bytes(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    result = publish(NoDigestStore(tmp_path / "same", rival=None), release.manifest, release.archive_path)
    assert list(result.uploaded) == [release.manifest.keys.archive] and result.index_written
    assert result.sent == Transfer(sent=release.manifest.archive.size)
    with pytest.raises(ConflictError, match="already published with different bytes") as caught:
        publish(NoDigestStore(tmp_path / "other", rival=b"x" * 91), release.manifest, release.archive_path)
    assert "holds 91 bytes with sha256 " + sha256_bytes(b"x" * 91) in caught.value.message


def test_what_a_publish_sent_adds_up_over_its_uploads(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist", sbom=b"{}\n")
    result = publish(LocalStore(tmp_path / "store"), release.manifest, release.archive_path)
    assert result.sent == Transfer(sent=sum(u.size for u in result.plan.uploads), reused=0)
    assert [u.kind for u in result.plan.uploads] == ["archive", "sha256", "sbom", "release"]
    assert list(result.uploaded) == [u.key for u in result.plan.uploads]


def test_the_archive_goes_up_through_the_meter_and_its_last_line_is_shown(tmp_path: Path) -> None:
    from scrollcase.progress import ByteMeter

    release = write_release(tmp_path / "dist", size=20_000)
    lines: list[str] = []
    meters: list[ByteMeter] = []

    def meter(label: str, total: int | None) -> ByteMeter:
        meters.append(ByteMeter(label, total, lines.append, interval=0.0))
        return meters[-1]

    publish(LocalStore(tmp_path / "store"), release.manifest, release.archive_path, meter=meter)
    size = release.manifest.archive.size
    assert [(m.label, m.total, m.done) for m in meters] == [("uploading", size, size)]
    assert len(lines) == 2 and all(line.startswith("uploading: ") for line in lines)  # the bytes, then finish()


def test_small_objects_without_a_digest_are_read_and_hashed_the_archive_is_not(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist", sbom=b"{}\n")
    publish(LocalStore(tmp_path / "store"), release.manifest, release.archive_path)
    state = read_remote_state(NoDigestStore(tmp_path / "store", rival=None), release.manifest)
    archive = state.objects[release.manifest.keys.archive]
    assert archive is not None and (archive.size, archive.sha256) == (release.manifest.archive.size, None)
    small = [state.objects[u.key] for u in plan_publish_uploads(release)[1:]]
    assert [(o.size, o.sha256) if o else None for o in small] == [
        (u.size, u.sha256) for u in plan_publish_uploads(release)[1:]
    ]
    with pytest.raises(ConflictError, match="an unknown sha256"):  # the archive is never downloaded to compare
        publish(NoDigestStore(tmp_path / "store", rival=None), release.manifest, release.archive_path)


def plan_publish_uploads(release: SyntheticRelease) -> tuple[Upload, ...]:
    archive = LocalArchive(
        release.archive_path,
        release.manifest.archive.size,
        release.manifest.archive.sha256,
        box=box_json_for(release.manifest),
    )
    sbom = (release.archive_path.parent / release.manifest.sbom.name).read_bytes() if release.manifest.sbom else None
    return plan_publish(release.manifest, archive, empty(), sbom=sbom).uploads


# --- every comparison refuses a difference whichever way it sorts ------------------------------------------


@pytest.mark.parametrize("rival", ["shorter", "longer", "same size"])
def test_a_lost_race_to_other_bytes_of_any_size_is_a_conflict(tmp_path: Path, rival: str) -> None:
    release = write_release(tmp_path / "dist")
    ours = release.archive_path.read_bytes()
    theirs = {"shorter": ours[:-1], "longer": ours + b"\0", "same size": bytes(len(ours))}[rival]
    with pytest.raises(ConflictError, match="already published with different bytes"):
        publish(RacingStore(tmp_path / "store", rival=theirs), release.manifest, release.archive_path)
    assert not (tmp_path / "store" / release.manifest.keys.release).exists()


def test_a_republish_uploads_nothing_and_says_so(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    store = LocalStore(tmp_path / "store")
    publish(store, release.manifest, release.archive_path)
    lines: list[str] = []
    again = publish(store, release.manifest, release.archive_path, progress=lines.append)
    assert (again.uploaded, again.sent, again.index_written) == ((), Transfer(0), False)
    assert not [line for line in lines if line.startswith("uploading")]


def test_a_new_release_of_a_framed_box_copies_what_the_earlier_one_holds(tmp_path: Path) -> None:
    from tests.support.framedreleases import write_framed_release

    old, new = (write_framed_release(tmp_path, v, payload=30_000, packages=3) for v in ("1.0.0", "1.0.1"))
    store = LocalStore(tmp_path / "store")
    assert publish(store, old.manifest, old.archive_path).sent.reused == 0
    result = publish(store, new.manifest, new.archive_path)
    assert 0 < result.plan.bytes_reused < new.manifest.archive.size
    assert result.sent == Transfer(sent=result.plan.bytes_to_send, reused=result.plan.bytes_reused)
    assert store.path_for(new.manifest.keys.archive).read_bytes() == new.archive_path.read_bytes()


@pytest.mark.parametrize("expected", OTHER_DIGESTS)
def test_an_archive_whose_second_read_is_not_the_checked_one_is_refused(tmp_path: Path, expected: str) -> None:
    path = tmp_path / "a"
    path.write_bytes(DATA)
    step = Upload("archive", "k", len(DATA), expected, "upload", "", pieces=(Piece(0, len(DATA), "old"),))
    with pytest.raises(IntegrityError, match="changed while it was being published"):
        archive_upload(step, LocalArchive(path, len(DATA), expected), lambda _: None)


class NoDigestRacingStore(RacingStore):
    """A rival writes our archive's exact bytes first, and the store (like S3 for a plain PUT) knows no sha256."""

    def head(self, key: str) -> ObjectInfo | None:
        info = super().head(key)
        return None if info is None else ObjectInfo(key, info.size, None, info.etag)


def test_a_lost_archive_race_to_unknown_digest_is_a_conflict_the_archive_is_never_downloaded(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    store = NoDigestRacingStore(tmp_path / "store", rival=release.archive_path.read_bytes())
    with pytest.raises(ConflictError, match="an unknown sha256"):
        publish(store, release.manifest, release.archive_path)


@pytest.mark.parametrize("side", ["below", "above"])
def test_a_lost_race_to_same_sized_bytes_is_a_conflict_whichever_way_their_digest_sorts(
    tmp_path: Path, side: str
) -> None:
    release = write_release(tmp_path / "dist")
    ours = release.manifest.archive.sha256
    size = release.manifest.archive.size
    # unbounded: 256 one-byte fills all sorted below a digest in the top ~0.4% (1 run in ~130 failed)
    rivals = ((n.to_bytes(4, "big") * (size // 4 + 1))[:size] for n in itertools.count())
    theirs = next(r for r in rivals if (sha256_bytes(r) < ours) == (side == "below"))
    with pytest.raises(ConflictError, match="already published with different bytes"):
        publish(RacingStore(tmp_path / "store", rival=theirs), release.manifest, release.archive_path)


def test_a_real_publish_reports_what_it_sent_and_says_its_warnings(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    gone = write_release(tmp_path / "gone", version="0.9.0")
    publish(store, gone.manifest, gone.archive_path)
    store.path_for(gone.manifest.keys.archive).unlink()
    release = write_release(tmp_path / "dist")
    lines: list[str] = []
    result = publish(store, release.manifest, release.archive_path, progress=lines.append)
    assert result.dry_run is False and result.to_json()["bytesSent"] == result.sent.sent > 0
    assert result.bytes_line().startswith(f"sent {result.sent.sent} bytes")
    assert [line for line in lines if line.startswith("warning: ")] == [f"warning: {w}" for w in result.plan.warnings]
    assert len(result.plan.warnings) == 1 and "0.9.0" in result.plan.warnings[0]
