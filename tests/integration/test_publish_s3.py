"""Publishing to real S3 API servers on 127.0.0.1: SeaweedFS (verifies checksums, honours conditional
writes) and moto (lighter; proves nothing about integrity)."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.format.release import dump_release
from scrollcase.store.base import FileUpload, Transfer
from scrollcase.store.index import index_key, parse_index
from scrollcase.store.publish import PublishResult, measure_archive, publish
from scrollcase.store.s3 import S3Store
from tests.support.refusing_proxy import refusing_conditional_writes
from tests.support.releases import SyntheticRelease, write_release
from tests.support.s3servers import S3Server, free_port, new_bucket, s3_client, seaweedfs

PART = 5 * 1024 * 1024
MULTIPART_SIZE = 2 * PART + 12345  # three parts


@dataclass
class Traffic:
    """Bytes and operations the client actually sent, counted by a botocore event hook."""

    sent: int = 0
    operations: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self, request: Any, event_name: str = "", **_: Any) -> None:
        with self.lock:
            self.operations.append(f"{request.method} {event_name.rsplit('.', 1)[-1]}")
            if request.method in ("PUT", "POST"):
                self.sent += int(request.headers.get("Content-Length") or 0)

    @property
    def writes(self) -> list[str]:
        return [op for op in self.operations if op.startswith(("PUT", "POST"))]


def make_store(
    server: S3Server,
    bucket: str,
    *,
    prefix: str = "releases",
    traffic: Traffic | None = None,
    secret: str | None = None,
    endpoint: str | None = None,
) -> S3Store:
    client = s3_client(server, secret=secret, endpoint=endpoint)
    if traffic is not None:
        client.meta.events.register("before-send.s3", traffic.hook)
    return S3Store(client, bucket, prefix, endpoint_url=endpoint or server.endpoint, part_size=PART, workers=4)


def keys_in(server: S3Server, bucket: str) -> list[str]:
    listing = s3_client(server).list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def get(server: S3Server, bucket: str, key: str) -> bytes:
    return bytes(s3_client(server).get_object(Bucket=bucket, Key=key)["Body"].read())


def do_publish(store: S3Store, release: SyntheticRelease, **kwargs: Any) -> Any:
    return publish(store, release.manifest, release.archive_path, **kwargs)


def test_publish_uploads_everything_with_verified_checksums(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    traffic = Traffic()
    result = do_publish(make_store(weed, weed_bucket, traffic=traffic), release)

    keys = release.manifest.keys
    assert list(result.uploaded) == [keys.archive, keys.sha256, keys.release]
    assert result.index_written
    expected = (keys.archive, keys.sha256, keys.release, index_key("demo-box"))
    assert keys_in(weed, weed_bucket) == sorted(f"releases/{k}" for k in expected)
    assert get(weed, weed_bucket, f"releases/{keys.archive}") == release.archive_path.read_bytes()
    assert get(weed, weed_bucket, f"releases/{keys.release}") == dump_release(release.manifest)
    sidecar = get(weed, weed_bucket, f"releases/{keys.sha256}").decode()
    assert sidecar == f"{release.manifest.archive.sha256}  {release.manifest.archive.name}\n"
    # Three parts, each sent with a SHA-256 the server checked; the object keeps the composite checksum.
    assert traffic.writes.count("PUT UploadPart") == 3
    head = s3_client(weed).head_object(Bucket=weed_bucket, Key=f"releases/{keys.archive}", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"].endswith("-3")
    assert head["Metadata"]["scrollcase-sha256"] == release.manifest.archive.sha256
    index = parse_index(get(weed, weed_bucket, "releases/boxes/demo-box/index.json"), "index.json")
    entry = index.versions["1.0.0"]["linux-x86_64-cuda12.4"]
    assert (entry.sha256, entry.size, entry.minNvidiaDriverVersion) == (
        release.manifest.archive.sha256,
        release.manifest.archive.size,
        "550.54",
    )
    # The archive went up before the manifest.
    order = [op for op in traffic.writes if op != "PUT UploadPart"]
    assert order.index("POST CompleteMultipartUpload") < order.index("PUT PutObject")


def test_parts_carry_the_checked_sha256_and_no_payload_signature(
    weed: S3Server, weed_bucket: str, tmp_path: Path
) -> None:
    """Each part's checksum header is the SHA-256 of exactly its bytes (computed in the pre-upload
    check's read), and the payload is not hashed again for a signature: the checksum header is
    signed, and the server verifies the body against it."""
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    seen: list[tuple[str, str, str]] = []

    def record(request: Any, **_: Any) -> None:
        stream = request.body  # botocore wraps a bytes body in a seekable stream
        position = stream.tell()
        body = stream.read()
        stream.seek(position)
        seen.append(
            (
                request.headers["x-amz-checksum-sha256"].decode(),
                request.headers["X-Amz-Content-SHA256"].decode(),
                base64.b64encode(hashlib.sha256(body).digest()).decode(),
            )
        )

    store = make_store(weed, weed_bucket)
    store.client.meta.events.register("before-send.s3.UploadPart", record)
    do_publish(store, release)
    assert len(seen) == 3
    assert all(sent == actual and signature == "UNSIGNED-PAYLOAD" for sent, signature, actual in seen)


def test_bytes_changed_after_the_check_are_refused_by_the_server(
    weed: S3Server, weed_bucket: str, tmp_path: Path
) -> None:
    """The archive changes after it matched the manifest, keeping its size and mtime (so no local
    fingerprint can notice): the server refuses the part whose bytes differ from what was checked,
    and nothing is published."""
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    store = make_store(weed, weed_bucket)
    checked = measure_archive(release.archive_path, store)
    assert len(checked.part_sha256) == 3
    before = release.archive_path.stat()
    data = bytearray(release.archive_path.read_bytes())
    data[PART + 7] ^= 0xFF  # inside part 2
    release.archive_path.write_bytes(bytes(data))
    os.utime(release.archive_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(IntegrityError, match="checksum does not match") as caught:
        store.put_file(
            release.manifest.keys.archive,
            FileUpload(release.archive_path, checked.size, checked.sha256, checked.part_sha256),
        )
    assert "changed after it was checked" in caught.value.render()
    assert keys_in(weed, weed_bucket) == []
    assert s3_client(weed).list_multipart_uploads(Bucket=weed_bucket).get("Uploads", []) == []


def test_republish_identical_bytes_sends_nothing(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    do_publish(make_store(weed, weed_bucket), release)
    traffic = Traffic()
    result = do_publish(make_store(weed, weed_bucket, traffic=traffic), release)
    assert result.uploaded == () and not result.index_written
    assert traffic.sent == 0, "a republish must upload zero bytes"
    assert traffic.writes == []
    assert all(u.action == "skip" for u in result.plan.uploads)


def test_conflicting_republish_is_refused_and_changes_nothing(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    original = write_release(tmp_path / "a", size=4096)
    do_publish(make_store(weed, weed_bucket), original)
    rebuilt = write_release(tmp_path / "b", size=4096)  # same box/version/target, other bytes
    traffic = Traffic()
    with pytest.raises(ConflictError) as caught:
        do_publish(make_store(weed, weed_bucket, traffic=traffic), rebuilt)
    assert "release demo-box 1.0.0 linux-x86_64-cuda12.4 is already published" in caught.value.render()
    assert caught.value.exit_code == 10
    assert traffic.sent == 0
    key = f"releases/{original.manifest.keys.archive}"
    assert get(weed, weed_bucket, key) == original.archive_path.read_bytes()


def test_server_refuses_overwrite_even_when_the_plan_raced(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    """If-None-Match on CompleteMultipartUpload: a key created after our HEAD is never overwritten."""
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    store = make_store(weed, weed_bucket)
    store.put_bytes(release.manifest.keys.archive, b"someone else", if_none_match=True)
    with pytest.raises(ConflictError):
        store.put_file(
            release.manifest.keys.archive,
            FileUpload(release.archive_path, MULTIPART_SIZE, release.manifest.archive.sha256),
        )
    assert get(weed, weed_bucket, f"releases/{release.manifest.keys.archive}") == b"someone else"
    uploads = s3_client(weed).list_multipart_uploads(Bucket=weed_bucket).get("Uploads", [])
    assert uploads == [], "the refused multipart upload must be aborted"


def test_tampered_archive_is_refused_before_any_upload(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    release = write_release(tmp_path, size=4096)
    data = bytearray(release.archive_path.read_bytes())
    data[100] ^= 0xFF
    release.archive_path.write_bytes(bytes(data))
    traffic = Traffic()
    with pytest.raises(IntegrityError) as caught:
        do_publish(make_store(weed, weed_bucket, traffic=traffic), release)
    assert caught.value.exit_code == 8
    assert traffic.operations == [] and keys_in(weed, weed_bucket) == []


def test_dry_run_writes_nothing(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    release = write_release(tmp_path, size=4096)
    traffic = Traffic()
    result = do_publish(make_store(weed, weed_bucket, traffic=traffic), release, dry_run=True)
    assert result.dry_run and [u.action for u in result.plan.uploads] == ["upload"] * 3
    assert result.plan.index_action == "update"
    assert traffic.writes == [] and keys_in(weed, weed_bucket) == []


def test_concurrent_publishers_of_the_same_release(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    """docs/publish.md Guarantee 5: "Two publishers of the same release both succeed: one writes, the
    other finds identical bytes." Exactly one of them wrote the archive (If-None-Match fences the other)."""
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        store = make_store(weed, weed_bucket)
        barrier.wait()
        try:
            outcomes.append(do_publish(store, release))
        except Exception as exc:  # recorded, so the assertion below names it
            outcomes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [type(o).__name__ for o in outcomes] == ["PublishResult", "PublishResult"], outcomes
    keys = release.manifest.keys
    # One upload, or two when both multipart uploads complete before either sees the other (SeaweedFS does not
    # always refuse the second identical CompleteMultipartUpload): same bytes either way, never a conflict.
    assert sum(keys.archive in o.uploaded for o in outcomes if isinstance(o, PublishResult)) in (1, 2)
    assert get(weed, weed_bucket, f"releases/{keys.archive}") == release.archive_path.read_bytes()
    assert get(weed, weed_bucket, f"releases/{keys.release}") == dump_release(release.manifest)
    index = parse_index(get(weed, weed_bucket, "releases/boxes/demo-box/index.json"), "index.json")
    assert list(index.versions["1.0.0"]) == ["linux-x86_64-cuda12.4"]


