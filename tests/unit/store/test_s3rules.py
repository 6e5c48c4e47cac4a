"""store/s3rules.py: S3 without a connection: URLs, client settings, the part plan, checksums, error codes."""

from __future__ import annotations

import base64
import hashlib

import pytest
from botocore.exceptions import ClientError

from scrollcase.errors import ConflictError, IntegrityError, StoreError, UsageError
from scrollcase.store.s3rules import (
    MAX_PARTS,
    MIN_PART_SIZE,
    NotFoundError,
    UnsupportedError,
    b64_sha256_to_hex,
    client_config,
    client_error,
    composite_checksum,
    parse_s3_url,
    plan_parts,
)


def test_parse_s3_url() -> None:
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    assert parse_s3_url("s3://bucket/a/b/") == ("bucket", "a/b")
    with pytest.raises(UsageError, match="s3://bucket"):
        parse_s3_url("s3:///prefix")


def test_parts_cover_the_file_exactly_once() -> None:
    size = 100 * 1024 * 1024 + 7
    parts = plan_parts(size, 32 * 1024 * 1024)
    assert [n for n, _, _ in parts] == [1, 2, 3, 4]
    assert sum(length for _, _, length in parts) == size
    assert all(offset == (n - 1) * 32 * 1024 * 1024 for n, offset, _ in parts)


def test_parts_respect_s3_minimum_and_part_limit() -> None:
    assert plan_parts(12 * 1024 * 1024, 1024)[0][2] == MIN_PART_SIZE
    huge = 10 * 1024**4  # 10 TiB: 32 MiB parts would exceed 10,000
    assert len(plan_parts(huge, 32 * 1024 * 1024)) <= MAX_PARTS


def test_only_full_object_checksums_count_as_sha256() -> None:
    digest = hashlib.sha256(b"x").digest()
    encoded = base64.b64encode(digest).decode()
    assert b64_sha256_to_hex(encoded) == digest.hex()
    assert b64_sha256_to_hex(encoded + "-3") is None  # composite multipart checksum
    assert b64_sha256_to_hex(None) is None


def test_client_config_sends_checksums_instead_of_signing_payloads() -> None:
    config = client_config()
    assert config.s3 == {"payload_signing_enabled": False}
    assert config.request_checksum_calculation == "when_required"
    assert config.retries == {"total_max_attempts": 3, "mode": "standard"}


def test_defect7_a_stalled_endpoint_fails_within_a_minute() -> None:
    """4 attempts x 120 s read timeout: a silent endpoint took 8 minutes to fail."""
    config = client_config()
    assert config.retries["total_max_attempts"] * (config.connect_timeout + config.read_timeout) <= 60


def test_composite_checksum_is_the_sha256_of_the_part_digests() -> None:
    parts = [b"first part", b"second"]
    b64 = [base64.b64encode(hashlib.sha256(p).digest()).decode() for p in parts]
    joined = hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).digest()
    assert composite_checksum(b64) == base64.b64encode(joined).decode() + "-2"


def _answer(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": ""}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    ("code", "status", "action", "key", "expected"),
    [
        ("PreconditionFailed", 412, "PUT", "k", ConflictError),
        ("NoSuchKey", 404, "PUT", "k", ConflictError),  # If-Match on a key that is gone
        ("BadDigest", 400, "PUT", "k", IntegrityError),
        ("NotImplemented", 501, "PUT", "k", UnsupportedError),
        ("NoSuchBucket", 404, "GET", "k", StoreError),
        ("404", 404, "HEAD", None, StoreError),  # the bucket's own HEAD: no bucket
        ("NoSuchKey", 404, "GET", "k", NotFoundError),
        ("AccessDenied", 403, "GET", "k", StoreError),
        ("InternalError", 500, "GET", "k", StoreError),
    ],
)
def test_each_error_answer_is_told_by_its_code_and_status(
    code: str, status: int, action: str, key: str | None, expected: type[Exception]
) -> None:
    error = client_error(_answer(code, status), action, key, "s3://b/k", "b", "http://127.0.0.1:9")
    assert type(error) is expected
