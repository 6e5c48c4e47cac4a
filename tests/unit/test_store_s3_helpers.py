"""Pure helpers of the S3 store: URL parsing, part planning, checksum decoding."""

from __future__ import annotations

import base64
import hashlib

import pytest

from scrollcase.errors import StoreError
from scrollcase.store.s3 import MAX_PARTS, MIN_PART_SIZE, _b64_sha256_to_hex, parse_s3_url, plan_parts


def test_parse_s3_url() -> None:
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    assert parse_s3_url("s3://bucket/a/b/") == ("bucket", "a/b")
    with pytest.raises(StoreError, match="s3://bucket"):
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
    assert _b64_sha256_to_hex(encoded) == digest.hex()
    assert _b64_sha256_to_hex(encoded + "-3") is None  # composite multipart checksum
    assert _b64_sha256_to_hex(None) is None