def test_lost_archive_race_to_identical_bytes_succeeds(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    """The same race made certain: a rival completes the identical archive after our HEAD, so our
    CompleteMultipartUpload gets 412; publish finds the same size and sha256 and completes the release."""
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    rival = make_store(weed, weed_bucket)

    class LosingStore(S3Store):
        def put_file(self, key: str, upload: FileUpload) -> Transfer:
            rival.put_file(key, upload)
            return super().put_file(key, upload)

    store = LosingStore(s3_client(weed), weed_bucket, "releases", endpoint_url=weed.endpoint, part_size=PART, workers=4)
    result = do_publish(store, release)
    keys = release.manifest.keys
    assert list(result.uploaded) == [keys.sha256, keys.release]
    assert get(weed, weed_bucket, f"releases/{keys.release}") == dump_release(release.manifest)
    assert s3_client(weed).list_multipart_uploads(Bucket=weed_bucket).get("Uploads", []) == []


def test_concurrent_publishers_of_different_targets_share_the_index(
    weed: S3Server, weed_bucket: str, tmp_path: Path
) -> None:
    releases = [
        write_release(tmp_path / "cpu", cuda=None),
        write_release(tmp_path / "cu124", cuda="12.4"),
        write_release(tmp_path / "cu128", cuda="12.8"),
        write_release(tmp_path / "v2", cuda="12.4", version="2.0.0"),
    ]
    barrier = threading.Barrier(len(releases))
    errors: list[BaseException] = []

    def run(release: SyntheticRelease) -> None:
        store = make_store(weed, weed_bucket)
        barrier.wait()
        try:
            do_publish(store, release)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in releases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    index = parse_index(get(weed, weed_bucket, "releases/boxes/demo-box/index.json"), "index.json")
    assert sorted(index.versions["1.0.0"]) == ["linux-x86_64-cpu", "linux-x86_64-cuda12.4", "linux-x86_64-cuda12.8"]
    assert list(index.versions["2.0.0"]) == ["linux-x86_64-cuda12.4"]


def test_wrong_credentials_are_a_clear_store_error(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    release = write_release(tmp_path)
    with pytest.raises(StoreError) as caught:
        do_publish(make_store(weed, weed_bucket, secret="not-the-secret"), release)
    text = caught.value.render()
    assert "access denied" in text and "AWS_ACCESS_KEY_ID" in text
    assert caught.value.exit_code == 9


def test_missing_bucket_is_a_clear_store_error(weed: S3Server, tmp_path: Path) -> None:
    with pytest.raises(StoreError) as caught:
        do_publish(make_store(weed, "no-such-bucket"), write_release(tmp_path))
    assert "bucket 'no-such-bucket' does not exist" in caught.value.render()
    assert "aws s3 mb s3://no-such-bucket" in caught.value.render()


def test_dead_endpoint_is_a_clear_store_error(weed: S3Server, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreError) as caught:
        do_publish(make_store(weed, "bucket", endpoint=dead), write_release(tmp_path))
    text = caught.value.render()
    assert f"cannot reach the S3 endpoint {dead}" in text and "--endpoint-url" in text


def test_moto_publish_and_republish(moto_s3: S3Server, moto_bucket: str, tmp_path: Path) -> None:
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    first = do_publish(make_store(moto_s3, moto_bucket), release)
    assert len(first.uploaded) == 3
    traffic = Traffic()
    again = do_publish(make_store(moto_s3, moto_bucket, traffic=traffic), release)
    assert again.uploaded == () and traffic.sent == 0


def test_store_without_conditional_writes_falls_back_to_head_compare(moto_s3: S3Server, tmp_path: Path) -> None:
    bucket = new_bucket(moto_s3)
    release = write_release(tmp_path, size=MULTIPART_SIZE)
    with refusing_conditional_writes(moto_s3.port) as (endpoint, refused):
        store = make_store(moto_s3, bucket, endpoint=endpoint)
        result = do_publish(store, release)
        assert refused, "the proxy must have refused a conditional write"
        assert not store.conditional_writes, "501 NotImplemented must switch to the fallback"
        assert len(result.uploaded) == 3 and result.index_written
        # The fallback still refuses to overwrite different bytes...
        with pytest.raises(ConflictError):
            store.put_bytes(release.manifest.keys.release, b"other", if_none_match=True)
        # ...and a republish is still a no-op.
        assert do_publish(make_store(moto_s3, bucket, endpoint=endpoint), release).uploaded == ()
    archive = get(moto_s3, bucket, f"releases/{release.manifest.keys.archive}")
    assert archive == release.archive_path.read_bytes()


@pytest.mark.slow
def test_server_killed_mid_upload_then_rerun_completes(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist", size=4 * PART)
    keys = release.manifest.keys
    with seaweedfs() as server:
        bucket = new_bucket(server)
        store = make_store(server, bucket)
        parts_sent = 0

        def kill_after_two_parts(event_name: str = "", **_: Any) -> None:
            nonlocal parts_sent
            if event_name.endswith(".UploadPart"):
                parts_sent += 1
                if parts_sent == 2:
                    server.kill()

        store.client.meta.events.register("before-send.s3", kill_after_two_parts)
        with pytest.raises(StoreError, match=r"cannot reach|failed"):
            do_publish(store, release)
        server.restart()
        # In between: no manifest (and no archive) is visible to readers.
        assert keys_in(server, bucket) == []
        result = do_publish(make_store(server, bucket), release)
        assert list(result.uploaded) == [keys.archive, keys.sha256, keys.release]
        data = get(server, bucket, f"releases/{keys.archive}")
        assert hashlib.sha256(data).hexdigest() == release.manifest.archive.sha256
        head = s3_client(server).head_object(Bucket=bucket, Key=f"releases/{keys.archive}")
        assert head["ContentLength"] == release.manifest.archive.size


def test_checksum_header_is_what_the_server_checks(weed: S3Server, weed_bucket: str) -> None:
    """Sanity for the claim in docs/publish.md: SeaweedFS rejects a body whose SHA-256 does not match."""
    client = s3_client(weed)
    wrong = base64.b64encode(hashlib.sha256(b"a").digest()).decode()
    with pytest.raises(Exception, match="BadDigest"):
        client.put_object(Bucket=weed_bucket, Key="x", Body=b"b", ChecksumSHA256=wrong)
