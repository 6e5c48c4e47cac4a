"""S3Store against a real S3 API on 127.0.0.1: moto's server in a thread of this process, behind the proxy of
tests/support/s3proxy.py where a test needs what moto does not do (verify checksums, report a copied part's SHA-256)
or an answer of another server (an error code, a 501, a dropped connection).  Real boto3 clients throughout."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.s3 import models as moto_models
from moto.server import ThreadedMotoServer

from scrollcase.errors import ConflictError, IntegrityError, StoreError, UsageError
from scrollcase.store.base import SHA256_METADATA, FileUpload, ObjectInfo, Piece, RangeNotSupportedError, Transfer
from scrollcase.store.s3 import S3Store
from scrollcase.store.s3rules import (
    MIN_PART_SIZE,
    b64_sha256_to_hex,
    check_endpoint_url,
    client_config,
    composite_checksum,
    effective_part_size,
    parse_s3_url,
    plan_parts,
)
from tests.support.s3proxy import Exchange, Reply, S3Proxy, s3_error, s3_proxy

PART = MIN_PART_SIZE  # S3's smallest part but the last: what plan_parts cuts
SMALL = 1000  # the test stores' part size: a file above it goes up in parts (moto takes parts of any size)
KEY = "boxes/demo/1.0.0/demo.tar.zst"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)  # the servers are on 127.0.0.1


@pytest.fixture(scope="module")
def moto_port() -> Iterator[int]:
    """moto's S3 server, set (as moto's S3_UPLOAD_PART_MIN_SIZE setting allows) to take parts of any size: the
    tests' multipart uploads are kilobytes, not S3's 5 MiB a part."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    with pytest.MonkeyPatch.context() as settings:
        settings.setattr(moto_models, "S3_UPLOAD_PART_MIN_SIZE", 1)
        server.start()
        try:
            yield int(server.get_host_and_port()[1])
        finally:
            server.stop()


@pytest.fixture
def proxy(moto_port: int) -> Iterator[S3Proxy]:
    with s3_proxy(moto_port) as running:
        yield running


def raw_client(endpoint: str, **config: Any) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=client_config(attempts=1, connect_timeout=2, read_timeout=10, **config),
    )


@pytest.fixture
def moto(moto_port: int) -> Any:
    """A client straight to moto (past the proxy): what is really stored."""
    return raw_client(f"http://127.0.0.1:{moto_port}")


@pytest.fixture
def bucket(moto: Any) -> str:
    name = f"bucket-{uuid.uuid4().hex[:12]}"
    moto.create_bucket(Bucket=name)
    return name


def make_store(proxy: S3Proxy, bucket: str, *, workers: int = 2, named: bool = True, part_size: int = SMALL) -> S3Store:
    endpoint = proxy.endpoint if named else None
    return S3Store(
        raw_client(proxy.endpoint), bucket, "/releases/", endpoint_url=endpoint, part_size=part_size, workers=workers
    )


def b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def hexsha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored(moto: Any, bucket: str, key: str = KEY) -> bytes:
    return bytes(moto.get_object(Bucket=bucket, Key=f"releases/{key}")["Body"].read())


def keys_in(moto: Any, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in moto.list_objects_v2(Bucket=bucket).get("Contents", []))


