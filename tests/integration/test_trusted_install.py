"""Install and upgrade with ``--trusted-root`` against each attack TUF exists for, on real stores: a directory
store, S3 on 127.0.0.1 (moto), and the directory store served by a static HTTP server on 127.0.0.1 (a CDN's
part), signed by the real ``scrollcase trust init`` and ``scrollcase publish --keys``, the host the real CLI in
a subprocess.  Releases: the demo box (built once per session, ``demo_workspace``) as 1.0.0 and a repack of it
as 1.0.1.  Each attack is refused with its TrustError subclass (exit 13) and message, DEST absent and the host's
trusted state byte for byte as before; the controls show the same store accepted without ``--trusted-root``
(the attack is real) or with it before the attack (the store is sound)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest
from securesystemslib.signer import CryptoSigner
from tuf.api.metadata import Metadata, Timestamp

from scrollcase.format.release import ReleaseManifest, dump_release, load_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.index import index_key
from scrollcase.trust.keys import load_keys
from tests.support.httpstore import serve
from tests.support.repack import repack
from tests.support.s3servers import S3Server, s3_client
from tests.support.tufstore import tree_digest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the demo runs on Linux")

ROOT = Path(__file__).resolve().parents[2]
BOX = "scrollcase-demo"
PLANTED = "venv/lib/python3.11/site-packages/zz_planted.pth"


@dataclass(frozen=True)
class Releases:
    v1: Path  # the demo's release manifest (archive and SBOM beside it)
    v2: Path  # 1.0.1, a repack of it
    planted: Path  # 1.0.1 repacked again with a .pth planted: the attacker's


@pytest.fixture(scope="module")
def releases(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    (v1,) = (demo_workspace / ".scrollcase" / "dist").glob("*.release.json")
    work = tmp_path_factory.mktemp("trusted-releases")
    repack(v1, work / "v2", version="1.0.1")
    (v2,) = (work / "v2" / "dist").glob("*.release.json")
    repack(v2, work / "planted", plant={PLANTED: b"import os; os.environ['PLANTED'] = '1'\n"})
    (planted,) = (work / "planted" / "dist").glob("*.release.json")
    return Releases(v1, v2, planted)


class Side(Protocol):
    """The store as an attacker with write access (or a mirror) sees it: objects by key."""

    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, data: bytes) -> None: ...
    def keys(self, prefix: str) -> list[str]: ...


@dataclass(frozen=True)
class DirSide:
    root: Path

    def get(self, key: str) -> bytes | None:
        path = self.root / key
        return path.read_bytes() if path.is_file() else None

    def put(self, key: str, data: bytes) -> None:
        (self.root / key).parent.mkdir(parents=True, exist_ok=True)
        (self.root / key).write_bytes(data)

    def keys(self, prefix: str) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in (self.root / prefix).rglob("*") if p.is_file())


@dataclass(frozen=True)
class S3Side:
    client: Any
    bucket: str
    prefix: str = "boxes-store/"

    def get(self, key: str) -> bytes | None:
        try:
            return bytes(self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read())
        except self.client.exceptions.NoSuchKey:
            return None

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + prefix)
        return sorted(item["Key"].removeprefix(self.prefix) for page in pages for item in page.get("Contents", []))


@dataclass
class Signed:
    """A signed store as published, and the host that installs from it."""

    store: str
    side: Side
    keys: Path
    host: Path
    env: dict[str, str]
    endpoint: list[str] = field(default_factory=list)
    after_v1: dict[str, bytes] = field(default_factory=dict)  # tuf/ and the index as they were after 1.0.0
    read_url: str | None = None  # where hosts read the store, when not where it is written (a static HTTP server)

    @property
    def root(self) -> Path:
        return self.keys / "root.json"

    @property
    def state(self) -> Path:
        return self.host / "trust-state"

    def cli(self, *args: str) -> tuple[int, dict[str, Any], str]:
        done = subprocess.run(
            [sys.executable, "-m", "scrollcase", *args],
            env=self.env,
            cwd=self.host,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        out = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
        return done.returncode, out, done.stderr

    def admin(self, *args: str, option: str = "--store") -> None:
        """A publisher's command (trust, publish) against the store; it must succeed."""
        code, out, err = self.cli(*args, option, self.store, *self.endpoint)
        assert code == 0, (args, out, err)

    def publish(self, manifest: Path) -> None:
        self.admin("publish", "--keys", str(self.keys), str(manifest), option="--to")

    def install(self, dest: str | None = "dest", *extra: str, trusted: bool = True) -> tuple[int, dict[str, Any], str]:
        trust = ["--trusted-root", str(self.root), "--trust-state", str(self.state)] if trusted else []
        where = ["--store", self.read_url or self.store, *self.endpoint, "--box", BOX]
        return self.cli("install", "--json", "--skip-gpu-check", *where, *trust, *extra, *([dest] if dest else []))

    def upgrade(self, dest: str = "dest", *extra: str) -> tuple[int, dict[str, Any], str]:
        trust = ["--trusted-root", str(self.root), "--trust-state", str(self.state)]
        store = ["--store", self.read_url or self.store, *self.endpoint]
        return self.cli("upgrade", "--json", *store, *trust, *extra, dest)

    def seen(self) -> str:
        """The host saw the store as it is now (``install --list`` saves the trusted state); the state's digest."""
        code, out, err = self.install(None, "--list")
        assert code == 0, (out, err)
        return tree_digest(self.state)

    def metadata(self, role: str) -> tuple[str, Metadata[Any]]:
        """The store's current metadata of ``role`` (timestamp, or the version the timestamp/snapshot name)."""
        stamp = Metadata[Timestamp].from_bytes(self.side.get("tuf/timestamp.json") or b"")
        if role == "timestamp":
            return "tuf/timestamp.json", stamp
        key = f"tuf/{stamp.signed.snapshot_meta.version}.snapshot.json"
        return key, Metadata.from_bytes(self.side.get(key) or b"")

    def signer(self, role: str) -> CryptoSigner:
        signers = load_keys(self.keys, {}, [role]).of(role)
        return signers[0]


