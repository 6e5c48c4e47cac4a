"""The client's side of signed store metadata: the trusted root a host passes, turned into the
:class:`~scrollcase.trust.verify.StoreTrust` that install, upgrade and ``list_releases`` read the index and the
release manifest through, and the archive's facts compared with its signed target before a byte of it is
downloaded (docs/install.md#signed-store-metadata).

Without a trusted root nothing changes but one warning line: the store's objects are checked against each other
(index -> manifest -> archive), not against signed metadata.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from scrollcase.errors import Problem, UsageError
from scrollcase.format.release import ReleaseManifest
from scrollcase.io.files import ReadErrors, read_bytes
from scrollcase.progress import Emit
from scrollcase.store.base import ReadableStore
from scrollcase.trust.verify import Reader, StoreTrust, TargetMismatchError, default_state_dir

TRUSTED_ROOT_ENV = "SCROLLCASE_TRUSTED_ROOT"
UNVERIFIED = (
    "warning: {store}'s objects are not verified against signed metadata (no trusted root: pass "
    "--trusted-root or set $SCROLLCASE_TRUSTED_ROOT); only their digests, which the store itself serves, are checked"
)
_READ_ROOT = ReadErrors(UsageError, missing_fix="pass the root.json `scrollcase trust init` wrote (--trusted-root)")

TrustedRoot = bytes | Path | str  # the root's bytes, or the file that holds them


def store_reader(store: ReadableStore) -> Reader:
    """``read(key, max_bytes)`` over ``store``: its small-document read (bounded by the store's document limit
    and deadline); StoreTrust refuses whatever comes back beyond ``max_bytes``."""

    def read(key: str, max_bytes: int) -> bytes | None:
        blob = store.get_bytes(key)
        return None if blob is None else blob.data

    return read


def root_bytes(trusted_root: TrustedRoot) -> tuple[bytes, str]:
    """The trusted root's bytes and how to name it in messages."""
    if isinstance(trusted_root, bytes):
        return trusted_root, "the trusted root"
    path = Path(trusted_root)
    return read_bytes(path, _READ_ROOT, str(path)), str(path)


def trusted_root_option(option: Path | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """--trusted-root, else $SCROLLCASE_TRUSTED_ROOT (an empty value: none)."""
    env = os.environ if environ is None else environ
    return option if option is not None else (Path(env[TRUSTED_ROOT_ENV]) if env.get(TRUSTED_ROOT_ENV) else None)


@contextmanager
def trusting(
    store: ReadableStore, trusted_root: TrustedRoot | None, state: Path | str | None, progress: Emit
) -> Iterator[StoreTrust | None]:
    """The check of ``store`` against its signed metadata (None, with the warning, without a trusted root); its
    copy of the trusted state dropped at the end unless the caller committed it."""
    if trusted_root is None:
        progress(UNVERIFIED.format(store=store.url))
        yield None
        return
    data, name = root_bytes(trusted_root)
    folder = Path(state) if state is not None else default_state_dir(store.url)
    trust = StoreTrust(data, folder, store_reader(store), store.url, name)
    try:
        yield trust
    finally:
        trust.close()


def check_signed_archive(trust: StoreTrust, manifest: ReleaseManifest, url: str) -> None:
    """TargetMismatchError unless the manifest's archive size and sha256 are the signed archive target's, before
    a byte of the archive is downloaded (the download is then held to that size and digest)."""
    key = manifest.keys.archive
    signed = trust.signed(key)
    info = manifest.archive
    pairs = (("archive.size", info.size, signed.length), ("archive.sha256", info.sha256, signed.sha256))
    problems = [
        Problem(message=f"the manifest says {found}, the signed target {want}", file=url, key=field)
        for field, found, want in pairs
        if found != want
    ]
    if problems:
        raise TargetMismatchError(
            f"refusing {url}: its archive {key} is not the signed target (rule: an object's length and sha256 must "
            "be the signed ones); nothing was downloaded",
            problems=problems,
            fix="the release manifest and the signed metadata disagree: republish the release with "
            "`scrollcase publish`, or use the real store",
        )
