"""Signed store metadata through the real CLI (#34, the repository side): `scrollcase trust init` adopts a store
that already holds the demo's release, `publish` signs each release it adds (keys from --keys or the environment),
and python-tuf's own ngclient Updater — a real TUF client with its own fetcher over the store's objects — finds
the index (at its hash-prefixed key), the manifests and the archives with the lengths and hashes the store holds.
On a directory store and on S3 (SeaweedFS on 127.0.0.1); racing publishes; root rotation and a lost timestamp key
replaced, each through the CLI."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from tuf.api.exceptions import DownloadHTTPError
from tuf.ngclient import Updater, UpdaterConfig
from tuf.ngclient.fetcher import FetcherInterface

from scrollcase.format.release import ReleaseManifest, load_release
from scrollcase.io.digest import sha256_bytes
from tests.support.releases import SyntheticRelease, write_release
from tests.support.s3servers import S3Server, s3_client
from tests.support.tools import run_isolated

BASE = "https://store.invalid/"  # what the client's URLs start with; its fetcher maps them to store keys
DEMO_BOX = "scrollcase-demo"
KEY_ENV = ("SCROLLCASE_TUF_TARGETS_KEY", "SCROLLCASE_TUF_SNAPSHOT_KEY", "SCROLLCASE_TUF_TIMESTAMP_KEY")


@dataclass
class StoreUnderTest:
    location: str  # --store / --to
    options: list[str]  # --endpoint-url for S3
    env: dict[str, str]
    read: Callable[[str], bytes | None]
    listing: Callable[[], set[str]]
    work: Path
    cli_log: list[str] = field(default_factory=list)

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Any:
        done = run_isolated(*args, *self.options, cwd=self.work, env={**self.env, **(env or {})})
        self.cli_log.append(f"$ {' '.join(args)} -> {done.returncode}\n{done.stderr}")
        return done

    def publish(self, manifest: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
        return self.cli("publish", str(manifest), "--to", self.location, "--json", *extra, env=env)

    def trust(self, action: str, *extra: str, env: dict[str, str] | None = None) -> Any:
        return self.cli("trust", action, "--store", self.location, "--json", *extra, env=env)


@pytest.fixture(params=["directory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreUnderTest]:
    if request.param == "directory":
        root = tmp_path / "store"

        def read_file(key: str) -> bytes | None:
            path = root / key
            return path.read_bytes() if path.is_file() else None

        def list_files() -> set[str]:
            return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.exists() else set()

        yield StoreUnderTest(str(root), [], {}, read_file, list_files, tmp_path)
        return
    weed: S3Server = request.getfixturevalue("weed")
    bucket: str = request.getfixturevalue("weed_bucket")
    client = s3_client(weed)

    def read_object(key: str) -> bytes | None:
        try:
            return bytes(client.get_object(Bucket=bucket, Key=f"boxes-prod/{key}")["Body"].read())
        except client.exceptions.NoSuchKey:
            return None

    def list_objects() -> set[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="boxes-prod/")
        return {o["Key"].removeprefix("boxes-prod/") for page in pages for o in page.get("Contents", [])}

    options = ["--endpoint-url", weed.endpoint]
    yield StoreUnderTest(
        f"s3://{bucket}/boxes-prod", options, weed.credentials_env(), read_object, list_objects, tmp_path
    )


class StoreFetcher(FetcherInterface):
    """python-tuf's fetcher interface over the store's objects (what a CDN in front of it would serve)."""

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self.read = read

    def _fetch(self, url: str) -> Iterator[bytes]:
        key = unquote(urlparse(url).path).lstrip("/")
        data = self.read(key)
        if data is None:
            raise DownloadHTTPError(f"{key} not found", 404)
        return iter([data])


def updater(store: StoreUnderTest, state: Path, root: bytes | None, *, hashed: bool = True) -> Updater:
    state.mkdir(exist_ok=True)
    (state / "dl").mkdir(exist_ok=True)
    config = UpdaterConfig(prefix_targets_with_hash=hashed)
    fetcher = StoreFetcher(store.read)
    return Updater(str(state), f"{BASE}tuf/", str(state / "dl"), BASE, fetcher, config, bootstrap=root)


def check_release(store: StoreUnderTest, state: Path, root: bytes | None, manifest: ReleaseManifest) -> None:
    """A TUF client trusting ``root`` (None: the state's) finds the box's index at its hash-prefixed key with
    the store's bytes, and the release's manifest and archive signed with their real lengths and sha256."""
    client = updater(store, state, root)
    client.refresh()
    index_key = f"boxes/{manifest.boxId}/index.json"
    index = store.read(index_key)
    assert index is not None
    info = client.get_targetinfo(index_key)
    assert info is not None and (info.length, info.hashes["sha256"]) == (len(index), sha256_bytes(index))
    assert Path(client.download_target(info)).read_bytes() == index  # fetched from <sha256>.index.json
    assert store.read(f"boxes/{manifest.boxId}/{sha256_bytes(index)}.index.json") == index
    plain = updater(store, state, None, hashed=False)  # immutable objects: read at their plain keys
    plain.refresh()
    for key in (manifest.keys.release, manifest.keys.archive, manifest.keys.sha256):
        data = store.read(key)
        signed = plain.get_targetinfo(key)
        assert data is not None and signed is not None, key
        assert (signed.length, signed.hashes) == (len(data), {"sha256": sha256_bytes(data)}), key
        assert Path(plain.download_target(signed, str(state / "dl" / Path(key).name))).read_bytes() == data
    assert json.loads(index)["versions"][manifest.version][manifest.targetId]["sha256"] == manifest.archive.sha256


def demo_release(demo_workspace: Path) -> Path:
    (manifest,) = (demo_workspace / ".scrollcase" / "dist").glob("*.release.json")
    return manifest


def synthetic(tmp_path: Path, box_id: str, version: str) -> SyntheticRelease:
    return write_release(tmp_path / f"{box_id}-{version}", box_id=box_id, version=version, sbom=b'{"bomFormat": "x"}\n')


def key_env(keys: Path, roles: tuple[str, ...] = ("targets", "snapshot", "timestamp")) -> dict[str, str]:
    return {f"SCROLLCASE_TUF_{role.upper()}_KEY": (keys / f"{role}.pem").read_text() for role in roles}


@pytest.mark.slow
def test_init_adopts_the_store_publish_signs_and_a_tuf_client_finds_every_target(
    store: StoreUnderTest, demo_workspace: Path, tmp_path: Path
) -> None:
    demo = demo_release(demo_workspace)
    assert store.publish(demo).returncode == 0, store.cli_log
    unsigned = json.loads(store.publish(demo).stdout)
    assert unsigned["storeSigned"] is False and unsigned["signedMetadata"] == []
    assert not any(key.startswith("tuf/") for key in store.listing())  # a store without tuf/ stays without

    keys = tmp_path / "keys"
    init = store.trust("init", "--keys", str(keys))
    assert init.returncode == 0, store.cli_log
    result = json.loads(init.stdout)
    assert result["boxes"] == [DEMO_BOX] and result["keysGenerated"] == ["root", "targets", "snapshot", "timestamp"]
    assert (keys / "root.json").read_bytes() == store.read("tuf/1.root.json")
    trusted_root = (keys / "root.json").read_bytes()
    check_release(store, tmp_path / "host", trusted_root, load_release(demo))  # adopted: signed by init

    second, other = synthetic(tmp_path, DEMO_BOX, "1.1.0"), synthetic(tmp_path, "other-box", "0.1.0")
    before = store.listing()
    refused = store.publish(second.manifest_path)
    assert refused.returncode == 13, store.cli_log
    assert all(variable in refused.stderr for variable in KEY_ENV)
    assert store.listing() == before  # refused before anything was uploaded

    by_env = store.publish(second.manifest_path, env=key_env(keys))
    assert by_env.returncode == 0, store.cli_log
    written = json.loads(by_env.stdout)["signedMetadata"]
    assert written[1:] == ["tuf/2.box.scrollcase-demo.json", "tuf/3.snapshot.json", "tuf/timestamp.json"]
    by_folder = store.publish(other.manifest_path, "--keys", str(keys))
    assert by_folder.returncode == 0, store.cli_log
    assert "tuf/3.targets.json" in json.loads(by_folder.stdout)["signedMetadata"]  # the new box is delegated

    for manifest in (load_release(demo), second.manifest, other.manifest):
        check_release(store, tmp_path / "host", None, manifest)
    status = json.loads(store.trust("status").stdout)
    assert status["timestamp"]["version"] == 4 and set(status["boxes"]) == {DEMO_BOX, "other-box"}
    assert status["root"]["consistentSnapshot"] is True and not status["timestamp"]["expired"]


@pytest.mark.slow
def test_racing_publishes_all_end_in_the_signed_state(store: StoreUnderTest, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert store.trust("init", "--keys", str(keys)).returncode == 0, store.cli_log
    releases = [synthetic(tmp_path, DEMO_BOX, f"1.{n}.0") for n in range(3)] + [synthetic(tmp_path, "b", "1.0.0")]
    results: dict[str, int] = {}
    start = threading.Barrier(len(releases))

    def run(release: SyntheticRelease) -> None:
        start.wait()
        results[release.manifest.version + release.manifest.boxId] = store.publish(
            release.manifest_path, "--keys", str(keys)
        ).returncode

    threads = [threading.Thread(target=run, args=(release,)) for release in releases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(results.values()) == {0}, store.cli_log
    root = (keys / "root.json").read_bytes()
    for release in releases:  # whoever signed last signed on top of every other publisher's index and roles
        check_release(store, tmp_path / "host", root, release.manifest)
        root = None


@pytest.mark.slow
def test_rotating_the_root_and_replacing_a_lost_timestamp_key(store: StoreUnderTest, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    first = synthetic(tmp_path, DEMO_BOX, "1.0.0")
    assert store.trust("init", "--keys", str(keys)).returncode == 0, store.cli_log
    assert store.publish(first.manifest_path, "--keys", str(keys)).returncode == 0, store.cli_log
    shipped = (keys / "root.json").read_bytes()
    check_release(store, tmp_path / "host", shipped, first.manifest)  # the host trusts root 1 and timestamp N

    rotated = store.trust("rotate", "--keys", str(keys), "--role", "root", "--new-key", str(tmp_path / "root2.pem"))
    assert rotated.returncode == 0, store.cli_log
    assert json.loads(rotated.stdout)["written"] == ["tuf/2.root.json"]
    shutil.copy(tmp_path / "root2.pem", keys / "root.pem")  # the new offline root key replaces the old one

    lost = keys / "timestamp.pem"
    old_timestamp = {"SCROLLCASE_TUF_TIMESTAMP_KEY": lost.read_text()}
    lost.unlink()
    new_key = tmp_path / "timestamp-2.pem"
    recovered = store.trust("rotate", "--keys", str(keys), "--role", "timestamp", "--new-key", str(new_key))
    assert recovered.returncode == 0, store.cli_log
    assert json.loads(recovered.stdout)["written"] == ["tuf/3.root.json", "tuf/timestamp.json"]

    second = synthetic(tmp_path, DEMO_BOX, "1.1.0")
    stale = store.publish(second.manifest_path, "--keys", str(keys), env=old_timestamp)
    assert stale.returncode == 13 and "timestamp" in stale.stderr, store.cli_log
    new_env = {"SCROLLCASE_TUF_TIMESTAMP_KEY": new_key.read_text()}
    assert store.publish(second.manifest_path, "--keys", str(keys), env=new_env).returncode == 0, store.cli_log
    assert store.trust("timestamp", "--keys", str(keys), env=new_env).returncode == 0, store.cli_log
    # The host that trusted root 1 walks 1 -> 2 -> 3, accepts the new timestamp key, finds both releases.
    check_release(store, tmp_path / "host", None, second.manifest)
    check_release(store, tmp_path / "host", None, first.manifest)
    client = updater(store, tmp_path / "host", None)
    client.refresh()
    assert json.loads((tmp_path / "host" / "root.json").read_bytes())["signed"]["version"] == 3


@pytest.mark.slow
def test_scrollcase_install_trusts_what_publish_signed(demo_workspace: Path, tmp_path: Path) -> None:
    """The two halves together: the demo's release published and signed by the CLI installs with
    `install --trusted-root keys/root.json`; the same store with its manifest edited is refused (exit 13)."""
    store, keys, cache = tmp_path / "store", tmp_path / "keys", {"SCROLLCASE_CACHE_DIR": str(tmp_path / "cache")}
    demo = demo_release(demo_workspace)
    assert run_isolated("trust", "init", "--store", str(store), "--keys", str(keys), cwd=tmp_path).returncode == 0
    signed = run_isolated("publish", str(demo), "--to", str(store), "--keys", str(keys), cwd=tmp_path)
    assert signed.returncode == 0, signed.stderr
    install = ["install", "--box", DEMO_BOX, "--store", str(store), "--trusted-root", str(keys / "root.json")]
    done = run_isolated(
        *install, "--trust-state", str(tmp_path / "state"), str(tmp_path / "dest"), cwd=tmp_path, env=cache
    )
    assert done.returncode == 0, done.stderr
    manifest = store / load_release(demo).keys.release
    manifest.write_bytes(manifest.read_bytes().replace(b'"minRamGb": ', b'"minRamGb":  '))
    refused = run_isolated(
        *install, "--trust-state", str(tmp_path / "state"), str(tmp_path / "d2"), cwd=tmp_path, env=cache
    )
    assert refused.returncode == 13 and load_release(demo).keys.release in refused.stderr, refused.stderr
    assert not (tmp_path / "d2").exists()
