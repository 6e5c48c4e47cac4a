"""S3 without a connection: the ``s3://`` URL, the endpoint URL and client settings, the multipart part
plan and its composite checksum, and what each S3 error code means to scrollcase (pure; ``s3.py`` makes
the calls).  Errors are told apart by their code and HTTP status, never by their wording."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from botocore.exceptions import ClientError

from scrollcase.errors import ConflictError, IntegrityError, Problem, StoreError, UsageError
from scrollcase.io.digest import sha256_raw

if TYPE_CHECKING:  # types only: botocore's Config is imported where a client is configured
    from botocore.config import Config

DEFAULT_PART_SIZE = 16 * 1024 * 1024  # memory stays near DEFAULT_WORKERS * DEFAULT_PART_SIZE
DEFAULT_WORKERS = 6
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's minimum for every part but the last
MAX_PARTS = 10_000
# Copied parts hold no memory, but the server answers an UploadPartCopy only when it has copied the whole
# range: 64 MiB keeps that well inside READ_TIMEOUT on a busy server.
COPY_PART_SIZE = 64 * 1024 * 1024

_CONFLICT_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_UNSUPPORTED_CODES = {"NotImplemented", "501"}
_DIGEST_CODES = {"BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch"}
_AUTH_CODES = {
    "AccessDenied",
    "403",
    "Forbidden",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "InvalidClientTokenId",
}
_NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}
# where a 404 means that the key (or a part copy's source) is absent; on a write it is an error (NoSuchUpload...)
_READS = {"HEAD", "GET", "UploadPartCopy"}


# A stalled endpoint (accepts connections, never answers) must fail within a minute, naming it:
# ATTEMPTS x (CONNECT_TIMEOUT + READ_TIMEOUT) = 3 x 20 s.  The read timeout is the longest silence
# between two socket operations, not a limit on a request: a large part keeps sending as long as bytes
# move, and a server that verifies a 16 MiB part's SHA-256 answers in well under a second.
ATTEMPTS = 3  # in all, the first try included
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0


def client_config(
    *, attempts: int = ATTEMPTS, connect_timeout: float = CONNECT_TIMEOUT, read_timeout: float = READ_TIMEOUT
) -> Config:
    """The botocore ``Config`` scrollcase's S3 clients use (tests build theirs from it too).
    ``attempts`` counts every try of a request, the first included."""
    from botocore.config import Config

    return Config(
        retries={"total_max_attempts": attempts, "mode": "standard"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_pool_connections=32,
        # We send our own SHA-256 checksums; don't let botocore add CRC32s on top.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        # Every body we send carries a SHA-256 checksum in a signed header that the server
        # verifies.  Over plain http botocore would also sign the payload, hashing every
        # byte a second time on both ends for no extra integrity.
        s3={"payload_signing_enabled": False},
    )


ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def check_endpoint_url(endpoint_url: str | None, env: Mapping[str, str]) -> None:
    """UsageError when ``--endpoint-url`` (or the endpoint botocore would read from ``env``) is not an
    ``http(s)://host[:port]`` URL: botocore would otherwise fail with a ValueError deep inside."""
    if endpoint_url is not None:
        candidates = [("--endpoint-url", endpoint_url)]
    else:
        candidates = [(f"${name}", env[name]) for name in ENDPOINT_ENVS if env.get(name)][:1]
    for source, value in candidates:
        try:
            parts = urlsplit(value.strip())
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            parts, port_ok = urlsplit(""), False
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
            raise UsageError(
                f"{source} {value!r} is not an endpoint URL",
                problems=[Problem(message="expected http(s)://host[:port]", key=source, value=repr(value))],
                fix="pass e.g. --endpoint-url https://minio.internal:9000, or omit it for AWS",
            )


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``); UsageError when it names no bucket."""
    rest = url.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    if not url.startswith("s3://") or not bucket:  # what a person typed: a usage error (exit 2), as any bad URL
        raise UsageError(f"{url!r} is not an S3 URL", fix="write it as s3://bucket or s3://bucket/prefix")
    return bucket, prefix.strip("/")


def effective_part_size(size: int, part_size: int) -> int:
    """``part_size`` raised to S3's minimum, and further when 10,000 parts would not hold ``size``."""
    return max(part_size, MIN_PART_SIZE, -(-size // MAX_PARTS))


def plan_parts(size: int, part_size: int) -> list[tuple[int, int, int]]:
    """(part number, offset, length) for a multipart upload of ``size`` bytes."""
    part_size = effective_part_size(size, part_size)
    return [(n + 1, offset, min(part_size, size - offset)) for n, offset in enumerate(range(0, size, part_size))]


def b64_sha256_to_hex(value: str | None) -> str | None:
    # A composite multipart checksum ("...-N") is not the object's sha256; only a full one is.
    if not value or "-" in value:
        return None
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return None


def b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


def composite_checksum(part_checksums: Sequence[str]) -> str:
    """S3's checksum of a multipart object: the SHA-256 of its parts' SHA-256s (base64), then ``-<parts>``."""
    joined = b"".join(base64.b64decode(c) for c in part_checksums)
    return f"{base64.b64encode(sha256_raw(joined)).decode()}-{len(part_checksums)}"


CREDENTIALS_FIX = (
    "give valid credentials for the bucket: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    "AWS_PROFILE, or in GitHub Actions OIDC via aws-actions/configure-aws-credentials; "
    "the identity needs s3:GetObject, s3:PutObject, s3:AbortMultipartUpload, s3:ListBucket"
)


class NotFoundError(Exception):
    """Internal: the key does not exist (turned into None by head/get)."""


class UnsupportedError(Exception):
    """Internal: the store answered a conditional write with 501 NotImplemented."""


def client_error(exc: ClientError, action: str, key: str | None, where: str, bucket: str, endpoint: str) -> Exception:
    """The error scrollcase raises for an S3 error answer to ``action`` on ``key`` (None: the bucket itself):
    by its code and HTTP status, never by its wording (servers word them differently)."""
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    message = str(error.get("Message") or code)  # botocore parses an empty <Message/> to None
    # AWS answers If-Match on a key that is gone with 404 NoSuchKey: the version read is no longer there
    if code in _CONFLICT_CODES or status in ("412", "409") or (action == "PUT" and code == "NoSuchKey"):
        return ConflictError(
            f"{where}: the write condition failed ({code or status})",
            fix="another publisher wrote this key first; rerun to compare",
        )
    if code in _DIGEST_CODES:
        return IntegrityError(
            f"{action} {where}: the server received bytes whose checksum does not match ({code})",
            fix="the archive changed after it was checked against the release manifest; "
            "rebuild it (or restore the built file) and rerun publish",
        )
    if code in _UNSUPPORTED_CODES or status == "501":
        return UnsupportedError(code)
    if code == "NoSuchBucket" or (key is None and (code in _NOT_FOUND_CODES or status == "404")):
        return StoreError(
            f"bucket {bucket!r} does not exist at {endpoint}",
            fix=f"create it (aws s3 mb s3://{bucket}) or fix the bucket name in --to",
        )
    if key is not None and action in _READS and (code in _NOT_FOUND_CODES or status == "404"):
        return NotFoundError(code)
    if code in _AUTH_CODES or status == "403":
        return StoreError(f"access denied: {action} {where} ({message})", fix=CREDENTIALS_FIX)
    return StoreError(
        f"{action} {where} failed: {code} {message}".strip(),
        fix="check the endpoint, bucket and credentials, then rerun",
    )
