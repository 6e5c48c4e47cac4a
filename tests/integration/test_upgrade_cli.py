"""`scrollcase upgrade` end to end: two framed releases of one box (1.0.0 and 1.0.1, one package changed)
published by the real publish to a directory store and served by the Range-honouring HTTP server on
127.0.0.1 that counts the bytes it sends (tests/support/httpstore.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from scrollcase import cli
from scrollcase.client import upgrade as upgrade_client
from scrollcase.client.framecache import PRUNE_GRACE_SECONDS, FrameCache
from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.release import dump_release, release_relocation
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files
from scrollcase.store.index import index_key
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.framedbox import SITE, make_framed_box
from tests.support.httpstore import ServerState, serve
from tests.support.releases import SyntheticRelease, box_json_for, make_manifest

BOX = "framed-box"
PKG0 = f"{SITE}/pkg0/__init__.py"


def make_release(work: Path, version: str, *, binary: bool = False) -> SyntheticRelease:
    """A framed box: eight wheels of 1 MB incompressible bytes, pkg0 differing between versions.
    ``binary``: a library embeds the placeholder too, so the release allows DESTs of 196 bytes at most."""
    draft = make_manifest(box_id=BOX, version=version, cuda=None, size=0, sha256="0" * 64)
    tree = make_framed_box(work / f"tree-{version}", version=version, payload=1_000_000, packages=8)
    (tree / "venv" / "bin" / "tool").write_text(f"#!{BOX_PREFIX_PLACEHOLDER}/venv/bin/python\n")
    if binary:
        (tree / "venv" / "lib" / "libpath.so").write_bytes(b"\x7fELF" + BOX_PREFIX_PLACEHOLDER.encode() + b"\0rest")
    files = scan_prefix_files(tree, BOX_PREFIX_PLACEHOLDER)
    relocation = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=files)
    box = box_json_for(draft).model_copy(update={"relocation": relocation})
    (tree / "box.json").write_bytes(dump_box_json(box))
    packed = pack_tree(tree, work / "dist" / draft.archive.name, level=1)
    archive = draft.archive.model_copy(
        update={"size": packed.size, "sha256": packed.sha256, "frames": frame_table(packed.frames)}
    )
    manifest = draft.model_copy(update={"archive": archive, "relocation": release_relocation(relocation)})
    path = packed.path.with_name(archive.name.removesuffix(".tar.zst") + ".release.json")
    path.write_bytes(dump_release(manifest))
    return SyntheticRelease(manifest, path, packed.path)


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticRelease]:
    work = tmp_path_factory.mktemp("upgrade-releases")
    return {v: make_release(work, v) for v in ("1.0.0", "1.0.1")}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory, releases: dict[str, SyntheticRelease]) -> Path:
    root = tmp_path_factory.mktemp("upgrade-store") / "store"
    for release in releases.values():
        publish(LocalStore(root), release.manifest, release.archive_path)
    return root


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_")) or k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main([argv[0], "--json", *argv[1:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, json.loads(out) if out.strip() else None, err


def installed_state(dest: Path) -> tuple[str, str, list[str]]:
    """DEST's box.json version, pkg0's module and its file list: what must not change on a refusal."""
    names = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    return json.loads((dest / "box.json").read_text())["version"], (dest / PKG0).read_text(), names


def changed_bytes(releases: dict[str, SyntheticRelease]) -> tuple[int, list[str]]:
    old = {f.sha256 for f in releases["1.0.0"].manifest.archive.frames or []}
    new = [f for f in releases["1.0.1"].manifest.archive.frames or [] if f.sha256 not in old]
    return sum(f.size for f in new), sorted(f.name for f in new)


@pytest.fixture
def server(store_dir: Path) -> Iterator[tuple[str, ServerState]]:
    state = ServerState()
    with serve(store_dir, state) as running:
        yield running.url + "/", state


def install_old(capsys: pytest.CaptureFixture[str], url: str, dest: Path) -> None:
    code, result, err = run_cli(capsys, "install", "--store", url, "--box", BOX, "--version", "1.0.0", str(dest))
    assert code == 0, err
    assert result["version"] == "1.0.0"


class Installed(NamedTuple):
    url: str
    state: ServerState
    dest: Path


@pytest.fixture
def installed(server: tuple[str, ServerState], host: Path, capsys: pytest.CaptureFixture[str]) -> Installed:
    """What most upgrades start from: 1.0.0 installed into HOST/box from the served store."""
    url, state = server
    dest = host / "box"
    install_old(capsys, url, dest)
    return Installed(url, state, dest)


@pytest.fixture
def bad_store(store_dir: Path, host: Path) -> Path:
    """A copy of the store, for a test to damage."""
    copy = host / "bad-store"
    shutil.copytree(store_dir, copy)
    return copy


def upgrade(capsys: pytest.CaptureFixture[str], url: str, dest: Path, *options: str) -> Any:
    """A successful ``upgrade --json``'s result."""
    code, result, err = run_cli(capsys, "upgrade", "--store", url, *options, str(dest))
    assert code == 0, err
    return result


