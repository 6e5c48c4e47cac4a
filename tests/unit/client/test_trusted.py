"""client/trusted.py and the library calls with ``trusted_root=``: a small release published by the real publish
to a directory store set up by the real signing (store/signing.py), installed with install_box in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.client.install import install_box, list_releases
from scrollcase.client.trusted import UNVERIFIED, check_signed_archive, store_reader, trusted_root_option
from scrollcase.errors import UsageError
from scrollcase.format.release import dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.signing import init_store
from scrollcase.trust.keys import generate_keys
from scrollcase.trust.verify import MissingMetadataError, StoreTrust, TargetMismatchError, default_state_dir
from tests.support.releases import SyntheticRelease, write_release


@pytest.fixture
def signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalStore, bytes, SyntheticRelease]:
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    store = LocalStore(tmp_path / "store")
    keys = generate_keys(tmp_path / "keys")
    init_store(store, keys, [])
    release = write_release(tmp_path / "dist", cuda=None)
    publish(store, release.manifest, release.archive_path, keys=keys)
    return store, (tmp_path / "store" / "tuf" / "1.root.json").read_bytes(), release


def test_install_box_with_the_trusted_root_checks_and_saves_the_state(
    signed: tuple[LocalStore, bytes, SyntheticRelease], tmp_path: Path
) -> None:
    store, root, release = signed
    lines: list[str] = []
    state = default_state_dir(store.url, tmp_path / "cache")  # the default: one folder per store in the user cache
    installed = install_box(store, "demo-box", tmp_path / "dest", trusted_root=root, progress=lines.append)
    assert installed.manifest.archive.sha256 == release.manifest.archive.sha256
    assert any("signed metadata of" in line and "verified" in line for line in lines)
    assert not any("not verified" in line for line in lines)
    assert (state / "box.demo-box.json").is_file()


def test_without_a_trusted_root_one_warning_line(signed: tuple[LocalStore, bytes, SyntheticRelease]) -> None:
    store, _, _ = signed
    lines: list[str] = []
    list_releases(store, "demo-box", progress=lines.append)
    assert lines.count(UNVERIFIED.format(store=store.url)) == 1


def test_a_manifest_whose_archive_is_not_the_signed_one_is_refused_before_the_download(
    signed: tuple[LocalStore, bytes, SyntheticRelease], tmp_path: Path
) -> None:
    store, root, release = signed
    trust = StoreTrust(root, tmp_path / "state", store_reader(store), store.url, "root.json")
    trust.refresh()
    other = release.manifest.archive.model_copy(update={"size": release.manifest.archive.size + 1})
    with pytest.raises(TargetMismatchError) as caught:
        check_signed_archive(trust, release.manifest.model_copy(update={"archive": other}), "m.json")
    assert "archive.size" in caught.value.render() and "nothing was downloaded" in caught.value.message
    trust.close()


def test_a_list_with_a_trusted_root_refuses_an_unsigned_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    signed_store = LocalStore(tmp_path / "signed")
    init_store(signed_store, generate_keys(tmp_path / "keys"), [])
    root = (tmp_path / "signed" / "tuf" / "1.root.json").read_bytes()
    plain = LocalStore(tmp_path / "plain")
    release = write_release(tmp_path / "dist", cuda=None)
    publish(plain, release.manifest, release.archive_path)
    with pytest.raises(MissingMetadataError) as caught:
        list_releases(plain, "demo-box", trusted_root=root)
    assert caught.value.exit_code == 13
    assert not (tmp_path / "cache" / "trust").exists() or not any((tmp_path / "cache" / "trust").iterdir())


def test_the_store_reader_and_the_option() -> None:
    class Store:
        url = "mem://"

        def get_bytes(self, key: str) -> object:
            return None

    assert store_reader(Store())("tuf/timestamp.json", 10) is None  # type: ignore[arg-type]
    assert trusted_root_option(None, {"SCROLLCASE_TRUSTED_ROOT": "/r.json"}) == Path("/r.json")
    assert trusted_root_option(Path("a.json"), {"SCROLLCASE_TRUSTED_ROOT": "/r.json"}) == Path("a.json")
    assert trusted_root_option(None, {"SCROLLCASE_TRUSTED_ROOT": ""}) is None


def test_a_missing_trusted_root_file_is_a_usage_error(
    signed: tuple[LocalStore, bytes, SyntheticRelease], tmp_path: Path
) -> None:
    store, _, _ = signed
    with pytest.raises(UsageError, match="does not exist"):
        list_releases(store, "demo-box", trusted_root=tmp_path / "nope.json")


def test_the_manifest_target_is_checked_byte_for_byte(
    signed: tuple[LocalStore, bytes, SyntheticRelease], tmp_path: Path
) -> None:
    store, root, release = signed
    key = release.manifest.keys.release
    path = tmp_path / "store" / key
    data = json.loads(path.read_bytes())
    path.write_bytes(json.dumps(data, indent=1).encode())  # the same document, other bytes
    assert sha256_bytes(path.read_bytes()) != sha256_bytes(dump_release(release.manifest))
    with pytest.raises(TargetMismatchError, match=key):
        install_box(store, "demo-box", tmp_path / "dest", trusted_root=root, trust_state=tmp_path / "state")
    assert not (tmp_path / "dest").exists()
    assert not (tmp_path / "state").exists()
