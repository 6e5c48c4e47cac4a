"""Real S3 API servers on 127.0.0.1 for the publish tests (session-scoped, always stopped)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.support.s3servers import S3Server, moto, seaweedfs

_bucket_numbers = itertools.count()


@pytest.fixture(scope="session")
def weed() -> Iterator[S3Server]:
    with seaweedfs() as server:
        yield server


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    with moto() as server:
        yield server


def s3_client(server: S3Server, *, secret: str | None = None, endpoint: str | None = None) -> Any:
    return boto3.client(
        "s3", endpoint_url=endpoint or server.endpoint, aws_access_key_id=server.access_key,
        aws_secret_access_key=secret or server.secret_key, region_name="us-east-1",
        config=Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=3, read_timeout=60,
                      max_pool_connections=32, request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))


def new_bucket(server: S3Server) -> str:
    name = f"bucket-{next(_bucket_numbers)}"
    s3_client(server).create_bucket(Bucket=name)
    return name


@pytest.fixture
def weed_bucket(weed: S3Server) -> str:
    return new_bucket(weed)


@pytest.fixture
def moto_bucket(moto_s3: S3Server) -> str:
    return new_bucket(moto_s3)
