"""The client against a hostile HTTP store on 127.0.0.1 (#32 items 1, 4 and 5): endless bytes after correct
headers (a frame's 206, the index, the archive), an index trickled a byte at a time, redirects to ftp://.  Each
is refused as a StoreError (9) or IntegrityError (8) naming the URL and the limit, the client stops reading at
the limit (the server's own count says so), and nothing is installed or kept beyond the declared sizes."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrollcase import cli, install_box
from scrollcase.errors import StoreError
from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.release import dump_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import MAX_DOCUMENT_BYTES
from scrollcase.store.http import HttpStore
from tests.support.framedreleases import BOX
from tests.support.hostilehttp import (
    Flood,
    HostileState,
    Redirect,
    Trickle,
    TrickleHeaders,
    published_store,
    serve_hostile,
)
from tests.support.releases import SyntheticRelease

MIB = 1 << 20


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, SyntheticRelease], Path]:
    return published_store(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def releases(published: tuple[dict[str, SyntheticRelease], Path]) -> dict[str, SyntheticRelease]:
    return published[0]


@pytest.fixture(scope="module")
def store_dir(published: tuple[dict[str, SyntheticRelease], Path]) -> Path:
    return published[1]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_")) or k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def hostile(store_dir: Path) -> Iterator[tuple[str, HostileState]]:
    state = HostileState()
    with serve_hostile(store_dir, state) as running:
        yield running.url, state


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = cli.main([argv[0], "--json", *argv[1:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, json.loads(out) if out.strip() else None


def cache_files(host: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (host / "cache").rglob("*") if p.is_file()}


def test_an_endless_frame_after_a_correct_206_stops_at_the_frames_size(
    hostile: tuple[str, HostileState], host: Path, releases: dict[str, SyntheticRelease], capsys: Any
) -> None:
    """Item 1: the upgrade asks for one frame's bytes; the server answers 206 with the right Content-Range and
    then sends zeros without end.  Before: ~300 MB written per frame; now refused at the frame's size."""
    url, state = hostile
    dest = host / "box"
    code, _ = run_cli(capsys, "install", "--store", url, "--box", BOX, "--version", "1.0.0", str(dest))
    assert code == 0
    before = (dest / "box.json").read_bytes()
    state.attacks[".tar.zst"] = Flood(ranged_only=True)
    code, error = run_cli(capsys, "upgrade", "--store", url, str(dest))
    assert (code, error["error"]) == (8, "IntegrityError"), error
    frames = {f.size for f in releases["1.0.1"].manifest.archive.frames or []}
    archive_url = f"{url}/{releases['1.0.1'].manifest.keys.archive}"
    assert error["message"].startswith(f"refusing {archive_url}: the store sent more than the ")
    assert any(f"more than the {size} bytes" in error["message"] for size in frames), error["message"]
    assert sum(state.flooded.values()) < 64 * MIB  # the client hung up; before the fix it read on and on
    assert (dest / "box.json").read_bytes() == before
    assert all(size <= max(frames) for size in cache_files(host).values()), cache_files(host)


def test_an_endless_index_is_refused_at_the_document_limit(
    hostile: tuple[str, HostileState], host: Path, capsys: Any
) -> None:
    """Items 3 and 4's reader: an index of zeros with no Content-Length and no end."""
    url, state = hostile
    state.attacks["/index.json"] = Flood()
    code, error = run_cli(capsys, "install", "--store", url, "--box", BOX, str(host / "box"))
    assert (code, error["error"]) == (9, "StoreError"), error
    assert error["message"].startswith(f"refusing {url}/boxes/{BOX}/index.json: more than {MAX_DOCUMENT_BYTES} bytes")
    assert sum(state.flooded.values()) < MAX_DOCUMENT_BYTES + 64 * MIB
    assert not (host / "box").exists()


def test_an_index_claiming_a_huge_length_is_refused_before_its_body(
    hostile: tuple[str, HostileState], host: Path, capsys: Any
) -> None:
    url, state = hostile
    state.attacks["/index.json"] = Flood(length=300 * MIB)
    code, error = run_cli(capsys, "install", "--store", url, "--box", BOX, str(host / "box"))
    assert (code, error["error"]) == (9, "StoreError"), error
    assert f"index.json: more than {MAX_DOCUMENT_BYTES} bytes" in error["message"]


def test_an_endless_archive_stops_at_its_declared_size(
    hostile: tuple[str, HostileState], host: Path, releases: dict[str, SyntheticRelease], capsys: Any
) -> None:
    url, state = hostile
    state.attacks[".tar.zst"] = Flood()
    code, error = run_cli(capsys, "install", "--store", url, "--box", BOX, str(host / "box"))
    assert (code, error["error"]) == (8, "IntegrityError"), error
    size = releases["1.0.1"].manifest.archive.size
    assert f"{url}/{releases['1.0.1'].manifest.keys.archive}" in error["message"] and str(size) in error["message"]
    assert sum(state.flooded.values()) < size + 64 * MIB
    assert all(n <= size for n in cache_files(host).values())
    assert not (host / "box").exists()