def host_env(host: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SCROLLCASE_"))}
    return env | {"PYTHONPATH": str(ROOT), "SCROLLCASE_CACHE_DIR": str(host / "cache")} | (extra or {})


@pytest.fixture(params=["dir", "s3", "http"])
def signed(request: pytest.FixtureRequest, tmp_path: Path, releases: Releases) -> Iterator[Signed]:
    """An empty store set up by ``scrollcase trust init``, then 1.0.0 and 1.0.1 published with the keys; ``http``:
    the directory store read by hosts through a static HTTP server on 127.0.0.1 (a CDN's part)."""
    host = tmp_path / "host"
    host.mkdir()
    if request.param in ("dir", "http"):
        store = tmp_path / "store"
        store.mkdir()
        made = Signed(str(store), DirSide(store), tmp_path / "keys", host, host_env(host))
        if request.param == "dir":
            yield from _initialised(made, releases)
            return
        with serve(store) as web:
            made.read_url = web.url
            yield from _initialised(made, releases)
        return
    server: S3Server = request.getfixturevalue("moto_s3")
    bucket = request.getfixturevalue("moto_bucket")
    side = S3Side(s3_client(server), bucket)
    env = host_env(host, server.credentials_env())
    made = Signed(f"s3://{bucket}/boxes-store", side, tmp_path / "keys", host, env, ["--endpoint-url", server.endpoint])
    yield from _initialised(made, releases)


def _initialised(made: Signed, releases: Releases) -> Iterator[Signed]:
    made.admin("trust", "init", "--keys", str(made.keys))
    made.publish(releases.v1)
    for key in [*made.side.keys("tuf/"), index_key(BOX)]:
        made.after_v1[key] = made.side.get(key) or b""
    made.publish(releases.v2)
    yield made


def plant(side: Side, manifest: ReleaseManifest, archive: Path) -> None:
    """The repacked release written over the store's: archive, sidecar, manifest and the index entry (its plain key
    and every hashed copy) rewritten consistently, as an attacker with write access would; ``tuf/`` untouched."""
    keys = manifest.keys
    data = dump_release(manifest)
    side.put(keys.archive, archive.read_bytes())
    side.put(keys.release, data)
    side.put(keys.sha256, f"{manifest.archive.sha256}  {manifest.archive.name}\n".encode())
    index = json.loads(side.get(index_key(BOX)) or b"")
    entry = index["versions"][manifest.version][manifest.targetId]
    entry |= {"sha256": manifest.archive.sha256, "size": manifest.archive.size, "releaseSha256": sha256_bytes(data)}
    text = json.dumps(index).encode()
    for key in side.keys(f"boxes/{BOX}/"):
        if key.endswith("index.json"):
            side.put(key, text)


def refused(signed: Signed, kind: str, *fragments: str, before: str | None) -> dict[str, Any]:
    """The install is refused with ``kind`` (exit 13) naming ``fragments``, DEST absent, the state as ``before``."""
    code, error, stderr = signed.install()
    assert (code, error.get("error")) == (13, kind), (error, stderr)
    for fragment in fragments:
        assert fragment in error["message"], error
    assert error["fix"], error
    assert not (signed.host / "dest").exists()
    assert (tree_digest(signed.state) if signed.state.exists() else None) == before
    return error


# --- the store as published is sound -----------------------------------------------------------------------


def test_a_signed_store_installs_with_the_trusted_root(signed: Signed) -> None:
    code, out, stderr = signed.install()
    assert code == 0, (out, stderr)
    assert out["version"] == "1.0.1"
    assert "signed metadata of" in stderr and "verified" in stderr
    assert "not verified against signed metadata" not in stderr
    assert (signed.state / "timestamp.json").read_bytes() == signed.side.get("tuf/timestamp.json")
    assert (signed.state / f"box.{BOX}.json").is_file()


# --- the attacks ------------------------------------------------------------------------------------------


def test_a_repacked_archive_with_consistent_digests_is_refused(signed: Signed, releases: Releases) -> None:
    before = signed.seen()
    planted = load_release(releases.planted)
    plant(signed.side, planted, releases.planted.with_name(planted.archive.name))
    refused(signed, "TargetMismatchError", f"boxes/{BOX}/", ".index.json", "length and sha256", before=before)
    # the control: without the trusted root the same store installs the planted file
    code, out, stderr = signed.install("control", trusted=False)
    assert code == 0, (out, stderr)
    assert (signed.host / "control" / PLANTED).is_file()
    assert "not verified against signed metadata" in stderr


def test_a_rolled_back_timestamp_and_snapshot_are_refused(signed: Signed) -> None:
    before = signed.seen()
    for key, data in signed.after_v1.items():  # the store as it was before 1.0.1, every file genuinely signed
        signed.side.put(key, data)
    refused(signed, "RollbackError", "tuf/timestamp.json", "rollback", before=before)
    # the control: a host that never saw the newer metadata accepts that older store (it is genuinely signed)
    shutil.rmtree(signed.state)
    code, out, stderr = signed.install()
    assert code == 0 and out["version"] == "1.0.0", (out, stderr)


def test_a_snapshot_older_than_the_one_seen_is_refused(signed: Signed) -> None:
    """The timestamp key alone (compromised) signs a new timestamp naming an older snapshot."""
    before = signed.seen()
    key, stamp = signed.metadata("timestamp")
    meta = stamp.signed.snapshot_meta
    older = signed.side.get(f"tuf/{meta.version - 1}.snapshot.json")
    assert older is not None
    meta.version -= 1
    meta.length, meta.hashes = len(older), {"sha256": sha256_bytes(older)}
    stamp.signed.version += 1
    stamp.signatures.clear()
    stamp.sign(signed.signer("timestamp"))
    signed.side.put(key, stamp.to_bytes())
    refused(signed, "RollbackError", "snapshot", "rollback", before=before)


def test_an_expired_timestamp_is_refused_as_a_freeze(signed: Signed) -> None:
    before = signed.seen()
    key, stamp = signed.metadata("timestamp")
    stamp.signed.version += 1
    stamp.signed.expires = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    stamp.signatures.clear()
    stamp.sign(signed.signer("timestamp"))
    signed.side.put(key, stamp.to_bytes())
    error = refused(signed, "ExpiredError", "tuf/timestamp.json", "freeze", before=before)
    assert "scrollcase trust timestamp" in error["fix"]


def test_an_index_and_a_manifest_of_two_releases_are_refused(signed: Signed, releases: Releases) -> None:
    before = signed.seen()
    v1, v2 = load_release(releases.v1), load_release(releases.v2)
    signed.side.put(v2.keys.release, dump_release(v1))  # 1.0.0's manifest where the index lists 1.0.1's
    refused(signed, "TargetMismatchError", v2.keys.release, before=before)


def test_yesterdays_index_beside_todays_metadata_is_refused(signed: Signed) -> None:
    before = signed.seen()
    copies = [k for k in signed.side.keys(f"boxes/{BOX}/") if k.endswith(".index.json") and k != index_key(BOX)]
    current = f"boxes/{BOX}/{sha256_bytes(signed.side.get(index_key(BOX)) or b'')}.index.json"
    (older,) = [k for k in copies if k != current]  # 1.0.0's index, published before 1.0.1
    signed.side.put(current, signed.side.get(older) or b"")
    refused(signed, "TargetMismatchError", current, before=before)


def test_a_target_longer_than_signed_is_refused_as_endless_data(signed: Signed, releases: Releases) -> None:
    before = signed.seen()
    v2 = load_release(releases.v2)
    data = signed.side.get(v2.keys.release) or b""
    signed.side.put(v2.keys.release, data + b" " * 5_000_000)  # still the same JSON document
    refused(signed, "OversizedError", v2.keys.release, f"more than the {len(data)} bytes", before=before)


def test_an_archive_longer_than_signed_is_cut_off_at_its_signed_length(signed: Signed, releases: Releases) -> None:
    """The metadata and manifest are genuine, so the host's state advances to them; the archive's download is held
    to the signed size (the manifest's, checked equal to the signed target's) and refused as the store's archive
    disagreeing with its manifest (exit 8), before its first byte is written (the store says its size)."""
    v2 = load_release(releases.v2)
    archive = releases.v2.with_name(v2.archive.name).read_bytes()
    signed.side.put(v2.keys.archive, archive + b"\0" * 1_000_000)
    code, error, stderr = signed.install()
    assert (code, error.get("error")) == (8, "IntegrityError"), (error, stderr)
    assert f"the release manifest says {v2.archive.size}" in error["message"], error
    assert not (signed.host / "dest").exists()


def test_metadata_signed_by_the_wrong_key_is_refused(signed: Signed) -> None:
    before = signed.seen()
    key, stamp = signed.metadata("timestamp")
    stamp.signed.version += 1
    stamp.signatures.clear()
    stamp.sign(CryptoSigner.generate_ed25519())
    signed.side.put(key, stamp.to_bytes())
    refused(signed, "UnsignedError", "tuf/timestamp.json", "threshold", before=before)


# --- keys replaced --------------------------------------------------------------------------------------


def test_the_host_shipped_with_root_1_follows_a_key_rotation(signed: Signed) -> None:
    shipped = signed.root.read_bytes()
    keys = str(signed.keys)
    signed.admin("trust", "rotate", "--keys", keys, "--role", "root", "--new-key", str(signed.keys / "root-new.pem"))
    (signed.keys / "root-new.pem").replace(signed.keys / "root.pem")
    signed.admin("trust", "rotate", "--keys", keys, "--role", "targets", "--new-key", str(signed.keys / "t-new.pem"))
    (signed.keys / "t-new.pem").replace(signed.keys / "targets.pem")
    (signed.host / "root-1.json").write_bytes(shipped)
    code, out, stderr = signed.cli(
        "install", "--json", "--skip-gpu-check", "--store", signed.read_url or signed.store, *signed.endpoint,
        "--box", BOX, "--trusted-root", str(signed.host / "root-1.json"), "--trust-state", str(signed.state), "dest",
    )  # fmt: skip
    assert code == 0, (out, stderr)
    saved = Metadata.from_bytes((signed.state / "root.json").read_bytes())
    assert saved.signed.version == 3


def test_the_host_follows_a_lost_timestamp_key_recovery(signed: Signed) -> None:
    signed.seen()
    lost = signed.signer("timestamp")
    new_key = signed.keys / "timestamp-new.pem"
    signed.admin("trust", "rotate", "--keys", str(signed.keys), "--role", "timestamp", "--new-key", str(new_key))
    new_key.replace(signed.keys / "timestamp.pem")
    code, out, stderr = signed.install()
    assert code == 0, (out, stderr)
    # whoever holds the lost key can no longer sign a timestamp the host accepts
    key, stamp = signed.metadata("timestamp")
    stamp.signed.version += 1
    stamp.signatures.clear()
    stamp.sign(lost)
    signed.side.put(key, stamp.to_bytes())
    shutil.rmtree(signed.host / "dest")
    refused(signed, "UnsignedError", "tuf/timestamp.json", before=tree_digest(signed.state))


def test_an_upgrade_checks_the_signed_metadata(signed: Signed) -> None:
    code, out, stderr = signed.install("dest", "--version", "1.0.0")
    assert code == 0, (out, stderr)
    code, out, stderr = signed.upgrade()
    assert code == 0 and out["to"] == "1.0.1", (out, stderr)


# --- stores without metadata -----------------------------------------------------------------------------


def test_a_store_without_metadata(tmp_path: Path, demo_workspace: Path) -> None:
    """Without --trusted-root it installs as before, with one warning line; with one, exit 13 and nothing
    installed (the root is a real one: another store's, set up by trust init)."""
    host = tmp_path / "host"
    host.mkdir()
    store = demo_workspace / ".scrollcase" / "store"  # the demo's own store: published without keys
    unsigned = Signed(str(store), DirSide(store), tmp_path / "keys", host, host_env(host))
    other = Signed(str(tmp_path / "other"), DirSide(tmp_path / "other"), tmp_path / "keys", host, host_env(host))
    other.admin("trust", "init", "--keys", str(other.keys))
    code, error, stderr = unsigned.install()
    assert (code, error.get("error")) == (13, "MissingMetadataError"), (error, stderr)
    assert "tuf/timestamp.json" in error["message"] and "scrollcase trust init" in error["fix"]
    assert not (host / "dest").exists() and not unsigned.state.exists()
    code, out, stderr = unsigned.install(trusted=False)
    assert code == 0, (out, stderr)
    assert stderr.count("not verified against signed metadata") == 1
