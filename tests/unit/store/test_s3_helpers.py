"""S3Store's own helpers: the part size it checksums by, the reuse layout, the assembled object's check."""

from __future__ import annotations

import base64
import hashlib

import pytest

from scrollcase.errors import IntegrityError
from scrollcase.store.base import Piece
from scrollcase.store.s3 import S3Store
from scrollcase.store.s3rules import (
    MIN_PART_SIZE,
    composite_checksum,
    plan_parts,
)


def test_checksum_part_size_matches_the_part_plan() -> None:
    store = S3Store(client=None, bucket="b", part_size=8 * 1024 * 1024)
    assert store.checksum_part_size(8 * 1024 * 1024) is None  # sent whole, with the file's own sha256
    size = 100 * 1024 * 1024 + 7
    assert store.checksum_part_size(size) == plan_parts(size, 8 * 1024 * 1024)[0][2] == 8 * 1024 * 1024
    huge = 10 * 1024**4
    assert store.checksum_part_size(huge) == plan_parts(huge, 8 * 1024 * 1024)[0][2]


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
