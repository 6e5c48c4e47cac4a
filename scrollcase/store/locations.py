"""Which store a ``--store`` location names, for reading: a directory, ``s3://bucket/prefix`` or an
``http(s)://`` base URL.  The S3 client is made by an injected factory, only when an s3:// store is named."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scrollcase.errors import UsageError
from scrollcase.store.base import ReadableStore

S3ClientFactory = Callable[[str | None], Any]


def make_s3_client(endpoint_url: str | None) -> Any:
    """A boto3 S3 client from the standard credential chain, with publish's timeouts and retries."""
    import boto3

    from scrollcase.store.s3 import client_config

    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=client_config())


def open_read_store(
    location: str,
    endpoint_url: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    s3_client: S3ClientFactory = make_s3_client,
) -> ReadableStore:
    """The store ``location`` names; UsageError for an empty or unknown location or a misplaced endpoint."""
    if not location.strip():
        raise UsageError(
            "--store is empty: it names no store (an unset CI variable?)",
            fix="pass --store DIRECTORY, s3://bucket/prefix or https://host/path",
        )
    if location.startswith("s3://"):
        from scrollcase.store.s3 import S3Store, check_endpoint_url, parse_s3_url

        bucket, prefix = parse_s3_url(location)
        check_endpoint_url(endpoint_url, os.environ if env is None else env)
        return S3Store(s3_client(endpoint_url), bucket, prefix, endpoint_url=endpoint_url)
    if endpoint_url is not None:
        raise UsageError(
            "--endpoint-url only applies to s3:// stores",
            fix=f"drop it, or pass --store s3://... instead of {location}",
        )
    if location.startswith(("http://", "https://")):
        from scrollcase.store.http import HttpStore

        return HttpStore(location)
    if "://" in location:
        raise UsageError(
            f"--store {location}: unsupported store URL",
            fix="use a directory, s3://bucket/prefix or http(s)://host/path",
        )
    from scrollcase.store.local import LocalStore

    return LocalStore(Path(location))
