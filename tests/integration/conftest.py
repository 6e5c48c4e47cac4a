"""Real S3 API servers on 127.0.0.1 for the publish tests (session-scoped, always stopped)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.s3servers import S3Server, moto, new_bucket, seaweedfs


@pytest.fixture(scope="session")
def weed() -> Iterator[S3Server]:
    with seaweedfs() as server:
        yield server


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    with moto() as server:
        yield server


@pytest.fixture
def weed_bucket(weed: S3Server) -> str:
    return new_bucket(weed)


@pytest.fixture
def moto_bucket(moto_s3: S3Server) -> str:
    return new_bucket(moto_s3)