def test_a_trickled_index_fails_at_the_deadline(hostile: tuple[str, HostileState], host: Path) -> None:
    """Item 4: one byte every 0.5 s never trips the 15 s socket timeout; the whole document's deadline does
    (2 s here, injected; DOCUMENT_DEADLINE = 60 s by default)."""
    url, state = hostile
    state.attacks["/index.json"] = Trickle(0.5)
    with pytest.raises(StoreError) as refused:
        install_box(HttpStore(url, document_deadline=2), BOX, host / "box")
    assert refused.value.message.startswith(f"refusing {url}/boxes/{BOX}/index.json: only ")
    assert "before the deadline of 2 s for a document" in refused.value.message
    assert state.flooded[f"/boxes/{BOX}/index.json"] < 20  # it stopped listening, not the server talking
    assert not (host / "box").exists()


def test_trickled_headers_fail_at_the_deadline_too(hostile: tuple[str, HostileState], host: Path) -> None:
    """The status line, then a header a byte every 0.5 s: http.client reads headers before any body check runs;
    the deadline's watchdog shuts the connection down (2 s here)."""
    url, state = hostile
    state.attacks["/index.json"] = TrickleHeaders(0.5)
    with pytest.raises(StoreError) as refused:
        install_box(HttpStore(url, document_deadline=2), BOX, host / "box")
    assert refused.value.message == (
        f"refusing {url}/boxes/{BOX}/index.json: it had not arrived before the deadline of 2 s for a document"
    )
    assert not (host / "box").exists()


@pytest.mark.parametrize("where", ["/index.json", ".release.json", ".tar.zst"])
def test_a_redirect_to_ftp_is_refused_naming_both_urls(
    hostile: tuple[str, HostileState], host: Path, where: str, capsys: Any
) -> None:
    """Item 5: urllib's own redirect handler follows ftp:// (before: an FTP connection to the store's choice of
    host and port, then "EOFError" or a refused connection)."""
    url, state = hostile
    state.attacks[where] = Redirect("ftp://127.0.0.1:1{path}")
    code, error = run_cli(capsys, "install", "--store", url, "--box", BOX, str(host / "box"))
    assert (code, error["error"]) == (9, "StoreError"), error
    assert (
        f"cannot reach {url}/" in error["message"]
        and "refusing the redirect (HTTP 302) to ftp://127.0.0.1:1/" in (error["message"])
    )
    assert "only http(s) redirects are followed" in error["message"]
    assert not (host / "box").exists()


def test_an_upgrade_to_a_framed_archive_without_box_json_is_refused(
    store_dir: Path, host: Path, releases: dict[str, SyntheticRelease], capsys: Any
) -> None:
    """Item 7 on the upgrade's frame path: 1.0.1 repacked without box.json (its frame table then names no
    box.json frame), its manifest, sidecar and index entry rewritten to match, as a hostile publisher would.
    Before: the upgrade streamed the frames into DEST with no box.json (exit 0)."""
    store = host / "store"
    shutil.copytree(store_dir, store)
    new = releases["1.0.1"]
    tree = host / "tree"
    unpack_archive(new.archive_path, tree, expected_size=new.manifest.archive.size, expected_sha256=None)
    (tree / "box.json").unlink()
    (tree / "box.installed.json").unlink(missing_ok=True)
    packed = pack_tree(tree, host / "repacked" / new.manifest.archive.name, level=1)
    info = new.manifest.archive.model_copy(
        update={"size": packed.size, "sha256": packed.sha256, "frames": frame_table(packed.frames)}
    )
    assert not any(f.name == "box.json" for f in info.frames or [])
    data = dump_release(new.manifest.model_copy(update={"archive": info}))
    keys = new.manifest.keys
    shutil.copyfile(packed.path, store / keys.archive)
    (store / keys.release).write_bytes(data)
    (store / f"{keys.archive}.sha256").write_text(f"{info.sha256}  {info.name}\n")
    index_path = store / "boxes" / BOX / "index.json"
    index = json.loads(index_path.read_text())
    entry = index["versions"]["1.0.1"][new.manifest.targetId]
    entry |= {"sha256": info.sha256, "size": info.size, "releaseSha256": sha256_bytes(data)}
    index_path.write_text(json.dumps(index))
    dest = host / "box"
    assert run_cli(capsys, "install", "--store", str(store), "--box", BOX, "--version", "1.0.0", str(dest))[0] == 0
    before = (dest / "box.json").read_bytes()
    code, error = run_cli(capsys, "upgrade", "--store", str(store), str(dest))
    assert (code, error["error"]) == (8, "IntegrityError"), error
    assert "box.json" in error["message"], error
    assert (dest / "box.json").read_bytes() == before
