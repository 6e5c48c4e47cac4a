"""Pure helpers of the S3 store: URL parsing, part planning, checksum decoding."""

from __future__ import annotations

import base64
import hashlib

import pytest

from scrollcase.errors import IntegrityError, StoreError
from scrollcase.store.base import Piece
from scrollcase.store.s3 import S3Store
from scrollcase.store.s3rules import (
    MAX_PARTS,
    MIN_PART_SIZE,
    b64_sha256_to_hex,
    client_config,
    composite_checksum,
    parse_s3_url,
    plan_parts,
)


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
    assert b64_sha256_to_hex(encoded) == digest.hex()
    assert b64_sha256_to_hex(encoded + "-3") is None  # composite multipart checksum
    assert b64_sha256_to_hex(None) is None


def test_checksum_part_size_matches_the_part_plan() -> None:
    store = S3Store(client=None, bucket="b", part_size=8 * 1024 * 1024)
    assert store.checksum_part_size(8 * 1024 * 1024) is None  # sent whole, with the file's own sha256
    size = 100 * 1024 * 1024 + 7
    assert store.checksum_part_size(size) == plan_parts(size, 8 * 1024 * 1024)[0][2] == 8 * 1024 * 1024
    huge = 10 * 1024**4
    assert store.checksum_part_size(huge) == plan_parts(huge, 8 * 1024 * 1024)[0][2]


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


def test_reuse_layout_sends_small_files_whole_and_shapes_parts() -> None:
    store = S3Store(client=None, bucket="b", part_size=8 * 1024 * 1024)  # type: ignore[arg-type]
    size = 40 * 1024 * 1024
    copy = (Piece(0, MIN_PART_SIZE), Piece(MIN_PART_SIZE, size, "old", 0))
    assert store.reuse_layout(4 * 1024 * 1024, copy) == ()  # one PutObject
    parts = store.reuse_layout(size, copy)
    assert parts[0] == Piece(0, MIN_PART_SIZE) and all(p.copied for p in parts[1:])


class AssembledClient:
    """Answers the HEAD after CompleteMultipartUpload with a given composite checksum; records deletes."""

    def __init__(self, checksum: str | None) -> None:
        self.checksum = checksum
        self.deleted: list[str] = []

    def head_object(self, **args: object) -> dict[str, object]:
        return {"ChecksumSHA256": self.checksum} if self.checksum else {}

    def delete_object(self, Bucket: str, Key: str) -> None:
        self.deleted.append(Key)


def test_an_assembled_object_whose_checksum_differs_is_deleted_and_refused() -> None:
    parts = [base64.b64encode(hashlib.sha256(b"x").digest()).decode()]
    good = AssembledClient(composite_checksum(parts))
    S3Store(good, "b", "p")._check_assembled("k", parts)  # type: ignore[arg-type]
    assert good.deleted == []
    bad = AssembledClient("AAAA-1")
    with pytest.raises(IntegrityError, match="corrupt") as caught:
        S3Store(bad, "b", "p")._check_assembled("k", parts)  # type: ignore[arg-type]
    assert bad.deleted == ["p/k"] and caught.value.exit_code == 8