def open_uploads(moto: Any, bucket: str) -> list[Any]:
    return list(moto.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def requests_with(proxy: S3Proxy, header: str) -> list[str]:
    return [f"{e.command} {e.path}" for e in proxy.state.seen if e.headers.get(header) is not None]


def archive(tmp_path: Path, size: int, seed: int = 0) -> tuple[Path, bytes]:
    data = hashlib.shake_256(f"archive {seed}".encode()).digest(size)
    path = tmp_path / f"archive-{seed}.tar.zst"
    path.write_bytes(data)
    return path, data


@dataclass
class Seen:
    """What put_file told its callbacks."""

    progress: list[int] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def upload(self, path: Path, data: bytes, **fields: Any) -> FileUpload:
        return FileUpload(
            path, len(data), hexsha(data), progress=self.progress.append, notice=self.notices.append, **fields
        )


# ---------------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("value", ["ftp://host", "http://", "http://host:0", "http://host:99999", "host:9000", " "])
def test_an_endpoint_that_is_not_a_url_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_endpoint_url(value, {})
    assert caught.value.message == f"--endpoint-url {value!r} is not an endpoint URL"
    assert [(p.key, p.value) for p in caught.value.problems] == [("--endpoint-url", repr(value))]


def test_endpoint_urls_from_the_option_or_the_environment() -> None:
    for good in ("http://127.0.0.1:9000", " https://minio.internal ", "https://s3.example/path"):
        check_endpoint_url(good, {"AWS_ENDPOINT_URL_S3": "bad"})  # the option wins over the environment
    check_endpoint_url(None, {})
    check_endpoint_url(None, {"AWS_ENDPOINT_URL_S3": "http://ok:1", "AWS_ENDPOINT_URL": "bad"})  # botocore's order
    for env, name in (
        ({"AWS_ENDPOINT_URL_S3": "bad", "AWS_ENDPOINT_URL": "http://ok:1"}, "$AWS_ENDPOINT_URL_S3"),
        ({"AWS_ENDPOINT_URL_S3": "", "AWS_ENDPOINT_URL": "bad"}, "$AWS_ENDPOINT_URL"),
    ):
        with pytest.raises(UsageError) as caught:
            check_endpoint_url(None, env)
        assert caught.value.message == f"{name} 'bad' is not an endpoint URL"


def test_an_s3_url_names_a_bucket_and_a_prefix() -> None:
    assert parse_s3_url("s3://bucket//a/b//") == ("bucket", "a/b")
    for bad in ("https://bucket/a", "bucket/a", "s3://"):
        with pytest.raises(UsageError) as caught:
            parse_s3_url(bad)
        assert caught.value.message == f"{bad!r} is not an S3 URL"


def test_a_default_store_sends_up_to_16_mib_whole_in_6_threads() -> None:
    store = S3Store(raw_client("http://127.0.0.1:1"), "bucket")
    assert (store.workers, store.checksum_part_size(16 * 1024 * 1024), store.checksum_part_size(1)) == (6, None, None)
    assert store.checksum_part_size(16 * 1024 * 1024 + 1) == 16 * 1024 * 1024
    assert (store.conditional_writes, store.verified_copies, store.endpoint_url) == (True, True, None)


def test_parts_grow_so_that_10000_hold_the_file() -> None:
    assert effective_part_size(1, 1) == 5 * 1024 * 1024  # S3's minimum for every part but the last
    assert effective_part_size(10_000 * PART, 1) == PART
    assert effective_part_size(10_000 * PART + 1, 1) == PART + 1
    assert effective_part_size(1, 8 * PART) == 8 * PART


@pytest.mark.parametrize(("size", "part_size"), [(16 << 20, 6 << 20), (100 << 20 | 7, 7 << 20), (PART, PART)])
def test_planned_parts_follow_each_other_to_the_end(size: int, part_size: int) -> None:
    parts = plan_parts(size, part_size)
    assert [n for n, _, _ in parts] == list(range(1, len(parts) + 1))
    assert [offset for _, offset, _ in parts] == [sum(length for _, _, length in parts[:i]) for i in range(len(parts))]
    assert sum(length for _, _, length in parts) == size
    assert all(length == part_size for _, _, length in parts[:-1]) and 0 < parts[-1][2] <= part_size


def test_copied_parts_are_at_most_64_mib() -> None:
    store = S3Store(raw_client("http://127.0.0.1:1"), "bucket", part_size=PART)
    size = 200 * 1024 * 1024
    parts = store.reuse_layout(size, (Piece(0, PART), Piece(PART, size, "old", 0)))
    copied = [p.size for p in parts if p.copied]
    halves = (Piece(0, PART), Piece(PART, 2 * PART, "old", PART))
    assert S3Store(store.client, "bucket", part_size=2 * PART).reuse_layout(2 * PART, halves) == ()  # one PutObject
    assert S3Store(store.client, "bucket", part_size=2 * PART - 1).reuse_layout(2 * PART, halves) == halves
    assert copied[0] == 64 * 1024 * 1024 and len(copied) == 3 and sum(copied) == size - PART


def test_a_checksum_that_is_not_base64_is_no_sha256() -> None:
    assert b64_sha256_to_hex("abc") is None
    assert b64_sha256_to_hex(b64(b"x")) == hexsha(b"x")


def test_the_type_stubs_are_not_needed_at_run_time() -> None:
    """boto3-stubs is a development dependency: the store must import without it."""
    assert "mypy_boto3_s3" not in sys.modules


def test_a_stalled_endpoint_fails_in_3_tries_of_20_s() -> None:
    config = client_config()
    assert (config.connect_timeout, config.read_timeout, config.retries["total_max_attempts"]) == (5.0, 15.0, 3)
    assert config.response_checksum_validation == "when_required"


# ------------------------------------------------------------------------------------------- reads


def test_urls_name_the_bucket_prefix_and_key(proxy: S3Proxy, bucket: str) -> None:
    store = make_store(proxy, bucket)
    assert store.prefix == "releases"
    assert store.url == f"s3://{bucket}/releases"
    assert store.url_for("a/b") == f"s3://{bucket}/releases/a/b"
    bare = S3Store(raw_client(proxy.endpoint), bucket)
    assert (bare.url, bare.url_for("a/b")) == (f"s3://{bucket}", f"s3://{bucket}/a/b")


def test_put_bytes_then_get_head_and_exists(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    store = make_store(proxy, bucket)
    etag = store.put_bytes("index.json", b'{"a": 1}', content_type="application/json")
    blob = store.get_bytes("index.json")
    assert blob is not None and (blob.data, blob.etag) == (b'{"a": 1}', etag)
    assert store.head("index.json") == ObjectInfo("index.json", 8, hexsha(b'{"a": 1}'), etag)
    assert store.exists("index.json")
    raw = moto.head_object(Bucket=bucket, Key="releases/index.json")
    assert raw["ContentType"] == "application/json"
    assert raw["Metadata"] == {SHA256_METADATA: hexsha(b'{"a": 1}')}
    [put] = [e for e in proxy.state.seen if e.command == "PUT"]
    assert put.headers["x-amz-checksum-sha256"] == b64(b'{"a": 1}')
    assert put.headers.get("If-None-Match") is None and put.headers.get("If-Match") is None
    store.put_bytes("plain", b"x")
    assert moto.head_object(Bucket=bucket, Key="releases/plain")["ContentType"] == "application/octet-stream"


def test_a_missing_key_is_none_not_an_error(proxy: S3Proxy, bucket: str) -> None:
    store = make_store(proxy, bucket)
    assert store.head("nope") is None
    assert not store.exists("nope")
    assert store.get_bytes("nope") is None


def test_head_takes_a_full_object_checksum_but_not_a_composite_one(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    """An object written by another tool has no scrollcase-sha256 metadata: the server's SHA-256 stands in,
    unless it is a multipart object's composite checksum (not the sha256 of the bytes)."""
    other = boto3.client(
        "s3",
        endpoint_url=proxy.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    other.put_object(Bucket=bucket, Key="releases/whole", Body=b"whole", ChecksumAlgorithm="SHA256")
    upload = moto.create_multipart_upload(Bucket=bucket, Key="releases/parts", ChecksumAlgorithm="SHA256")["UploadId"]
    part = moto.upload_part(
        Bucket=bucket, Key="releases/parts", UploadId=upload, PartNumber=1, Body=b"p", ChecksumSHA256=b64(b"p")
    )
    moto.complete_multipart_upload(
        Bucket=bucket,
        Key="releases/parts",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"], "ChecksumSHA256": b64(b"p")}]},
    )
    moto.put_object(Bucket=bucket, Key="releases/none", Body=b"none")
    store = make_store(proxy, bucket)
    whole = store.head("whole")
    assert whole is not None and (whole.size, whole.sha256) == (5, hexsha(b"whole"))
    parts = store.head("parts")
    assert parts is not None and (parts.size, parts.sha256) == (1, None)
    assert store.head("none") == ObjectInfo(
        "none", 4, None, moto.head_object(Bucket=bucket, Key="releases/none")["ETag"]
    )


def test_read_from_streams_the_whole_object_or_a_range(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    data = hashlib.shake_256(b"read").digest(3 * 1024 * 1024 + 5)  # more than one chunk
    moto.put_object(Bucket=bucket, Key=f"releases/{KEY}", Body=data)
    store = make_store(proxy, bucket)
    with store.read_from(KEY) as whole:
        assert (whole.offset, whole.total) == (0, len(data))
        assert b"".join(whole.chunks) == data
    assert requests_with(proxy, "Range") == []
    with store.read_from(KEY, 1000) as rest:
        assert (rest.offset, rest.total) == (1000, len(data))
        assert b"".join(rest.chunks) == data[1000:]
    with store.read_from(KEY, 10, 20) as frame:
        assert (frame.offset, frame.total) == (10, len(data))
        assert b"".join(frame.chunks) == data[10:30]
    ranges = [e.headers["Range"] for e in proxy.state.seen if e.headers.get("Range")]
    assert ranges == ["bytes=1000-", "bytes=10-29"]


def test_read_from_a_missing_key_says_so(proxy: S3Proxy, bucket: str) -> None:
    with pytest.raises(StoreError) as caught, make_store(proxy, bucket).read_from("nope"):
        pass
    assert caught.value.message == f"s3://{bucket}/releases/nope does not exist"
    assert "publish the release to this store" in str(caught.value.fix)


def test_a_server_that_ignores_ranges_cannot_resume(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    moto.put_object(Bucket=bucket, Key=f"releases/{KEY}", Body=b"0123456789")
    proxy.state.ignore_range = True
    with pytest.raises(RangeNotSupportedError) as caught, make_store(proxy, bucket).read_from(KEY, 5):
        pass
    assert caught.value.message == f"s3://{bucket}/releases/{KEY}: the server ignored the ranged GET (bytes=5-)"
    assert "honours Range" in str(caught.value.fix)


@pytest.mark.parametrize(
    "content_range",
    ["bytes 0-9/10", "bytes 7-9/10", "bytes 5-9/*", "nonsense"],
    ids=["earlier-start", "later-start", "unknown-total", "unparsable"],
)
def test_a_range_answer_for_other_bytes_is_refused(proxy: S3Proxy, bucket: str, content_range: str) -> None:
    proxy.state.answer = lambda e: Reply(206, b"56789", (("Content-Range", content_range),))
    with pytest.raises(RangeNotSupportedError), make_store(proxy, bucket).read_from(KEY, 5):
        pass


def test_a_download_that_breaks_off_is_a_store_error(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    moto.put_object(Bucket=bucket, Key=f"releases/{KEY}", Body=b"x" * 5000)
    proxy.state.cut_bodies = 1000
    with make_store(proxy, bucket).read_from(KEY) as stream:
        assert stream.total == 5000
        with pytest.raises(StoreError) as caught:
            b"".join(stream.chunks)
    assert caught.value.message.startswith(f"GET s3://{bucket}/releases/{KEY} failed: ")
    assert caught.value.exit_code == 9


# ------------------------------------------------------------------------------------------ writes


def test_if_none_match_refuses_to_overwrite(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    store = make_store(proxy, bucket)
    store.put_bytes("k", b"first", if_none_match=True)
    with pytest.raises(ConflictError) as caught:
        store.put_bytes("k", b"second", if_none_match=True)
    assert caught.value.message == f"s3://{bucket}/releases/k: the write condition failed (PreconditionFailed)"
    assert caught.value.exit_code == 10
    assert stored(moto, bucket, "k") == b"first"
    assert all(e.headers.get("If-None-Match") == "*" for e in proxy.state.seen if e.command == "PUT")
    store.put_bytes("k", b"third")  # no condition: replaced
    assert stored(moto, bucket, "k") == b"third"


def test_if_match_replaces_only_the_version_read(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    store = make_store(proxy, bucket)
    first = store.put_bytes("index.json", b"v1")
    second = store.put_bytes("index.json", b"v2", if_match=first)
    assert second != first
    with pytest.raises(ConflictError):
        store.put_bytes("index.json", b"v3", if_match=first)
    assert stored(moto, bucket, "index.json") == b"v2"
    assert [e.headers.get("If-Match") for e in proxy.state.seen if e.command == "PUT"] == [None, first, first]


def test_if_match_on_a_key_deleted_since_is_a_conflict(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    """AWS (and moto) answer If-Match on a missing key with 404 NoSuchKey: the version read is gone."""
    store = make_store(proxy, bucket)
    etag = store.put_bytes("index.json", b"v1")
    moto.delete_object(Bucket=bucket, Key="releases/index.json")
    with pytest.raises(ConflictError) as caught:
        store.put_bytes("index.json", b"v2", if_match=etag)
    assert caught.value.message == f"s3://{bucket}/releases/index.json: the write condition failed (NoSuchKey)"
    assert keys_in(moto, bucket) == []


def test_a_small_file_is_one_checked_put(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data = archive(tmp_path, SMALL)  # exactly one part's size: still one PutObject
    seen = Seen()
    store = make_store(proxy, bucket)
    proxy.state.verify_checksums = True
    assert store.put_file(KEY, seen.upload(path, data)) == Transfer(sent=SMALL, reused=0)
    assert seen.progress == [SMALL] and seen.notices == []
    assert stored(moto, bucket) == data
    head = moto.head_object(Bucket=bucket, Key=f"releases/{KEY}")
    assert (head["ContentType"], head["Metadata"]) == ("application/zstd", {SHA256_METADATA: hexsha(data)})
    [put] = [e for e in proxy.state.seen if e.command == "PUT"]
    assert (put.headers["x-amz-checksum-sha256"], put.headers["If-None-Match"]) == (b64(data), "*")
    with pytest.raises(ConflictError):
        store.put_file(KEY, FileUpload(path, len(data), hexsha(data)))  # no callbacks: none called


def test_a_small_file_whose_bytes_differ_from_the_checked_sha256_is_refused(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    path, data = archive(tmp_path, 1000)
    proxy.state.verify_checksums = True
    with pytest.raises(IntegrityError) as caught:
        make_store(proxy, bucket).put_file(KEY, FileUpload(path, len(data), hexsha(b"what was checked")))
    where = f"s3://{bucket}/releases/{KEY}"
    assert caught.value.message == f"PUT {where}: the server received bytes whose checksum does not match (BadDigest)"
    assert "changed after it was checked" in str(caught.value.fix)
    assert keys_in(moto, bucket) == []


def test_a_large_file_goes_up_in_checked_parts(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data = archive(tmp_path, 2 * PART + 77)
    seen = Seen()
    store = make_store(proxy, bucket, part_size=PART)
    proxy.state.verify_checksums = True
    assert store.put_file(KEY, seen.upload(path, data)) == Transfer(sent=len(data), reused=0)
    assert sorted(seen.progress) == [77, PART, PART] and seen.notices == []
    assert stored(moto, bucket) == data
    head = raw_client(proxy.endpoint).head_object(Bucket=bucket, Key=f"releases/{KEY}", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == composite_checksum([b64(data[:PART]), b64(data[PART : 2 * PART]), b64(data[-77:])])
    assert (head["ContentType"], head["Metadata"]) == ("application/zstd", {SHA256_METADATA: hexsha(data)})
    info = store.head(KEY)
    assert info is not None and (info.size, info.sha256) == (len(data), hexsha(data))
    parts = sorted(int(e.query["partNumber"][0]) for e in proxy.state.seen if "partNumber" in e.query)
    assert parts == [1, 2, 3]
    [complete] = [e for e in proxy.state.seen if e.command == "POST" and "uploadId" in e.query]
    assert complete.headers["If-None-Match"] == "*"
    assert open_uploads(moto, bucket) == []


def test_parts_carry_the_checked_sha256s_not_fresh_ones(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    """The part digests computed when the archive was checked are sent as they are (a verifying server then
    refuses bytes that changed since); a list that does not match the part plan is not used."""
    path, data = archive(tmp_path, 3 * SMALL)
    halves = (Piece(0, SMALL), Piece(SMALL, 3 * SMALL))
    digests = [hexsha(data[:SMALL]), hexsha(data[SMALL:])]
    proxy.state.verify_checksums = True
    store = make_store(proxy, bucket)
    store.put_file("good", FileUpload(path, len(data), hexsha(data), part_sha256=digests, pieces=halves))
    assert stored(moto, bucket, "good") == data
    unused = FileUpload(path, len(data), hexsha(data), part_sha256=[hexsha(b"wrong")], pieces=halves)
    store.put_file("unused", unused)
    assert stored(moto, bucket, "unused") == data
    too_many = FileUpload(path, len(data), hexsha(data), part_sha256=[hexsha(b"wrong")] * 3, pieces=halves)
    store.put_file("too-many", too_many)
    assert stored(moto, bucket, "too-many") == data
    with pytest.raises(IntegrityError, match=r"UploadPart .*checksum does not match \(BadDigest\)"):
        bad = FileUpload(path, len(data), hexsha(data), part_sha256=[digests[0], hexsha(b"x")], pieces=halves)
        store.put_file("bad", bad)
    assert keys_in(moto, bucket) == ["releases/good", "releases/too-many", "releases/unused"]
    assert open_uploads(moto, bucket) == []


def test_a_plan_of_many_parts_sends_its_checked_digests_too(proxy: S3Proxy, bucket: str, tmp_path: Path) -> None:
    """300 parts (more than the small ints CPython keeps one object of): the digests are still the checked ones."""
    path, data = archive(tmp_path, 3000)
    pieces = tuple(Piece(n, n + 10) for n in range(0, 3000, 10))
    proxy.state.verify_checksums = True
    upload = FileUpload(path, len(data), hexsha(data), part_sha256=[hexsha(b"checked")] * 300, pieces=pieces)
    with pytest.raises(IntegrityError, match="BadDigest"):
        make_store(proxy, bucket, workers=1).put_file(KEY, upload)


def test_a_conflicting_multipart_upload_is_aborted(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data = archive(tmp_path, 3 * SMALL)
    store = make_store(proxy, bucket)
    store.put_bytes(KEY, b"someone else", if_none_match=True)
    with pytest.raises(ConflictError) as caught:
        store.put_file(KEY, FileUpload(path, len(data), hexsha(data)))
    assert caught.value.message.endswith("the write condition failed (PreconditionFailed)")  # no HEAD first
    assert stored(moto, bucket) == b"someone else"
    assert open_uploads(moto, bucket) == []


def test_a_file_that_changes_during_the_upload_is_refused(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    path, data = archive(tmp_path, 3 * SMALL)

    def grow(sent: int) -> None:
        with path.open("ab") as out:
            out.write(b"!")

    store = make_store(proxy, bucket)
    with pytest.raises(IntegrityError) as caught:
        store.put_file(KEY, FileUpload(path, len(data), hexsha(data), progress=grow))
    assert caught.value.message == f"{path} changed while it was being uploaded"
    assert keys_in(moto, bucket) == [] and open_uploads(moto, bucket) == []


def test_a_file_of_another_size_than_checked_is_refused(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data = archive(tmp_path, 3 * SMALL)
    for size in (len(data) - 1, len(data) + 1):
        with pytest.raises(IntegrityError, match="changed while it was being uploaded"):
            make_store(proxy, bucket).put_file(KEY, FileUpload(path, size, hexsha(data)))
    assert keys_in(moto, bucket) == [] and open_uploads(moto, bucket) == []


def test_a_file_rewritten_during_the_upload_is_refused_whatever_its_mtime(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    """Same size, an mtime set back: the fingerprint differs all the same."""
    path, data = archive(tmp_path, 3 * SMALL)
    before = path.stat().st_mtime_ns

    def rewrite(sent: int) -> None:
        path.write_bytes(data[::-1])
        os.utime(path, ns=(before - 10**9, before - 10**9))

    with pytest.raises(IntegrityError, match="changed while it was being uploaded"):
        make_store(proxy, bucket).put_file(KEY, FileUpload(path, len(data), hexsha(data), progress=rewrite))
    assert keys_in(moto, bucket) == [] and open_uploads(moto, bucket) == []


def test_a_failed_part_aborts_the_upload(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data = archive(tmp_path, 3 * SMALL)
    thirds = (Piece(0, SMALL), Piece(SMALL, 2 * SMALL), Piece(2 * SMALL, 3 * SMALL))

    def refuse_part_two(e: Exchange) -> Reply | None:
        return s3_error(403, "AccessDenied", "Access Denied") if e.query.get("partNumber") == ["2"] else None

    proxy.state.answer = refuse_part_two
    with pytest.raises(StoreError) as caught:
        make_store(proxy, bucket).put_file(KEY, FileUpload(path, len(data), hexsha(data), pieces=thirds))
    assert caught.value.message == f"access denied: UploadPart s3://{bucket}/releases/{KEY} (Access Denied)"
    assert "AWS_ACCESS_KEY_ID" in str(caught.value.fix)
    assert keys_in(moto, bucket) == [] and open_uploads(moto, bucket) == []


def test_a_failed_abort_does_not_hide_why_the_upload_failed(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    path, data = archive(tmp_path, 3 * SMALL)

    def refuse(e: Exchange) -> Reply | None:
        if "partNumber" in e.query:
            return s3_error(403, "AccessDenied", "Access Denied")
        return s3_error(500, "InternalError", "abort failed") if e.command == "DELETE" else None

    proxy.state.answer = refuse
    with pytest.raises(StoreError, match=r"^access denied: UploadPart"):
        make_store(proxy, bucket).put_file(KEY, FileUpload(path, len(data), hexsha(data)))


def test_an_upload_the_server_lost_is_a_store_error(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data = archive(tmp_path, 3 * SMALL)
    proxy.state.answer = lambda e: s3_error(404, "NoSuchUpload", "gone") if "partNumber" in e.query else None
    with pytest.raises(StoreError) as caught:
        make_store(proxy, bucket).put_file(KEY, FileUpload(path, len(data), hexsha(data)))
    assert caught.value.message == f"UploadPart s3://{bucket}/releases/{KEY} failed: NoSuchUpload gone"
    assert open_uploads(moto, bucket) == []


# ------------------------------------------------------------------------------------- copied parts

OLD_KEY = "boxes/demo/0.9.0/demo.tar.zst"


def reuse_case(moto: Any, bucket: str, tmp_path: Path) -> tuple[Path, bytes, tuple[Piece, ...]]:
    """An earlier archive whose bytes from 100 on are the new one's from SMALL on: one part sent, one copied."""
    path, data = archive(tmp_path, SMALL + 4096)
    old = b"o" * 100 + data[SMALL:] + b"old tail"
    moto.put_object(Bucket=bucket, Key=f"releases/{OLD_KEY}", Body=old)
    return path, data, (Piece(0, SMALL), Piece(SMALL, len(data), OLD_KEY, 100))


def copies(proxy: S3Proxy) -> list[Exchange]:
    return [e for e in proxy.state.seen if e.is_part_copy]


def test_a_verified_copy_is_kept(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    proxy.state.copy_checksums = True
    seen = Seen()
    store = make_store(proxy, bucket)
    assert store.put_file(KEY, seen.upload(path, data, pieces=pieces)) == Transfer(sent=SMALL, reused=4096)
    assert sorted(seen.progress) == [SMALL, 4096] and seen.notices == []
    assert stored(moto, bucket) == data
    [copy] = copies(proxy)
    assert copy.headers["x-amz-copy-source"] == f"{bucket}/releases/{OLD_KEY}".replace("/", "%2F", 0)
    assert (copy.query["partNumber"], copy.headers["x-amz-copy-source-range"]) == (["2"], "bytes=100-4195")
    assert store.verified_copies and open_uploads(moto, bucket) == []


def test_a_server_that_keeps_no_object_checksum_keeps_the_checked_copy(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    proxy.state.copy_checksums, proxy.state.head_checksums = True, False
    upload = FileUpload(path, len(data), hexsha(data), pieces=pieces)
    assert make_store(proxy, bucket).put_file(KEY, upload) == Transfer(sent=SMALL, reused=4096)
    assert stored(moto, bucket) == data


def test_known_part_digests_spare_reading_a_copied_piece(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    proxy.state.copy_checksums = True
    store = make_store(proxy, bucket)
    digests = [hexsha(data[:SMALL]), hexsha(data[SMALL:])]
    upload = FileUpload(path, len(data), hexsha(data), part_sha256=digests, pieces=pieces)
    assert store.put_file(KEY, upload) == Transfer(sent=SMALL, reused=4096)
    assert stored(moto, bucket) == data


def test_a_server_that_reports_no_copy_checksum_gets_the_bytes_sent(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    """moto reports no SHA-256 of a copied part: the copy cannot be checked, so it is replaced by the bytes,
    and later uploads through the same store do not try again (one notice)."""
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    seen = Seen()
    store = make_store(proxy, bucket)
    digests = [hexsha(data[:SMALL]), hexsha(data[SMALL:])]
    upload = seen.upload(path, data, pieces=pieces, part_sha256=digests)
    assert store.put_file(KEY, upload) == Transfer(sent=len(data), reused=0)
    assert stored(moto, bucket) == data
    assert not store.verified_copies and len(copies(proxy)) == 1
    assert seen.notices == [
        f"s3://{bucket}/releases: the server reports no SHA-256 of a copied part, so copied bytes cannot be checked:"
        " uploading the whole archive instead"
    ]
    assert store.put_file("again", seen.upload(path, data, pieces=pieces)) == Transfer(sent=len(data), reused=0)
    assert len(copies(proxy)) == 1 and len(seen.notices) == 1
    assert sorted(seen.progress) == [SMALL, SMALL, 4096, 4096]


@pytest.mark.parametrize("reported", [None, "+", "~"], ids=["theirs", "sorting-first", "sorting-last"])
def test_copied_bytes_that_differ_are_sent_instead(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path, reported: str | None
) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    moto.put_object(Bucket=bucket, Key=f"releases/{OLD_KEY}", Body=b"x" * (len(data) + 200))  # rewritten since
    proxy.state.copy_checksums, proxy.state.copy_checksum_lie = True, reported
    seen = Seen()
    store = make_store(proxy, bucket)
    assert store.put_file(KEY, seen.upload(path, data, pieces=pieces)) == Transfer(sent=len(data), reused=0)
    assert stored(moto, bucket) == data
    assert seen.notices == [
        f"bytes 100-4195 of s3://{bucket}/releases/{OLD_KEY} differ from the frames its manifest lists: sending"
    ]
    assert store.verified_copies and sorted(seen.progress) == [SMALL, 4096]


@pytest.mark.parametrize("aws", [False, True], ids=["moto-404", "aws-NoSuchKey"])
def test_a_missing_source_is_sent_instead(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path, aws: bool) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    moto.delete_object(Bucket=bucket, Key=f"releases/{OLD_KEY}")
    proxy.state.copy_checksums = True
    if aws:  # AWS names the missing source
        proxy.state.answer = lambda e: (
            s3_error(404, "NoSuchKey", "The specified key does not exist.") if e.is_part_copy else None
        )
    seen = Seen()
    store = make_store(proxy, bucket)
    assert store.put_file(KEY, seen.upload(path, data, pieces=pieces)) == Transfer(sent=len(data), reused=0)
    assert stored(moto, bucket) == data and store.verified_copies
    assert seen.notices == [
        f"cannot copy bytes 100-4195 of s3://{bucket}/releases/{OLD_KEY} (it does not exist): sending them instead"
    ]


def test_a_refused_copy_is_sent_instead(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    proxy.state.answer = lambda e: s3_error(403, "AccessDenied", "no") if e.is_part_copy else None
    seen = Seen()
    store = make_store(proxy, bucket)
    assert store.put_file(KEY, seen.upload(path, data, pieces=pieces)) == Transfer(sent=len(data), reused=0)
    where = f"s3://{bucket}/releases"
    assert seen.notices == [
        f"cannot copy bytes 100-4195 of {where}/{OLD_KEY} (access denied: UploadPartCopy {where}/{KEY} (no)):"
        " sending them instead"
    ]
    assert stored(moto, bucket) == data and store.verified_copies


def test_a_server_without_part_copies_gets_the_bytes(proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path) -> None:
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    proxy.state.answer = lambda e: s3_error(501, "NotImplemented") if e.is_part_copy else None
    seen = Seen()
    store = make_store(proxy, bucket)
    assert store.put_file(KEY, seen.upload(path, data, pieces=pieces)) == Transfer(sent=len(data), reused=0)
    assert stored(moto, bucket) == data and not store.verified_copies
    assert seen.notices == [
        f"s3://{bucket}/releases: the server does not support UploadPartCopy, so copied bytes cannot be checked:"
        " uploading the whole archive instead"
    ]


@pytest.mark.parametrize(
    ("deletable", "filler"),
    [(True, b"x"), (False, b"x"), (True, b"a")],
    ids=["removed", "left", "sorting-after"],  # b"a": the assembled checksum sorts after the expected one
)
def test_an_object_assembled_from_other_bytes_is_refused(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path, deletable: bool, filler: bytes
) -> None:
    """A server that vouches for a copy whose bytes differ: the completed object's composite checksum (over the
    bytes it holds) is not the local parts' one, so the object is removed (or named, when it cannot be)."""
    path, data, pieces = reuse_case(moto, bucket, tmp_path)
    moto.put_object(Bucket=bucket, Key=f"releases/{OLD_KEY}", Body=filler * (len(data) + 200))
    proxy.state.copy_checksums, proxy.state.copy_checksum_lie = True, b64(data[SMALL:])
    if not deletable:
        proxy.state.answer = lambda e: s3_error(403, "AccessDenied") if e.command == "DELETE" else None
    with pytest.raises(IntegrityError) as caught:
        make_store(proxy, bucket).put_file(KEY, FileUpload(path, len(data), hexsha(data), pieces=pieces))
    expected = composite_checksum([b64(data[:SMALL]), b64(data[SMALL:])])
    where = f"s3://{bucket}/releases/{KEY}"
    found = composite_checksum([b64(data[:SMALL]), b64(filler * 4096)])
    if deletable:
        assert keys_in(moto, bucket) == [f"releases/{OLD_KEY}"]
        assert str(caught.value.fix).endswith("the object was removed: rerun publish")
    else:
        assert str(caught.value.fix).endswith(f"delete {where}, then rerun")
    assert (
        caught.value.message
        == f"{where} was assembled with checksum {found}, the checked archive's parts give {expected}"
    )


# ------------------------------------------------------------------------ stores without conditions


def refuse_conditions(e: Exchange) -> Reply | None:
    conditional = e.headers.get("If-None-Match") or e.headers.get("If-Match")
    return (
        s3_error(501, "NotImplemented", "A header you provided implies functionality that is not implemented")
        if conditional
        else None
    )


def test_without_conditional_writes_a_head_guards_each_write(proxy: S3Proxy, bucket: str, moto: Any) -> None:
    proxy.state.answer = refuse_conditions
    store = make_store(proxy, bucket)
    first = store.put_bytes("k", b"one", if_none_match=True)
    assert not store.conditional_writes and stored(moto, bucket, "k") == b"one"
    with pytest.raises(ConflictError) as exists:
        store.put_bytes("k", b"two", if_none_match=True)
    assert exists.value.message == f"s3://{bucket}/releases/k already exists"
    for other in ('"0"', '"not-the-etag"'):  # sorting before and after every hex ETag
        with pytest.raises(ConflictError) as changed:
            store.put_bytes("k", b"two", if_match=other)
        assert changed.value.message == f"s3://{bucket}/releases/k changed since it was read"
    with pytest.raises(ConflictError, match="changed since it was read"):
        store.put_bytes("absent", b"two", if_match=first)
    second = store.put_bytes("k", b"two", if_match=first)
    assert stored(moto, bucket, "k") == b"two" and second != first
    proxy.state.seen.clear()
    store.put_bytes("new", b"n", if_none_match=True)
    third = store.put_bytes("k", b"three", if_match=second)
    assert [e.command for e in proxy.state.seen] == ["HEAD", "PUT", "HEAD", "PUT"]  # no condition sent, none refused
    assert stored(moto, bucket, "new") == b"n" and third != second
    proxy.state.seen.clear()
    store.put_bytes("k", b"three")
    assert proxy.state.operations() == [f"PUT /{bucket}/releases/k"]  # no condition: no HEAD either
    assert requests_with(proxy, "If-None-Match") == requests_with(proxy, "If-Match") == []


@pytest.mark.parametrize(("status", "code"), [(501, "NotImplemented"), (501, "Unsupported"), (400, "NotImplemented")])
def test_a_not_implemented_answer_switches_to_the_fallback(
    proxy: S3Proxy, bucket: str, moto: Any, status: int, code: str
) -> None:
    proxy.state.answer = lambda e: s3_error(status, code) if e.headers.get("If-None-Match") else None
    store = make_store(proxy, bucket)
    store.put_bytes("k", b"one", if_none_match=True)
    assert not store.conditional_writes and stored(moto, bucket, "k") == b"one"


def test_without_conditional_writes_files_are_still_immutable(
    proxy: S3Proxy, bucket: str, moto: Any, tmp_path: Path
) -> None:
    big, big_data = archive(tmp_path, 3 * SMALL, seed=1)
    small, small_data = archive(tmp_path, 100, seed=2)
    proxy.state.answer = refuse_conditions
    store = make_store(proxy, bucket)
    store.put_file(KEY, FileUpload(big, len(big_data), hexsha(big_data)))  # a 501 on completing: HEAD, retried
    assert not store.conditional_writes and stored(moto, bucket) == big_data
    store.put_file("small", FileUpload(small, len(small_data), hexsha(small_data)))
    assert stored(moto, bucket, "small") == small_data
    proxy.state.seen.clear()
    with pytest.raises(ConflictError, match="already exists"):
        store.put_file(KEY, FileUpload(big, len(big_data), hexsha(big_data)))
    assert [e.command for e in proxy.state.seen] == ["HEAD"]  # refused before a multipart upload starts
    with pytest.raises(ConflictError, match="already exists"):
        store.put_file("small", FileUpload(small, len(small_data), hexsha(small_data)))
    store.put_file("other", FileUpload(big, len(big_data), hexsha(big_data)))
    assert stored(moto, bucket, "other") == big_data and open_uploads(moto, bucket) == []


# ------------------------------------------------------------------------------------------- errors


def test_check_passes_for_a_bucket_that_exists(proxy: S3Proxy, bucket: str) -> None:
    make_store(proxy, bucket).check()
    assert proxy.state.operations() == [f"HEAD /{bucket}"]


@pytest.mark.parametrize("named", [True, False], ids=["endpoint-given", "client-endpoint"])
@pytest.mark.parametrize("action", ["check", "get", "put"])
def test_a_missing_bucket_is_named_with_its_endpoint(proxy: S3Proxy, named: bool, action: str) -> None:
    store = make_store(proxy, "no-such-bucket", named=named)
    calls = {"check": store.check, "get": lambda: store.get_bytes("k"), "put": lambda: store.put_bytes("k", b"x")}
    with pytest.raises(StoreError) as caught:
        calls[action]()
    assert caught.value.message == f"bucket 'no-such-bucket' does not exist at {proxy.endpoint}"
    assert caught.value.fix == "create it (aws s3 mb s3://no-such-bucket) or fix the bucket name in --to"


def test_the_endpoint_named_is_the_one_given(proxy: S3Proxy) -> None:
    store = S3Store(raw_client(proxy.endpoint), "no-such-bucket", endpoint_url="https://minio.internal:9000")
    with pytest.raises(StoreError) as caught:
        store.check()
    assert caught.value.message.endswith("does not exist at https://minio.internal:9000")


@pytest.mark.parametrize(
    ("status", "code", "kind", "message"),
    [
        (403, "InvalidAccessKeyId", StoreError, "access denied: PUT {where} (the key)"),
        (403, "AllAccessDisabled", StoreError, "access denied: PUT {where} (the key)"),
        (400, "ExpiredToken", StoreError, "access denied: PUT {where} (the key)"),
        (
            409,
            "ConditionalRequestConflict",
            ConflictError,
            "{where}: the write condition failed (ConditionalRequestConflict)",
        ),
        (400, "PreconditionFailed", ConflictError, "{where}: the write condition failed (PreconditionFailed)"),
        (412, "Odd", ConflictError, "{where}: the write condition failed (Odd)"),
        (
            400,
            "XAmzContentSHA256Mismatch",
            IntegrityError,
            "PUT {where}: the server received bytes whose checksum does not match (XAmzContentSHA256Mismatch)",
        ),
        (400, "InvalidArgument", StoreError, "PUT {where} failed: InvalidArgument the key"),
        (500, "InternalError", StoreError, "PUT {where} failed: InternalError the key"),
        (404, "NoSuchUpload", StoreError, "PUT {where} failed: NoSuchUpload the key"),
    ],
)
def test_each_error_answer_becomes_its_scrollcase_error(
    proxy: S3Proxy, bucket: str, status: int, code: str, kind: type[Exception], message: str
) -> None:
    proxy.state.answer = lambda e: s3_error(status, code, "the key")
    with pytest.raises((StoreError, IntegrityError)) as caught:
        make_store(proxy, bucket).put_bytes("k", b"x")
    assert type(caught.value) is kind
    assert caught.value.message == message.format(where=f"s3://{bucket}/releases/k")


def test_an_error_without_a_message_names_its_code(proxy: S3Proxy, bucket: str) -> None:
    proxy.state.answer = lambda e: s3_error(400, "SlowDown")
    with pytest.raises(StoreError) as caught:
        make_store(proxy, bucket).put_bytes("k", b"x")
    assert caught.value.message == f"PUT s3://{bucket}/releases/k failed: SlowDown SlowDown"
    assert caught.value.fix == "check the endpoint, bucket and credentials, then rerun"


def test_wrong_credentials_are_a_clear_store_error(proxy: S3Proxy, bucket: str) -> None:
    proxy.state.answer = lambda e: s3_error(403, "SignatureDoesNotMatch", "The signature does not match")
    store = make_store(proxy, bucket)
    with pytest.raises(StoreError) as caught:
        store.check()
    assert caught.value.message == f"access denied: check s3://{bucket} (Forbidden)"  # a HEAD answer has no body
    assert "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY" in str(caught.value.fix)
    with pytest.raises(StoreError) as head:
        store.head("k")
    assert head.value.message == f"access denied: HEAD s3://{bucket}/releases/k (Forbidden)"


def test_a_404_on_a_key_is_absence_but_on_the_bucket_is_an_error(proxy: S3Proxy, bucket: str) -> None:
    proxy.state.answer = lambda e: s3_error(404, "Gone")
    store = make_store(proxy, bucket)
    assert store.get_bytes("k") is None
    with pytest.raises(StoreError, match=r"bucket .* does not exist"):
        store.check()


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_on_check_is_not_a_missing_bucket(proxy: S3Proxy, bucket: str, status: int) -> None:
    """Only a 404 (or NoSuchBucket) means the bucket is missing: a HEAD answer carries no body, so its code is
    the status."""
    proxy.state.answer = lambda e: Reply(status)
    with pytest.raises(StoreError) as caught:
        make_store(proxy, bucket).check()
    assert "does not exist" not in caught.value.message


def test_a_server_error_on_a_read_is_not_absence(proxy: S3Proxy, bucket: str) -> None:
    proxy.state.answer = lambda e: s3_error(500, "InternalError", "try later")
    with pytest.raises(StoreError) as caught:
        make_store(proxy, bucket).get_bytes("k")
    assert caught.value.message == f"GET s3://{bucket}/releases/k failed: InternalError try later"


def test_missing_credentials_are_named(
    proxy: S3Proxy, bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = boto3.session.Session().client("s3", endpoint_url=proxy.endpoint, region_name="us-east-1")
    with pytest.raises(StoreError) as caught:
        S3Store(client, bucket).check()
    assert caught.value.message == f"no AWS credentials found for s3://{bucket}"
    assert "aws-actions/configure-aws-credentials" in str(caught.value.fix)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_endpoint_is_named(bucket: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    store = S3Store(raw_client(dead), bucket, "releases")
    with pytest.raises(StoreError) as caught:
        store.head("k")
    assert caught.value.message.startswith(f"cannot reach the S3 endpoint {dead} (HEAD s3://{bucket}/releases/k): ")
    assert "--endpoint-url (or AWS_ENDPOINT_URL_S3)" in str(caught.value.fix)


def test_a_dropped_connection_is_named(proxy: S3Proxy, bucket: str) -> None:
    proxy.state.answer = lambda e: Reply(0)
    with pytest.raises(StoreError, match=f"^cannot reach the S3 endpoint {proxy.endpoint} \\(check s3://{bucket}\\)"):
        make_store(proxy, bucket).check()


def test_a_silent_endpoint_is_named(bucket: str) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
            config=client_config(attempts=1, connect_timeout=2, read_timeout=0.2),
        )
        with pytest.raises(StoreError, match=f"^cannot reach the S3 endpoint {endpoint} "):
            S3Store(client, bucket).check()


def fill_backlog(port: int) -> list[socket.socket]:
    """Connections to ``port`` until the next one is left unanswered (those made are returned, to close)."""
    made: list[socket.socket] = []
    for _ in range(8):
        try:
            made.append(socket.create_connection(("127.0.0.1", port), timeout=0.2))
        except TimeoutError:
            return made
    raise AssertionError(f"every connection to {port} was taken: no full backlog to test with")


def test_an_endpoint_that_takes_no_connection_is_named(bucket: str) -> None:
    """A listener whose backlog is full: the kernel leaves new connections unanswered (connect times out)."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        queued = fill_backlog(port)
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
            config=client_config(attempts=1, connect_timeout=0.2, read_timeout=0.2),
        )
        try:
            with pytest.raises(StoreError, match=f"^cannot reach the S3 endpoint {endpoint} "):
                S3Store(client, bucket).check()
        finally:
            for conn in queued:
                conn.close()
