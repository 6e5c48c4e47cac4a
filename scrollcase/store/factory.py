"""Opening a store from what a person types — a directory, ``s3://bucket/prefix`` or, for reading, an
``http(s)://`` base URL — and the one S3 client factory every S3 access of scrollcase uses (publishing,
installing, and a build fetching ``s3://`` assets)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from scrollcase.errors import UsageError
from scrollcase.store.base import ReadableStore, Store
from scrollcase.store.http import HttpStore
from scrollcase.store.local import LocalStore
from scrollcase.store.s3 import S3Store
from scrollcase.store.s3rules import check_endpoint_url, client_config, parse_s3_url

if TYPE_CHECKING:  # boto3-stubs: types only
    from mypy_boto3_s3 import S3Client

DEFAULT_STORE = ".scrollcase/store"
STORE_ENV = "SCROLLCASE_STORE"


def make_s3_client(endpoint_url: str | None = None) -> S3Client:
    """A boto3 S3 client from the standard credential chain, with the store's retries, timeouts and
    checksum settings (:func:`~scrollcase.store.s3rules.client_config`); created only when needed."""
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


def object_key(store: Store, key: str) -> str:
    """The key as the store itself names it: below an S3 store's prefix; a folder store's keys are its paths'."""
    return store.object_key(key) if isinstance(store, S3Store) else key


S3ClientFactory = Callable[[str | None], "S3Client"]


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
        bucket, prefix = parse_s3_url(location)
        check_endpoint_url(endpoint_url, os.environ if env is None else env)
        return S3Store(s3_client(endpoint_url), bucket, prefix, endpoint_url=endpoint_url)
    if endpoint_url is not None:
        raise UsageError(
            "--endpoint-url only applies to s3:// stores",
            fix=f"drop it, or pass --store s3://... instead of {location}",
        )
    if location.startswith(("http://", "https://")):
        return HttpStore(location)
    if "://" in location:
        raise UsageError(
            f"--store {location}: unsupported store URL",
            fix="use a directory, s3://bucket/prefix or http(s)://host/path",
        )
    return LocalStore(Path(location))
