"""The host half of signed store metadata: a store's objects checked against its TUF metadata before a byte
of them is trusted (docs/trust.md#signed-store-metadata).

:class:`StoreTrust` is built from the trusted root a host app ships (the store's ``1.root.json``, or a later
one), a state folder (one per store, default :func:`default_state_dir`) and a :data:`Reader` the client builds
over its store.  :meth:`StoreTrust.refresh` runs python-tuf's :class:`~tuf.ngclient.Updater` (the reference
client: root rotation, rollback, freeze, threshold and length/hash checks are all its own) in a COPY of the
state folder, fetching ``tuf/…`` through :func:`store_fetcher`; :meth:`StoreTrust.signed` and
:meth:`StoreTrust.read` then hold any object key to its signed length and sha256.  Only
:meth:`StoreTrust.commit`, called once every check of an install passed, puts the copy in the state
folder's place (renames on one file system): a refusal never advances what the host trusts, so an attacker
cannot plant a newer version that would lock the host out, and the versions seen last stay the floor.

python-tuf's exceptions become :class:`~scrollcase.errors.TrustError` subclasses in one place,
:func:`translated`, each naming the metadata file or object key, the rule it breaks and the fix.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scrollcase.errors import Problem, ScrollcaseError, TrustError
from scrollcase.io import files
from scrollcase.io.digest import sha256_bytes

METADATA_PREFIX = "tuf/"  # the store key prefix of the metadata (docs/trust.md#the-layout-in-a-store)
TIMESTAMP_KEY = f"{METADATA_PREFIX}timestamp.json"
BASE_URL = "scrollcase-store:"  # what the Updater's URLs start with; the rest is the store key
STATE_FOLDER = "trust"  # below the user cache: one folder per store URL
ROOT_LINK = "root.json"  # the Updater's pointer to the current root in its folder: a complete state holds it

if TYPE_CHECKING:  # python-tuf (with securesystemslib and its signers, boto3 among them) costs ~0.3 s to
    # import: it is imported when a host checks a store, not by every install (a plain install never needs it)
    from tuf.api.metadata import TargetFile
    from tuf.ngclient import FetcherInterface, Updater

# Read ``key`` of the store, at most ``max_bytes`` bytes (more may come back: the caller refuses it); None when
# the store has no such key.  Raises StoreError when the store cannot be read (not a trust refusal).
Reader = Callable[[str, int], bytes | None]


class RollbackError(TrustError):
    """Metadata older than the version this host saw last (a rollback, or a mirror serving old copies)."""


class ExpiredError(TrustError):
    """Expired metadata: a store frozen in time (freeze), or a timestamp nobody re-signed."""


class UnsignedError(TrustError):
    """Metadata not signed by the threshold of the keys the trusted root names for its role."""


class TargetMismatchError(TrustError):
    """An object (or metadata file) whose length or sha256 differ from the signed ones: repacked, mixed
    from another release (mix-and-match), or replaced."""


class OversizedError(TargetMismatchError):
    """The store sent more bytes than the signed length (endless data)."""


class NotSignedError(TrustError):
    """An object key no signed targets role lists."""


class MissingMetadataError(TrustError):
    """The store has no signed metadata (``tuf/``), or a file the signed metadata names is missing."""


class TrustedRootError(TrustError):
    """The trusted root given to the host is not TUF root metadata."""


@dataclass(frozen=True)
class Signed:
    """What the targets metadata signs for one object key."""

    key: str
    length: int
    sha256: str


def store_fetcher(read: Reader) -> FetcherInterface:
    """python-tuf's network seam over a store: ``scrollcase-store:<key>`` read through ``read``, never more than
    the length the Updater allows (a 404 when the key is absent, so the Updater's root walk stops there)."""
    from tuf.api import exceptions as tuf_errors
    from tuf.ngclient import FetcherInterface, UpdaterConfig

    class StoreFetcher(FetcherInterface):
        def _fetch(self, url: str) -> Iterator[bytes]:
            return iter((self.download_bytes(url, UpdaterConfig().targets_max_length),))

        def download_bytes(self, url: str, max_length: int) -> bytes:
            if not url.startswith(BASE_URL):
                raise tuf_errors.DownloadError(f"not a store URL: {url}")
            key = url[len(BASE_URL) :]
            data = read(key, max_length)
            if data is None:
                raise tuf_errors.DownloadHTTPError(f"{key} does not exist", 404)
            if len(data) > max_length:
                raise tuf_errors.DownloadLengthMismatchError(f"{key}: more than {max_length} bytes")
            return data

    return StoreFetcher()


def default_state_dir(store_url: str, cache_dir: Path | None = None) -> Path:
    """The trusted state of the store at ``store_url``: ``<user cache>/trust/<sha256 of the URL, 16 hex>``."""
    return (cache_dir or files.user_cache_dir()) / STATE_FOLDER / sha256_bytes(store_url.encode())[:16]


def root_version(data: bytes) -> int:
    """The version of root metadata ``data`` (unverified: the Updater verifies it as its bootstrap); ValueError
    when it is not root metadata."""
    from tuf.api.metadata import Metadata, Root
    from tuf.api.serialization import DeserializationError

    try:
        signed = Metadata[Root].from_bytes(data).signed
    except DeserializationError as exc:
        raise ValueError(str(exc)) from None
    if signed.type != Root.type:
        raise ValueError(f"it is {signed.type} metadata, not root")
    return signed.version


def consistent_key(key: str, sha256: str) -> str:
    """The content-addressed copy of a mutable object: ``boxes/b/index.json`` -> ``boxes/b/<sha256>.index.json``."""
    folder, _, name = key.rpartition("/")
    return f"{folder}/{sha256}.{name}" if folder else f"{sha256}.{name}"


class StoreTrust:
    """One host's check of one store's objects against its signed metadata (module docstring)."""

    def __init__(self, trusted_root: bytes, state: Path, read: Reader, store_url: str, root_name: str) -> None:
        self.trusted_root, self.state, self.store_url, self.root_name = trusted_root, state, store_url, root_name
        self.last_key = TIMESTAMP_KEY  # the metadata file or object read last: what a refusal names
        self._read = read
        self._work: Path | None = None
        self._updater: Updater | None = None

    @property
    def previous(self) -> Path:
        return self.state.with_name(f".{self.state.name}.previous")

    def bootstrap(self) -> bytes:
        """The highest-version root of the shipped trusted root and the state's (a host shipped with root 1 that
        followed a rotation to root 3 starts from 3; an app updated to ship root 4 starts from 4)."""
        try:
            shipped = root_version(self.trusted_root)
        except ValueError as exc:
            raise TrustedRootError(
                f"{self.root_name} is not TUF root metadata: {exc}",
                problems=[Problem(message="not a signed root.json", file=self.root_name)],
                fix="pass the root.json `scrollcase trust init` wrote (the store's tuf/1.root.json, or a later one)",
            ) from None
        try:
            saved = (self.state / ROOT_LINK).read_bytes()
            return saved if root_version(saved) > shipped else self.trusted_root
        except (OSError, ValueError):  # no state yet, or a damaged one: the shipped root decides
            return self.trusted_root

    def refresh(self) -> None:
        """Root (following rotations), timestamp, snapshot and top-level targets, checked by python-tuf in a copy
        of the state folder.  A TrustError when the store's metadata is refused; StoreError when unreadable."""
        if not files.recover_swap(self.state, self.previous, ROOT_LINK) and self.state.is_dir():
            shutil.rmtree(self.previous, ignore_errors=True)  # a swap killed after its renames: the old copy
        files.remove_stale_temps(self.state)
        self.close()
        bootstrap = self.bootstrap()
        self.state.parent.mkdir(parents=True, exist_ok=True)
        self._work = files.make_temp_dir(self.state)
        if self.state.is_dir():
            shutil.copytree(self.state, self._work, symlinks=True, dirs_exist_ok=True)
        from tuf.ngclient import Updater, UpdaterConfig

        config = UpdaterConfig(prefix_targets_with_hash=False)
        fetcher = store_fetcher(self._remembered)
        with translated(self):
            self._updater = Updater(
                str(self._work), BASE_URL + METADATA_PREFIX, fetcher=fetcher, config=config, bootstrap=bootstrap
            )
            self._updater.refresh()

    def _remembered(self, key: str, max_bytes: int) -> bytes | None:
        self.last_key = key
        return self._read(key, max_bytes)

    def signed(self, key: str) -> Signed:
        """The length and sha256 the targets metadata (the box's delegated role) signs for ``key``."""
        info = self._target(key)
        return Signed(key, info.length, info.hashes.get("sha256", ""))

    def _target(self, key: str) -> TargetFile:
        if self._updater is None:
            self.refresh()
        assert self._updater is not None
        with translated(self):
            info = self._updater.get_targetinfo(key)
        if info is None:
            raise NotSignedError(
                f"refusing {self._url(key)}: no signed targets metadata of {self.store_url} lists {key} "
                "(rule: every object a host reads must be a signed target)",
                problems=[Problem(message="not a signed target", file=self._url(key), key=key)],
                fix="publish it with `scrollcase publish` and the targets key (it signs what it adds), or use "
                "the real store",
            )
        return info

    def check(self, key: str, data: bytes, at: str | None = None) -> None:
        """TargetMismatchError (OversizedError when longer) unless ``data`` (read from the store key ``at``,
        default ``key``) is the signed target ``key``."""
        info = self._target(key)
        self.last_key = at or key
        if len(data) > info.length:
            raise oversized(self._url(at or key), key, info.length)
        with translated(self):
            info.verify_length_and_hashes(data)

    def read(self, key: str, at: str | None = None) -> bytes:
        """The signed target ``key`` read from the store key ``at`` (default ``key``) at most its signed length,
        checked against its length and sha256 before it is returned."""
        info = self.signed(key)
        where = at or key
        data = self._read(where, info.length)
        if data is None:
            raise MissingMetadataError(
                f"refusing {self._url(where)}: it does not exist, although the signed targets list {key}",
                problems=[Problem(message="a signed target missing from the store", file=self._url(where))],
                fix="republish the release with `scrollcase publish`, or use the real store",
            )
        self.check(key, data, where)
        return data

    def read_index(self, key: str) -> bytes:
        """A mutable object (the box index) read only from its content-addressed copy, checked."""
        return self.read(key, consistent_key(key, self.signed(key).sha256))

    def commit(self) -> bool:
        """Put the checked copy in the state folder's place; whether it did (False: another host process swapped
        at the same moment; the state stays a complete earlier one).  Called only once every check passed."""
        work, self._work, self._updater = self._work, None, None
        if work is None:
            return False
        try:
            if self.state.exists():
                files.swap_dir(work, self.state, self.previous)
                shutil.rmtree(self.previous, ignore_errors=True)
            else:
                files.swap_dir(work, self.state)
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
            return False
        return True

    def close(self) -> None:
        """Drop the copy without touching the state (a refusal, or a caller done without committing)."""
        work, self._work, self._updater = self._work, None, None
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)

    def _url(self, key: str) -> str:
        return f"{self.store_url.rstrip('/')}/{key}"


