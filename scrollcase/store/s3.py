"""Any S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, SeaweedFS) as an object store.

The boto3 client is injected (see ``scrollcase.store.factory.make_s3_client``); nothing here
creates one.  Integrity: every request carries a SHA-256 checksum the server verifies
(``ChecksumSHA256`` on PutObject and on every UploadPart; the multipart object gets a composite
checksum), and the whole archive's sha256 is stored as ``x-amz-meta-scrollcase-sha256`` so a later
HEAD can compare without downloading.  Immutability: ``If-None-Match: *`` on PutObject and
CompleteMultipartUpload.  A store that answers those with 501 NotImplemented is remembered as
lacking conditional writes, and a HEAD-then-write fallback is used instead (which narrows, but
cannot close, the race between two publishers).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from urllib3.exceptions import HTTPError as Urllib3Error

from scrollcase.errors import ConflictError, IntegrityError, StoreError
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import MAX_DOCUMENT_BYTES
from scrollcase.store.base import (
    CHUNK,
    DOCUMENT_DEADLINE,
    SHA256_METADATA,
    Blob,
    FileUpload,
    ObjectInfo,
    Piece,
    RangeNotSupportedError,
    RangeRead,
    Transfer,
    WriteOptions,
    capped,
    document_too_large,
    parse_content_range,
    range_header,
    read_document,
)
from scrollcase.store.reuse import PartRules, part_layout
from scrollcase.store.s3rules import (
    COPY_PART_SIZE,
    CREDENTIALS_FIX,
    DEFAULT_PART_SIZE,
    DEFAULT_WORKERS,
    MAX_PARTS,
    MIN_PART_SIZE,
    NotFoundError,
    UnsupportedError,
    b64,
    b64_sha256_to_hex,
    client_error,
    composite_checksum,
    effective_part_size,
    plan_parts,
)

if TYPE_CHECKING:  # boto3-stubs: types only, no client is created here
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")


class S3Store:
    """Objects live at ``s3://bucket/prefix/<key>``; ``client`` is a boto3 S3 client."""

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        part_size: int = DEFAULT_PART_SIZE,
        workers: int = DEFAULT_WORKERS,
        document_deadline: float = DOCUMENT_DEADLINE,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
    ) -> None:
        self.client = client
        self.document_deadline = document_deadline  # a small document's reads are bounded as HttpStore's
        self.max_document_bytes = max_document_bytes
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.part_size = part_size
        self.workers = workers
        self.conditional_writes = True  # until the server answers 501 NotImplemented
        # Until a server does not report the SHA-256 of a copied part (moto) or refuses UploadPartCopy:
        # a copy whose bytes cannot be checked is never kept.
        self.verified_copies = True

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def url_for(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._full(key)}"

    def object_key(self, key: str) -> str:
        """The object's key in the bucket: ``key`` below the store's prefix (what S3 URLs and the API name)."""
        return self._full(key)

    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    # ------------------------------------------------------------------------------------ reads

    def check(self) -> None:
        with self._errors("check", None):
            self.client.head_bucket(Bucket=self.bucket)

    def head(self, key: str) -> ObjectInfo | None:
        try:
            with self._errors("HEAD", key):
                response = self.client.head_object(Bucket=self.bucket, Key=self._full(key), ChecksumMode="ENABLED")
        except NotFoundError:
            return None
        metadata: dict[str, str] = response.get("Metadata", {})
        sha = metadata.get(SHA256_METADATA) or b64_sha256_to_hex(response.get("ChecksumSHA256"))
        return ObjectInfo(key=key, size=int(response["ContentLength"]), sha256=sha, etag=response.get("ETag"))

    def exists(self, key: str) -> bool:
        return self.head(key) is not None

    def get_bytes(self, key: str) -> Blob | None:
        url, started = self.url_for(key), time.monotonic()
        try:
            with self._errors("GET", key):
                response = self.client.get_object(Bucket=self.bucket, Key=self._full(key))
        except NotFoundError:
            return None
        body = response["Body"]
        with contextlib.closing(body):
            if int(response.get("ContentLength") or 0) > self.max_document_bytes:
                raise document_too_large(url, self.max_document_bytes)
            chunks = self._chunks(key, body, small=True)
            limit, deadline = self.max_document_bytes, self.document_deadline
            data = read_document(chunks, url, max_bytes=limit, started=started, seconds=deadline)
        return Blob(data=data, etag=str(response.get("ETag") or sha256_bytes(data)))

    @contextlib.contextmanager
    def read_from(self, key: str, offset: int = 0, length: int | None = None) -> Iterator[RangeRead]:
        """A ranged GET (``Range: bytes=OFFSET-``): an interrupted download resumes where it stopped."""
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self._full(key)}
        wanted = range_header(offset, length)
        if wanted:
            args["Range"] = wanted
        try:
            with self._errors("GET", key):
                response = self.client.get_object(**args)
        except NotFoundError:
            raise StoreError(
                f"{self.url_for(key)} does not exist", fix="check --store and --box; publish the release to this store"
            ) from None
        body = response["Body"]
        try:
            total = self._range_total(key, response, offset, wanted)
            chunks = self._chunks(key, body)
            if length is not None:  # a whole read is held to its declared size by its reader (download.py)
                chunks = capped(chunks, length, self.url_for(key), f"the range {wanted}")
            yield RangeRead(offset, total, chunks)
        finally:
            body.close()

    def _range_total(self, key: str, response: Mapping[str, Any], offset: int, wanted: str | None) -> int | None:
        if not wanted:  # a server that sends no Content-Length (a lying one) says nothing of the size
            return None if response.get("ContentLength") is None else int(response["ContentLength"])
        found = parse_content_range(response.get("ContentRange"))
        if found is None or found[0] != offset or found[2] is None:
            raise RangeNotSupportedError(
                f"{self.url_for(key)}: the server ignored the ranged GET ({wanted})",
                fix="use an S3 server that honours Range requests; the download restarts from the beginning",
            )
        return found[2]

    def _chunks(self, key: str, body: Any, *, small: bool = False) -> Iterator[bytes]:
        """The body as it arrives; ``small``: whatever came in each read (urllib3's ``read1``), so a document's
        deadline is checked however slowly its bytes trickle."""
        raw = getattr(body, "_raw_stream", None)  # botocore's StreamingBody over urllib3's response
        read = raw.read1 if small and raw is not None and hasattr(raw, "read1") else body.read
        with self._errors("GET", key):
            try:
                while chunk := read(CHUNK):
                    yield chunk
            except Urllib3Error as exc:  # read1 bypasses botocore's own translation of these
                raise ResponseStreamingError(error=exc) from None

    # ----------------------------------------------------------------------------------- writes

    def put_bytes(self, key: str, data: bytes, **write: Unpack[WriteOptions]) -> str:
        sha = sha256_bytes(data)
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": self._full(key),
            "Body": data,
            "ChecksumSHA256": b64(sha),
            "ContentType": write.get("content_type", "application/octet-stream"),
            "Metadata": {SHA256_METADATA: sha},
        }
        conditions = bool(write.get("if_none_match")), write.get("if_match")
        response = self._conditional(key, args, *conditions, lambda a: self.client.put_object(**a))
        return str(response["ETag"])

    def checksum_part_size(self, size: int) -> int | None:
        return None if size <= self.part_size else effective_part_size(size, self.part_size)

    def reuse_layout(self, size: int, pieces: Sequence[Piece]) -> tuple[Piece, ...]:
        if size <= self.part_size:
            return ()  # one PutObject: nothing to copy into
        rules = PartRules(MIN_PART_SIZE, effective_part_size(size, self.part_size), COPY_PART_SIZE, MAX_PARTS)
        return part_layout(pieces, rules)

    def put_file(self, key: str, upload: FileUpload) -> Transfer:
        if self.checksum_part_size(upload.size) is None:  # one request, one checksum for the whole file
            with upload.path.open("rb") as stream:
                data = stream.read()
            args: dict[str, Any] = {
                "Bucket": self.bucket,
                "Key": self._full(key),
                "Body": data,
                "ChecksumSHA256": b64(upload.sha256),
                "ContentType": "application/zstd",
                "Metadata": {SHA256_METADATA: upload.sha256},
            }
            self._conditional(key, args, True, None, lambda a: self.client.put_object(**a))
            if upload.progress:
                upload.progress(upload.size)
            return Transfer(sent=upload.size)
        return self._put_multipart(key, upload)

    def _conditional(
        self,
        key: str,
        args: dict[str, Any],
        if_none_match: bool,
        if_match: str | None,
        call: Callable[[dict[str, Any]], Any],
    ) -> Any:
        """Run a write with If-None-Match / If-Match, falling back to HEAD-compare where unsupported."""
        if if_none_match and self.conditional_writes:
            args = {**args, "IfNoneMatch": "*"}
        if if_match is not None and self.conditional_writes:
            args = {**args, "IfMatch": if_match}
        if not self.conditional_writes:
            self._check_without_conditions(key, if_none_match, if_match)
        try:
            with self._errors("PUT", key):
                return call(args)
        except UnsupportedError:
            self.conditional_writes = False
            args = {k: v for k, v in args.items() if k not in ("IfNoneMatch", "IfMatch")}
            self._check_without_conditions(key, if_none_match, if_match)
            with self._errors("PUT", key):
                return call(args)

    def _check_without_conditions(self, key: str, if_none_match: bool, if_match: str | None) -> None:
        if not (if_none_match or if_match):
            return
        current = self.head(key)
        if if_none_match and current is not None:
            raise ConflictError(f"{self.url_for(key)} already exists", fix="releases are immutable")
        if if_match is not None and (current is None or current.etag != if_match):
            raise ConflictError(f"{self.url_for(key)} changed since it was read", fix="read it again and retry")

    def _put_multipart(self, key: str, upload: FileUpload) -> Transfer:
        full = self._full(key)
        if not self.conditional_writes:
            self._check_without_conditions(key, True, None)
        with self._errors("CreateMultipartUpload", key):
            upload_id = str(
                self.client.create_multipart_upload(
                    Bucket=self.bucket,
                    Key=full,
                    ChecksumAlgorithm="SHA256",
                    ContentType="application/zstd",
                    Metadata={SHA256_METADATA: upload.sha256},
                )["UploadId"]
            )
        try:
            before = _fingerprint(upload.path)
            parts = self._upload_parts(key, upload_id, upload)
            if _fingerprint(upload.path) != before or before[0] != upload.size:
                # The parts' checksums match what was read, not what the manifest promised.
                raise IntegrityError(
                    f"{upload.path} changed while it was being uploaded",
                    fix="do not modify the archive during publish; rerun",
                )
            args: dict[str, Any] = {
                "Bucket": self.bucket,
                "Key": full,
                "UploadId": upload_id,
                "MultipartUpload": {"Parts": [part.entry for part in parts]},
            }
            self._conditional(key, args, True, None, lambda a: self.client.complete_multipart_upload(**a))
        except BaseException:
            # Never leave the parts behind (they cost storage and are invisible to readers).
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id)
            raise
        transfer = Transfer(sent=sum(p.sent for p in parts), reused=sum(p.reused for p in parts))
        if transfer.reused:
            self._check_assembled(key, [p.entry["ChecksumSHA256"] for p in parts])
        return transfer

    def _check_assembled(self, key: str, part_checksums: Sequence[str]) -> None:
        """The completed object's composite checksum (the server's, over the parts it holds) must be the one
        of the checked local parts: then no copied byte differs from the local archive.  An object that
        fails is deleted (no manifest names it yet) so that a rerun does not take it for the archive."""
        with self._errors("HEAD", key):
            head = self.client.head_object(Bucket=self.bucket, Key=self._full(key), ChecksumMode="ENABLED")
        found = head.get("ChecksumSHA256")
        expected = composite_checksum(part_checksums)
        if found is None or found == expected:
            return  # None: the server keeps no checksums, but then no copy was accepted (see _copy_part)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._full(key))
            fix = "an earlier archive of this box in the store is corrupt; the object was removed: rerun publish"
        except Exception:  # no s3:DeleteObject, or the server is gone: the user must remove it
            fix = f"an earlier archive of this box in the store is corrupt; delete {self.url_for(key)}, then rerun"
        raise IntegrityError(
            f"{self.url_for(key)} was assembled with checksum {found}, the checked archive's parts give {expected}",
            fix=fix,
        )

    def _upload_parts(self, key: str, upload_id: str, upload: FileUpload) -> list[_Part]:
        """Upload (or copy) parts in parallel; memory stays near ``workers * part_size``."""
        plan = list(upload.pieces) or [Piece(o, o + n) for _, o, n in plan_parts(upload.size, self.part_size)]
        known = list(upload.part_sha256) if len(upload.part_sha256) == len(plan) else [None] * len(plan)
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="scrollcase-part") as pool:
            futures = [
                pool.submit(self._send_part, key, upload_id, upload, number, piece, sha)
                for number, (piece, sha) in enumerate(zip(plan, known, strict=True), start=1)
            ]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                for future in futures:
                    future.cancel()
                _raise_first(failed)
        return [f.result() for f in futures]

    def _send_part(
        self, key: str, upload_id: str, upload: FileUpload, number: int, piece: Piece, known_sha256: str | None
    ) -> _Part:
        data = None if known_sha256 else _read_range(upload.path, piece)
        job = _PartJob(key, upload_id, upload, number, piece, b64(known_sha256 or sha256_bytes(data or b"")))
        if piece.copied and self.verified_copies:
            copied = self._copy_part(job)
            if copied is not None:
                return copied
        return self._upload_part(job, data)

    def _upload_part(self, job: _PartJob, data: bytes | None) -> _Part:
        body = _read_range(job.upload.path, job.piece) if data is None else data
        with self._errors("UploadPart", job.key):
            response = self.client.upload_part(
                Bucket=self.bucket,
                Key=self._full(job.key),
                UploadId=job.upload_id,
                PartNumber=job.number,
                Body=body,
                ChecksumSHA256=job.checksum,
            )
        if job.upload.progress:
            job.upload.progress(job.piece.size)
        return _Part(job.entry(response["ETag"]), sent=job.piece.size)

    def _copy_part(self, job: _PartJob) -> _Part | None:
        """UploadPartCopy of the job's piece from its earlier object, kept only when the server's SHA-256 of
        the copied bytes is that of the local archive's same bytes; None: send the part instead."""
        piece, upload = job.piece, job.upload
        assert piece.source_key is not None
        first, end = piece.source_range
        source = self.url_for(piece.source_key)
        try:
            with self._errors("UploadPartCopy", job.key):
                result = self.client.upload_part_copy(
                    Bucket=self.bucket,
                    Key=self._full(job.key),
                    UploadId=job.upload_id,
                    PartNumber=job.number,
                    CopySource={"Bucket": self.bucket, "Key": self._full(piece.source_key)},
                    CopySourceRange=f"bytes={first}-{end - 1}",
                )["CopyPartResult"]
        except UnsupportedError:
            self._stop_copies(upload, f"{self.url}: the server does not support UploadPartCopy")
            return None
        except (StoreError, NotFoundError) as exc:
            why = exc.message if isinstance(exc, StoreError) else "it does not exist"
            _tell(upload, f"cannot copy bytes {first}-{end - 1} of {source} ({why}): sending them instead")
            return None
        copied_sha = result.get("ChecksumSHA256")
        if copied_sha is None:
            self._stop_copies(upload, f"{self.url}: the server reports no SHA-256 of a copied part")
            return None
        if copied_sha != job.checksum:
            _tell(upload, f"bytes {first}-{end - 1} of {source} differ from the frames its manifest lists: sending")
            return None  # the part number is uploaded again, which replaces the copy
        if upload.progress:
            upload.progress(piece.size)
        return _Part(job.entry(result["ETag"]), reused=piece.size)

    def _stop_copies(self, upload: FileUpload, why: str) -> None:
        if self.verified_copies:
            self.verified_copies = False
            _tell(upload, f"{why}, so copied bytes cannot be checked: uploading the whole archive instead")

    # ----------------------------------------------------------------------------------- errors

    @contextlib.contextmanager
    def _errors(self, action: str, key: str | None) -> Iterator[None]:
        where = self.url_for(key) if key else f"s3://{self.bucket}"
        try:
            yield
        except ClientError as exc:
            raise client_error(exc, action, key, where, self.bucket, self._endpoint()) from None
        except (NoCredentialsError, PartialCredentialsError):
            raise StoreError(f"no AWS credentials found for {where}", fix=CREDENTIALS_FIX) from None
        except (EndpointConnectionError, ConnectTimeoutError, ConnectionClosedError, ReadTimeoutError) as exc:
            raise StoreError(
                f"cannot reach the S3 endpoint {self._endpoint()} ({action} {where}): {exc}",
                fix="check --endpoint-url (or AWS_ENDPOINT_URL_S3) and that the server is "
                "running and reachable from this machine",
            ) from None
        except BotoCoreError as exc:
            raise StoreError(
                f"{action} {where} failed: {exc}", fix="check the endpoint, credentials and network, then rerun"
            ) from None

    def _endpoint(self) -> str:
        return self.endpoint_url or str(getattr(getattr(self.client, "meta", None), "endpoint_url", "AWS S3"))


@dataclass(frozen=True)
class _Part:
    """One part of a multipart upload as CompleteMultipartUpload lists it, and how its bytes got there."""

    entry: dict[str, Any]
    sent: int = 0
    reused: int = 0


@dataclass(frozen=True)
class _PartJob:
    """One part to send or copy: where it goes and the base64 SHA-256 its bytes must have."""

    key: str
    upload_id: str
    upload: FileUpload
    number: int
    piece: Piece
    checksum: str

    def entry(self, etag: str) -> dict[str, Any]:
        return {"PartNumber": self.number, "ETag": etag, "ChecksumSHA256": self.checksum}


def _read_range(path: Path, piece: Piece) -> bytes:
    with path.open("rb") as stream:
        stream.seek(piece.start)
        return stream.read(piece.size)


def _tell(upload: FileUpload, line: str) -> None:
    if upload.notice:
        upload.notice(line)


def _fingerprint(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _raise_first(failed: list[Future[T]]) -> None:
    error = failed[0].exception()
    assert error is not None
    raise error
