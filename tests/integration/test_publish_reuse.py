"""Publishing a release whose frames mostly exist in an earlier release of the same box sends only what is
new (docs/publish.md, "Reusing earlier releases"): 1.0.0, then 1.0.1 with one package changed, to a directory
store and to real S3 servers on 127.0.0.1 (SeaweedFS checks the copied parts' SHA-256; moto reports none, so
publish falls back to sending everything)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scrollcase import cli
from scrollcase.io.digest import sha256_file
from scrollcase.store.index import index_key, parse_index
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import PublishResult, publish
from scrollcase.store.s3 import S3Store
from scrollcase.store.s3rules import composite_checksum
from tests.support.framedreleases import BOX, new_frame_bytes, write_framed_release
from tests.support.refusing_proxy import refusing_part_copies
from tests.support.releases import SyntheticRelease
from tests.support.s3servers import S3Server, drop_bucket, new_bucket, s3_client

PART = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticRelease]:
    work = tmp_path_factory.mktemp("reuse-releases")
    return {v: write_framed_release(work, v) for v in ("1.0.0", "1.0.1")}


def do_publish(store: Any, release: SyntheticRelease, lines: list[str] | None = None, **kw: Any) -> PublishResult:
    sink = lines.append if lines is not None else (lambda _: None)
    return publish(store, release.manifest, release.archive_path, progress=sink, **kw)


# ------------------------------------------------------------------------------------------ directory


def test_directory_store_copies_the_unchanged_frames(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    store = LocalStore(tmp_path / "store")
    old, new = releases["1.0.0"], releases["1.0.1"]
    assert do_publish(store, old).sent.reused == 0
    dry = do_publish(store, new, dry_run=True)
    changed = new_frame_bytes(old, new)
    step = dry.plan.uploads[0]
    assert (step.bytes_to_send, step.bytes_reused) == (changed, new.manifest.archive.size - changed)
    small = sum(u.size for u in dry.plan.uploads[1:])  # sidecar and manifest
    result = do_publish(store, new)
    assert (result.sent.sent, result.sent.reused) == (changed + small, dry.plan.bytes_reused)
    assert changed < new.manifest.archive.size // 100  # box.json and pkg0: the rest was copied
    published = store.path_for(new.manifest.keys.archive)
    assert published.read_bytes() == new.archive_path.read_bytes()
    out = result.to_json()
    assert (out["bytesSent"], out["bytesReused"]) == (changed + small, new.manifest.archive.size - changed)
    assert out["uploads"][0]["reusedFrom"] == [{"key": old.manifest.keys.archive, "bytes": out["bytesReused"]}]


def test_corrupt_earlier_archive_is_not_copied(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    """A byte of 1.0.0's archive in the store rots (same size): the assembled archive's sha256 is not the
    checked one, so it is never made visible; the whole archive is copied from the local file instead."""
    store = LocalStore(tmp_path / "store")
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(store, old)
    stored = store.path_for(old.manifest.keys.archive)
    data = bytearray(stored.read_bytes())
    data[-2_000_000] ^= 0xFF  # inside a package frame both releases share
    stored.write_bytes(bytes(data))
    lines: list[str] = []
    result = do_publish(store, new, lines)
    assert result.sent.reused == 0
    assert any("do not give the checked archive" in line and "copying the whole archive" in line for line in lines)
    assert sha256_file(store.path_for(new.manifest.keys.archive))[0] == new.manifest.archive.sha256


def test_missing_earlier_archive_means_a_full_copy(tmp_path: Path, releases: dict[str, SyntheticRelease]) -> None:
    store = LocalStore(tmp_path / "store")
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(store, old)
    store.path_for(old.manifest.keys.archive).unlink()
    result = do_publish(store, new)
    assert any("files are missing from the store" in w for w in result.plan.warnings)
    assert result.sent.reused == 0 and result.plan.uploads[0].bytes_to_send == new.manifest.archive.size
    assert store.path_for(new.manifest.keys.archive).read_bytes() == new.archive_path.read_bytes()


def test_earlier_manifest_the_index_does_not_vouch_for_is_not_used(
    tmp_path: Path, releases: dict[str, SyntheticRelease]
) -> None:
    store = LocalStore(tmp_path / "store")
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(store, old)
    manifest = store.path_for(old.manifest.keys.release)
    manifest.write_bytes(manifest.read_bytes().replace(b'"sourceRevision"', b'"sourceRevision" ', 1))
    result = do_publish(store, new)
    assert any("not reusing the frames of reuse-box 1.0.0" in w for w in result.plan.warnings)
    assert result.sent.reused == 0


def test_cli_reports_bytes_sent_and_reused(
    tmp_path: Path,
    releases: dict[str, SyntheticRelease],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SCROLLCASE_STORE", raising=False)
    store = str(tmp_path / "store")
    old, new = releases["1.0.0"], releases["1.0.1"]
    assert cli.main(["publish", str(old.manifest_path), "--to", store]) == 0
    capsys.readouterr()
    assert cli.main(["publish", str(new.manifest_path), "--to", store, "--dry-run"]) == 0
    text = capsys.readouterr().out
    changed = new_frame_bytes(old, new)
    small = sum(len(p.read_bytes()) for p in [new.manifest_path]) + len(f"{'0' * 64}  {new.manifest.archive.name}\n")
    assert f"would send {changed + small} bytes, would reuse {new.manifest.archive.size - changed} bytes" in text
    assert f"{changed} to send" in text
    assert cli.main(["publish", "--json", str(new.manifest_path), "--to", store]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bytesReused"] == new.manifest.archive.size - changed
    assert out["bytesSent"] == changed + sum(u["size"] for u in out["uploads"][1:])  # + sidecar and manifest


# ------------------------------------------------------------------------------------------ S3


@dataclass
class PartTraffic:
    """The parts the client sent: body bytes of UploadPart, count of UploadPartCopy (a botocore hook)."""

    uploaded: int = 0
    copies: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self, request: Any, event_name: str = "", **_: Any) -> None:
        with self.lock:
            if event_name.endswith(".UploadPart"):
                self.uploaded += int(request.headers.get("Content-Length") or 0)
            elif event_name.endswith(".UploadPartCopy"):
                self.copies += 1


# Every SeaweedFS bucket takes volumes of its own and the session's server has a fixed number: the tests
# here share one bucket per server, each under its own prefix ("bucket/prefix" below).
@pytest.fixture(scope="module")
def shared_weed_bucket(weed: S3Server) -> Iterator[str]:
    name = new_bucket(weed)
    yield name
    drop_bucket(weed, name)


@pytest.fixture
def weed_bucket(shared_weed_bucket: str) -> str:
    return f"{shared_weed_bucket}/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def moto_bucket(moto_s3: S3Server) -> str:
    return f"{new_bucket(moto_s3)}/releases"


def bucket_of(spot: str) -> str:
    return spot.partition("/")[0]


def key_in(spot: str, key: str) -> str:
    return f"{spot.partition('/')[2]}/{key}"


def s3_store(server: S3Server, spot: str, traffic: PartTraffic | None = None, endpoint: str | None = None) -> S3Store:
    client = s3_client(server, endpoint=endpoint)
    if traffic is not None:
        client.meta.events.register("before-send.s3", traffic.hook)
    bucket, _, prefix = spot.partition("/")
    return S3Store(client, bucket, prefix, endpoint_url=endpoint or server.endpoint, part_size=PART, workers=4)


def stored(server: S3Server, spot: str, key: str) -> bytes:
    return bytes(s3_client(server).get_object(Bucket=bucket_of(spot), Key=key_in(spot, key))["Body"].read())


def test_seaweedfs_copies_the_unchanged_runs_and_checks_them(
    weed: S3Server, weed_bucket: str, releases: dict[str, SyntheticRelease]
) -> None:
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(s3_store(weed, weed_bucket), old)
    traffic = PartTraffic()
    lines: list[str] = []
    dry = do_publish(s3_store(weed, weed_bucket), new, dry_run=True)
    result = do_publish(s3_store(weed, weed_bucket, traffic), new, lines)
    size = new.manifest.archive.size
    # The changed frames sit in the first part, which S3 wants at least 5 MiB: that much is sent.
    assert result.sent.sent == dry.plan.bytes_to_send == traffic.uploaded + sum(u.size for u in result.plan.uploads[1:])
    assert traffic.uploaded == PART and traffic.copies >= 1
    assert result.sent.reused == size - PART
    assert not any("instead" in line for line in lines), lines
    assert stored(weed, weed_bucket, new.manifest.keys.archive) == new.archive_path.read_bytes()
    head = s3_client(weed).head_object(
        Bucket=bucket_of(weed_bucket), Key=key_in(weed_bucket, new.manifest.keys.archive), ChecksumMode="ENABLED"
    )
    assert head["Metadata"]["scrollcase-sha256"] == new.manifest.archive.sha256
    # The server's composite checksum, over the parts it holds, is the one of the local parts (what
    # publish checks after CompleteMultipartUpload).
    data = new.archive_path.read_bytes()
    parts = [
        base64.b64encode(hashlib.sha256(data[p.start : p.end]).digest()).decode() for p in result.plan.uploads[0].pieces
    ]
    assert head["ChecksumSHA256"] == composite_checksum(parts)
    assert s3_client(weed).list_multipart_uploads(Bucket=bucket_of(weed_bucket)).get("Uploads", []) == []
    index = parse_index(stored(weed, weed_bucket, index_key(BOX)), "index.json")
    assert sorted(index.versions) == ["1.0.0", "1.0.1"]


def test_seaweedfs_corrupt_earlier_archive_is_sent_instead(
    weed: S3Server, weed_bucket: str, releases: dict[str, SyntheticRelease]
) -> None:
    """1.0.0's archive object is replaced behind the store's back by bytes of the same size (and the same
    metadata): every copied part's server-side SHA-256 then differs from the local part's, so each is sent."""
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(s3_store(weed, weed_bucket), old)
    client, key = s3_client(weed), key_in(weed_bucket, old.manifest.keys.archive)
    data = bytearray(old.archive_path.read_bytes())
    for at in range(PART, len(data), PART // 2):
        data[at] ^= 0xFF
    client.delete_object(Bucket=bucket_of(weed_bucket), Key=key)
    client.put_object(
        Bucket=bucket_of(weed_bucket), Key=key, Body=bytes(data), Metadata={"scrollcase-sha256": "0" * 64}
    )
    traffic = PartTraffic()
    lines: list[str] = []
    result = do_publish(s3_store(weed, weed_bucket, traffic), new, lines)
    assert any("differ from the frames its manifest lists" in line for line in lines), lines
    assert traffic.uploaded == new.manifest.archive.size and result.sent.reused == 0
    assert stored(weed, weed_bucket, new.manifest.keys.archive) == new.archive_path.read_bytes()


def test_seaweedfs_runs_too_short_for_parts_are_uploaded(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    """Three packages rewritten between the releases leave no unchanged run of 5 MiB: the runs between them
    are sent; only the archive's tail (after the last rewritten package) may be copied, as the last part."""
    old = write_framed_release(tmp_path, "1.0.0", payload=1_000_000, packages=10)
    new = write_framed_release(tmp_path, "1.0.1", payload=1_000_000, packages=10, rewritten=(3, 6, 9))
    do_publish(s3_store(weed, weed_bucket), old)
    traffic = PartTraffic()
    result = do_publish(s3_store(weed, weed_bucket, traffic), new)
    pieces = result.plan.uploads[0].pieces
    assert [p.copied for p in pieces] == [False, True] and pieces[1].size < 100_000
    assert traffic.copies == 1 and result.sent.reused == pieces[1].size
    assert traffic.uploaded == new.manifest.archive.size - pieces[1].size
    assert stored(weed, weed_bucket, new.manifest.keys.archive) == new.archive_path.read_bytes()