def oversized(url: str, key: str, length: int) -> OversizedError:
    return OversizedError(
        f"refusing {url}: the store sent more than the {length} bytes the signed metadata gives {key} "
        "(rule: endless data; nothing of it was kept)",
        problems=[Problem(message=f"longer than the signed {length} bytes", file=url, key=key)],
        fix="the store (or a mirror/CDN in front of it) serves another object: republish it with "
        "`scrollcase publish`, or use the real store",
    )


@contextlib.contextmanager
def translated(trust: StoreTrust) -> Iterator[None]:
    """python-tuf's refusals as TrustError subclasses: the one place each gets its message and fix."""
    try:
        yield
    except ScrollcaseError:
        raise
    except Exception as exc:
        from tuf.api import exceptions as tuf_errors

        if not isinstance(exc, tuf_errors.RepositoryError | tuf_errors.DownloadError):
            raise
        raise translate(exc, trust.last_key, trust._url(trust.last_key)) from None


def translate(exc: Exception, key: str, url: str) -> TrustError:
    """One python-tuf exception about ``key`` (the metadata file or object read last) as its TrustError."""
    from tuf.api import exceptions as tuf_errors

    detail = str(exc) or type(exc).__name__
    where = [Problem(message=detail, file=url, key=key)]
    if isinstance(exc, tuf_errors.BadVersionNumberError):
        return RollbackError(
            f"refusing {url}: {detail} (rule: rollback; metadata may never be older than the version this host "
            "saw last)",
            problems=where,
            fix="the store or a mirror/CDN in front of it serves old metadata: point the host at the real store "
            "or purge the cache in front of it; a store restored from a backup needs newer versions signed "
            "(`scrollcase trust timestamp`, then `scrollcase publish`)",
        )
    if isinstance(exc, tuf_errors.ExpiredMetadataError):
        return ExpiredError(
            f"refusing {url}: {detail} (rule: freeze; a host never trusts expired metadata)",
            problems=where,
            fix="the timestamp must be re-signed before it expires: run `scrollcase trust timestamp` (the "
            "scheduled workflow does it daily), or `scrollcase publish`; a mirror serving old copies "
            "must be refreshed",
        )
    if isinstance(exc, tuf_errors.UnsignedMetadataError):
        return UnsignedError(
            f"refusing {url}: {detail} (rule: every metadata file must be signed by the threshold of its role's "
            "keys that the trusted root names)",
            problems=where,
            fix="it was signed with a key the trusted root does not name: sign with the role's key "
            "(--keys / SCROLLCASE_TUF_*_KEY), or rotate the root (`scrollcase trust`) so hosts follow",
        )
    if isinstance(exc, tuf_errors.DownloadLengthMismatchError):
        return OversizedError(
            f"refusing {url}: {detail} (rule: endless data; no file is read beyond its signed or maximum length)",
            problems=where,
            fix="the store (or something between it and this host) serves another file: use the real store",
        )
    if isinstance(exc, tuf_errors.LengthOrHashMismatchError):
        return TargetMismatchError(
            f"refusing {url}: {detail} (rule: an object's length and sha256 must be the signed ones; a repacked "
            "or replaced object, or one mixed from another release)",
            problems=where,
            fix="the store's object is not the one that was signed: republish the release with "
            "`scrollcase publish`, or use the real store",
        )
    if isinstance(exc, tuf_errors.DownloadHTTPError) and exc.status_code == 404:
        return MissingMetadataError(
            f"refusing {url}: it does not exist, and a host given a trusted root reads only signed stores "
            "(rule: no signed metadata, nothing trusted)",
            problems=where,
            fix="sign the store (`scrollcase trust init`, then `scrollcase publish`), or install without "
            "--trusted-root (nothing is verified against signed metadata then)",
        )
    return TrustError(
        f"refusing {url}: {detail}",
        problems=where,
        fix="the store's signed metadata is inconsistent: re-sign it with `scrollcase publish` / "
        "`scrollcase trust`, or use the real store",
    )