def test_upgrade_downloads_only_the_changed_package(
    installed: Installed, releases: dict[str, SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state, dest = installed
    before = state.sent_for(".tar.zst")
    result = upgrade(capsys, url, dest)
    expected, names = changed_bytes(releases)
    assert names == ["box.json", "wheel/pkg0-1.0"]  # the one package that changed, and the box's description
    sent = state.sent_for(".tar.zst") - before
    assert sent == expected == result["bytesDownloaded"]
    assert sent < 0.2 * releases["1.0.1"].manifest.archive.size
    assert (result["from"], result["to"], result["upgraded"]) == ("1.0.0", "1.0.1", True)
    assert installed_state(dest)[:2] == ("1.0.1", "VERSION = '1.0.1'\n" + "# package 0\n" * 50)
    tool = (dest / "venv" / "bin" / "tool").read_text()
    assert tool == f"#!{dest}/venv/bin/python\n"  # relocated to DEST, although unpacked beside it
    assert sorted(p.name for p in host.iterdir()) == ["box", "cache"]  # no staging or previous tree left
    again = run_cli(capsys, "upgrade", "--store", url, str(dest))[1]
    assert again["upgraded"] is False  # already the newest


def test_rollback_with_version_downloads_nothing(
    installed: Installed, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state, dest = installed
    age_frame_cache(host)  # older than the prune's grace: only the pin of the kept previous tree keeps them
    upgrade(capsys, url, dest, "--keep-previous")
    assert installed_state(host / ".box.previous")[0] == "1.0.0"  # kept for an instant rollback
    before = state.sent_for(".tar.zst")
    result = upgrade(capsys, url, dest, "--version", "1.0.0")
    assert result["to"] == "1.0.0" and result["bytesDownloaded"] == 0 == state.sent_for(".tar.zst") - before
    assert installed_state(dest)[0] == "1.0.0"


def age_frame_cache(host: Path) -> None:
    when = time.time() - 2 * PRUNE_GRACE_SECONDS
    for path in (host / "cache" / "frames").glob("??/*"):
        os.utime(path, (when, when))


def cached_frames(host: Path) -> set[str]:
    return {p.name for p in (host / "cache" / "frames").glob("??/*")}


def test_an_upgrade_prunes_the_frames_only_the_replaced_release_used_and_a_rollback_fetches_them(
    installed: Installed, releases: dict[str, SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state, dest = installed
    old, new = ({f.sha256: f for f in releases[v].manifest.archive.frames or []} for v in ("1.0.0", "1.0.1"))
    assert cached_frames(host) == set(old)
    age_frame_cache(host)
    result = upgrade(capsys, url, dest)
    only_old = [f for sha, f in old.items() if sha not in new]
    assert cached_frames(host) == set(new)  # one copy of what is installed, not of every release downloaded
    assert result["cachePruned"] == {"frames": len(only_old), "bytes": sum(f.size for f in only_old)}
    before = state.sent_for(".tar.zst")
    result = upgrade(capsys, url, dest, "--version", "1.0.0")
    assert result["bytesDownloaded"] == sum(f.size for f in only_old) == state.sent_for(".tar.zst") - before
    assert installed_state(dest)[0] == "1.0.0"
    assert result["cachePruned"] == {"frames": 0, "bytes": 0}  # 1.0.1's frames are young: the grace keeps them


def test_a_tampered_frame_is_refused_and_dest_is_unchanged(
    bad_store: Path, releases: dict[str, SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = releases["1.0.1"].manifest
    frame = next(f for f in manifest.archive.frames or [] if f.name == "wheel/pkg0-1.0")
    archive = bad_store / manifest.keys.archive
    data = bytearray(archive.read_bytes())
    data[frame.offset + frame.size // 2] ^= 0x01
    archive.write_bytes(bytes(data))
    with serve(bad_store) as running:
        url = running.url + "/"
        dest = host / "box"
        install_old(capsys, url, dest)
        state = installed_state(dest)
        code, _, err = run_cli(capsys, "upgrade", "--store", url, str(dest))
    assert code != 0
    assert "refusing frame 'wheel/pkg0-1.0'" in err and "frame table" in err
    assert installed_state(dest) == state
    assert not FrameCache.default().has(frame)
    assert sorted(p.name for p in host.iterdir()) == ["bad-store", "box", "cache"]


def test_an_interrupted_upgrade_leaves_the_old_install_and_a_rerun_completes(
    installed: Installed, host: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state, dest = installed
    old = installed_state(dest)

    def killed(*_: object) -> None:
        raise KeyboardInterrupt  # as a kill right before the swap: everything fetched and unpacked

    monkeypatch.setattr(upgrade_client, "swap_in", killed)
    assert cli.main(["upgrade", "--store", url, str(dest)]) != 0
    assert "interrupted" in capsys.readouterr().err
    assert installed_state(dest) == old  # the old install is untouched and whole
    assert (host / ".box.upgrade" / "box.json").is_file()  # the new tree was complete, not swapped in
    monkeypatch.undo()
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(host / "cache"))
    before = state.sent_for(".tar.zst")
    result = upgrade(capsys, url, dest)
    assert result["bytesDownloaded"] == 0 == state.sent_for(".tar.zst") - before  # the frames were kept
    assert installed_state(dest)[0] == "1.0.1"


def test_a_dead_server_mid_upgrade_keeps_the_fetched_frames(
    installed: Installed, releases: dict[str, SyntheticRelease], capsys: pytest.CaptureFixture[str]
) -> None:
    url, state, dest = installed
    old = installed_state(dest)
    expected, _ = changed_bytes(releases)
    state.budget, state.budget_suffix = state.sent_for(".tar.zst") + 700, ".tar.zst"  # box.json's frame, then cut
    code, _, err = run_cli(capsys, "upgrade", "--store", url, str(dest))
    assert code != 0 and "broke off" in err
    assert installed_state(dest) == old
    state.budget = None
    before = state.sent_for(".tar.zst")
    result = upgrade(capsys, url, dest)
    assert result["bytesDownloaded"] == state.sent_for(".tar.zst") - before < expected
    assert installed_state(dest)[0] == "1.0.1"


def test_a_swap_killed_between_its_renames_is_put_back(
    installed: Installed, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, dest = installed
    dest.replace(host / ".box.previous")  # the first rename happened, the second did not
    code, result, err = run_cli(capsys, "upgrade", "--store", url, str(dest))
    assert code == 0, err
    assert "put back" in err and result["from"] == "1.0.0" and installed_state(dest)[0] == "1.0.1"


def test_a_manifest_whose_frame_table_disagrees_is_refused_by_install(
    bad_store: Path, releases: dict[str, SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = releases["1.0.0"].manifest
    frames = list(manifest.archive.frames or [])
    frames[3] = frames[3].model_copy(update={"sha256": frames[4].sha256})
    edited = manifest.model_copy(update={"archive": manifest.archive.model_copy(update={"frames": frames})})
    (bad_store / manifest.keys.release).write_bytes(dump_release(edited))
    index_file = bad_store / index_key(BOX)  # a store that lies consistently: the index vouches for the edit
    index = json.loads(index_file.read_text())
    entry = index["versions"][manifest.version][manifest.targetId]
    entry["releaseSha256"] = hashlib.sha256(dump_release(edited)).hexdigest()
    index_file.write_text(json.dumps(index))
    code, _, err = run_cli(capsys, "install", "--store", str(bad_store), "--box", BOX, "--version", "1.0.0", "box")
    assert code == 8 and f"refusing frame {frames[3].name!r}" in err
    assert not (host / "box").exists()


def test_a_store_missing_the_archive_is_refused_and_dest_is_unchanged(
    bad_store: Path, releases: dict[str, SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = host / "box"
    install_old(capsys, str(bad_store), dest)
    old = installed_state(dest)
    (bad_store / releases["1.0.1"].manifest.keys.archive).unlink()
    code, _, err = run_cli(capsys, "upgrade", "--store", str(bad_store), str(dest))
    assert code == 9 and "does not exist" in err
    assert installed_state(dest) == old


def test_a_release_that_allows_a_shorter_dest_is_refused_before_downloading(
    releases: dict[str, SyntheticRelease], tmp_path: Path, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1.0.2 embeds the placeholder in a library (DEST at most 196 bytes); the box is installed at a longer DEST."""
    root = tmp_path / "limit-store"
    publish(LocalStore(root), releases["1.0.0"].manifest, releases["1.0.0"].archive_path)
    newer = make_release(tmp_path / "limited", "1.0.2", binary=True)
    assert newer.manifest.relocation is not None and newer.manifest.relocation.maxDestBytes == 196
    publish(LocalStore(root), newer.manifest, newer.archive_path)
    state = ServerState()
    with serve(root, state) as running:
        url = running.url + "/"
        dest = host / ("d" * (230 - len(str(host))))
        install_old(capsys, url, dest)
        before, sent = installed_state(dest), state.sent_for(".tar.zst")
        code, error, _ = run_cli(capsys, "upgrade", "--store", url, str(dest))
        assert (code, error["error"]) == (5, "BuildError") and "nothing was downloaded or changed" in error["message"]
        assert "at most 196 bytes" in error["fix"]
        assert state.sent_for(".tar.zst") == sent and installed_state(dest) == before


def test_a_dangling_previous_link_does_not_block_later_upgrades(
    server: tuple[str, ServerState], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#32 item 12: DEST is a link, upgraded with --keep-previous (the link becomes .box.previous), the folder
    it named is deleted since: every later upgrade used to fail renaming DEST onto the dangling link."""
    url, _ = server
    install_old(capsys, url, host / "real")
    (host / "box").symlink_to(host / "real")
    upgrade(capsys, url, host / "box", "--keep-previous")
    assert (host / ".box.previous").is_symlink()
    shutil.rmtree(host / "real")
    result = upgrade(capsys, url, host / "box", "--version", "1.0.0", "--keep-previous")
    assert (result["from"], result["to"]) == ("1.0.1", "1.0.0") and installed_state(host / "box")[0] == "1.0.0"
    assert installed_state(host / ".box.previous")[0] == "1.0.1" and not (host / ".box.previous").is_symlink()


def test_an_upgrade_running_on_the_same_dest_is_named_by_its_lock(
    installed: Installed, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, dest = installed
    lock = host / ".box.upgrade.lock"
    lock.write_text(f"{os.getppid()}\n")  # a live process holds it
    code, error, _ = run_cli(capsys, "upgrade", "--store", url, str(dest))
    assert code == 1 and f"is upgrading box now: it holds the lock {lock}" in error["message"]
    assert "downloading" not in error["message"] and str(lock) in error["fix"]


def test_a_damaged_or_linked_cached_frame_is_fetched_again_and_the_upgrade_succeeds(
    installed: Installed, releases: dict[str, SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#32 item 8: a cached frame with other bytes of the same size, and an entry that is a symlink, are
    evicted and fetched again from the store in the same run; the link's target is never touched."""
    url, state, dest = installed
    old = {f.sha256 for f in releases["1.0.0"].manifest.archive.frames or []}
    shared = [f for f in releases["1.0.1"].manifest.archive.frames or [] if f.sha256 in old and f.size > 1000]
    poisoned, linked = shared[0], shared[1]
    cache = FrameCache.default()
    entry = cache.path_for(poisoned.sha256)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x01
    entry.write_bytes(bytes(data))  # the same size: only its bytes tell
    outside = host / "outside"
    shutil.copyfile(cache.path_for(linked.sha256), outside)
    os.utime(outside, (1_000_000, 1_000_000))
    cache.path_for(linked.sha256).unlink()
    cache.path_for(linked.sha256).symlink_to(outside)
    before = state.sent_for(".tar.zst")
    code, result, err = run_cli(capsys, "upgrade", "--store", url, str(dest))
    assert code == 0, err
    expected, _ = changed_bytes(releases)
    assert result["bytesDownloaded"] == expected + poisoned.size + linked.size == state.sent_for(".tar.zst") - before
    assert installed_state(dest)[0] == "1.0.1"
    assert f"frame cache entry {entry}" in err and "damaged on this machine" in err and "fetched again" in err
    assert hashlib.sha256(entry.read_bytes()).hexdigest() == poisoned.sha256
    assert not cache.path_for(linked.sha256).is_symlink() and cache.has(linked)
    assert outside.stat().st_mtime == 1_000_000  # the link was not followed, not even to touch it


def test_a_rollback_whose_cached_box_json_frame_was_damaged_fetches_it_again(
    installed: Installed, releases: dict[str, SyntheticRelease], capsys: pytest.CaptureFixture[str]
) -> None:
    """box.json's frame is read (and believed) before the unpack: it is checked first, and healed the same way."""
    url, state, dest = installed
    upgrade(capsys, url, dest, "--keep-previous")  # 1.0.0's frames stay, pinned for .box.previous
    box_json = next(f for f in releases["1.0.0"].manifest.archive.frames or [] if f.name == "box.json")
    entry = FrameCache.default().path_for(box_json.sha256)
    data = bytearray(entry.read_bytes())
    data[-5] ^= 0x01  # the same size, other bytes
    entry.write_bytes(bytes(data))
    before = state.sent_for(".tar.zst")
    code, result, err = run_cli(capsys, "upgrade", "--store", url, "--version", "1.0.0", str(dest))
    assert code == 0, err
    assert result["bytesDownloaded"] == box_json.size == state.sent_for(".tar.zst") - before
    assert f"frame cache entry {entry} (box.json) was damaged on this machine" in err
    assert installed_state(dest)[0] == "1.0.0"
