"""Opening a store from what a person types (``s3://bucket/prefix`` or a directory), and the one S3 client
factory every S3 access of scrollcase uses (publishing, and a build fetching ``s3://`` assets)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scrollcase.errors import UsageError
from scrollcase.store.base import Store
from scrollcase.store.local import LocalStore
from scrollcase.store.s3 import S3Store, check_endpoint_url, client_config, parse_s3_url

DEFAULT_STORE = ".scrollcase/store"
STORE_ENV = "SCROLLCASE_STORE"


def make_s3_client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client from the standard credential chain, with the store's retries, timeouts and
    checksum settings (:func:`~scrollcase.store.s3.client_config`); created only when needed."""
    import boto3

    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=client_config())


def open_store(destination: str | None, endpoint_url: str | None, env: Mapping[str, str] | None = None) -> Store:
    """The store ``destination`` names (default: ``$SCROLLCASE_STORE``, else ``.scrollcase/store``)."""
    environ = os.environ if env is None else env
    if destination is not None and not destination.strip():
        raise UsageError(
            "--to is empty: it names no store (an unset CI variable?)",
            fix=f"pass --to s3://bucket/prefix or a directory; omit --to for ${STORE_ENV} or {DEFAULT_STORE}",
        )
    target = destination or environ.get(STORE_ENV) or DEFAULT_STORE
    if target.startswith("s3://"):
        bucket, prefix = parse_s3_url(target)
        check_endpoint_url(endpoint_url, environ)
        return S3Store(make_s3_client(endpoint_url), bucket, prefix, endpoint_url=endpoint_url)
    if "://" in target:
        raise UsageError(f"--to {target}: unsupported store URL", fix="use s3://bucket/prefix or a directory path")
    if endpoint_url is not None:
        raise UsageError(
            "--endpoint-url only applies to s3:// stores",
            fix=f"drop it, or publish to --to s3://... instead of {target}",
        )
    return LocalStore(Path(target))