def test_moto_reports_no_copy_checksum_so_everything_is_sent(
    moto_s3: S3Server, moto_bucket: str, releases: dict[str, SyntheticRelease]
) -> None:
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(s3_store(moto_s3, moto_bucket), old)
    traffic = PartTraffic()
    lines: list[str] = []
    store = s3_store(moto_s3, moto_bucket, traffic)
    result = do_publish(store, new, lines)
    assert any(
        "reports no SHA-256 of a copied part" in line and "uploading the whole archive" in line for line in lines
    )
    assert not store.verified_copies
    assert traffic.uploaded == new.manifest.archive.size and result.sent.reused == 0
    assert stored(moto_s3, moto_bucket, new.manifest.keys.archive) == new.archive_path.read_bytes()


def test_a_server_refusing_part_copies_gets_the_whole_archive(
    weed: S3Server, weed_bucket: str, releases: dict[str, SyntheticRelease]
) -> None:
    old, new = releases["1.0.0"], releases["1.0.1"]
    do_publish(s3_store(weed, weed_bucket), old)
    with refusing_part_copies(weed.port) as (endpoint, refused):
        store = s3_store(weed, weed_bucket, endpoint=endpoint)
        lines: list[str] = []
        result = do_publish(store, new, lines)
    assert refused and not store.verified_copies
    assert any("does not support UploadPartCopy" in line for line in lines), lines
    assert result.sent.reused == 0
    assert stored(weed, weed_bucket, new.manifest.keys.archive) == new.archive_path.read_bytes()
