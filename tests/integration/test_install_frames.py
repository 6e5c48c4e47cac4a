"""A second box downloads only the frames this machine lacks (#33): the box `scrollcase demo` builds (box A)
and box B, built by the real build from the same local channel (the same Python and numpy) with another boxId
and its own weights, published to one directory store served over HTTP on 127.0.0.1 by a server that counts
the bytes it sends (tests/support/httpstore.py).  The real CLI installs A, then B; `install --list --json` says
before B is fetched what its install downloads, and the server agrees."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrollcase import cli
from scrollcase.build.pipeline import execute_build
from scrollcase.build.plan import locked_install, plan_build
from scrollcase.client.framecache import FrameCache
from scrollcase.demo.run import DEMO_BOX_ID, DEMO_CHANNEL_NAME
from scrollcase.format.release import ReleaseManifest, parse_release
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.fetch import default_fetchers
from scrollcase.lock import solve as engine
from scrollcase.recipe.loader import resolve_recipe
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.httpstore import ServerState, serve

pytestmark = pytest.mark.slow

BOX_B = "shared-runtime-demo"
WEIGHTS_B = json.dumps({"weights": [1.0, 1.0, 2.0]}, sort_keys=True).encode() + b"\n"  # w @ ones == 4.0 too
RUN_B = (
    "import json, numpy as np; "
    f"w = np.array(json.load(open('model-cache/{BOX_B}/weights.json'))['weights']); print(float(w @ np.ones(3)))"
)


def build_box_b(workspace: Path, work: Path) -> tuple[ReleaseManifest, Path]:
    """The demo recipe with another boxId, model cache folder and weights, built by the real build from the
    demo's lock (the same channel: the same Python and numpy packages)."""
    (source,) = sorted((workspace / "recipes").iterdir())
    recipe_id = source.name.replace(DEMO_BOX_ID, BOX_B, 1)  # <boxId>-<targetId>, and its folder's name
    folder = work / "recipes" / recipe_id
    shutil.copytree(source, folder)
    pixi = (folder / "pixi.toml").read_text(encoding="utf-8").replace(source.name, recipe_id)
    (folder / "pixi.toml").write_text(pixi, encoding="utf-8")
    (work / "assets").mkdir()
    (work / "assets" / "weights.json").write_bytes(WEIGHTS_B)
    recipe = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))
    cache_dir = f"model-cache/{BOX_B}"
    recipe.update(recipeId=recipe_id, boxId=BOX_B, modelCacheSubdir=cache_dir)
    recipe.update(assetBaseUrl=(work / "assets").resolve().as_uri())
    recipe["assets"][0].update(sha256=sha256_bytes(WEIGHTS_B), size=len(WEIGHTS_B))
    test = recipe["selfTest"]
    test["files"] = [f"{cache_dir}/weights.json"]
    test["pythonCode"] = test["pythonCode"].replace("model-cache/scrollcase-demo", cache_dir)
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
    recipe_dir = resolve_recipe(str(folder))
    channel = (workspace / ".scrollcase" / "demo-channel").resolve().as_uri()
    engine.lock_recipe(recipe_dir, channel_overrides={DEMO_CHANNEL_NAME: channel})  # the same packages
    plan = plan_build(recipe_dir, out_dir=work / "dist", state_dir=work / "state")
    built = execute_build(plan, locked=locked_install(plan), fetchers=default_fetchers())
    return built.manifest, built.archive


@pytest.fixture(scope="module")
def store(demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("install-frames")
    root = work / "store"
    shutil.copytree(demo_workspace / ".scrollcase" / "store", root)
    manifest, archive = build_box_b(demo_workspace, work / "box-b")
    publish(LocalStore(root), manifest, archive)
    return root


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_")) or k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def server(store: Path) -> Iterator[tuple[str, ServerState]]:
    with serve(store) as running:
        yield running.url, running.state


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = cli.main([argv[0], "--json", *argv[1:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, json.loads(out) if out.strip() else None


def install(capsys: pytest.CaptureFixture[str], url: str, box: str, dest: Path) -> Any:
    code, data = run_cli(capsys, "install", "--store", url, "--box", box, str(dest))
    assert code == 0, data
    return data


def archive_of(store: Path, box: str) -> ReleaseManifest:
    (release,) = sorted(store.glob(f"boxes/{box}/*/*/*.release.json"))
    return parse_release(release.read_bytes())


def test_box_b_after_box_a_downloads_only_its_own_frames_as_install_said(
    store: Path, server: tuple[str, ServerState], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = server
    a, b = archive_of(store, DEMO_BOX_ID), archive_of(store, BOX_B)
    assert a.boxId != b.boxId
    first = install(capsys, url, a.boxId, host / "a")
    assert first["plan"]["how"] == "archive" and first["bytesDownloaded"] == a.archive.size
    assert state.sent_for(a.archive.name) == a.archive.size

    code, listed = run_cli(capsys, "install", "--list", "--store", url, "--box", BOX_B)
    assert code == 0 and state.sent_for(b.archive.name) == 0  # said before a byte of B is fetched
    plan = listed["plan"]
    tree = sum(f.uncompressedSize for f in b.archive.frames or [])
    assert plan["how"] == "frames" and 0 < plan["diskBytes"] <= tree // 10  # A's packages' files are shared

    second = install(capsys, url, BOX_B, host / "b")
    sent = state.sent_for(b.archive.name)
    assert second["plan"] == plan
    assert sent == second["bytesDownloaded"] == plan["downloadBytes"] == plan["frameCacheBytes"]
    assert 0 < sent <= b.archive.size // 10, (sent, b.archive.size)
    assert plan["reusedBytes"] + sent == b.archive.size  # numpy's and Python's frames came from A's install
    for dest in (host / "a", host / "b"):
        code, report = run_cli(capsys, "verify", "--installed", str(dest))
        assert code == 0 and report["passed"], report
    python = host / "b" / b.pythonEntryPoint
    ran = subprocess.run([str(python), "-c", RUN_B], cwd=host / "b", capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stdout.strip()) == (0, "4.0"), ran.stderr  # B's own numpy runs B's own weights
    assert set(FrameCache.default(host / "cache").pinned(host / "b")) == {f.sha256 for f in b.archive.frames or []}

    code, info = run_cli(capsys, "cache", "info", "frames")
    both = {f.sha256 for f in a.archive.frames or []} & {f.sha256 for f in b.archive.frames or []}
    sharing = info["frameSharing"]
    dests = sorted(str((host / name).absolute()) for name in ("a", "b"))
    assert code == 0 and {f["sha256"] for f in sharing["frames"]} == both
    assert all(f["boxes"] == dests for f in sharing["frames"])
    assert sharing["sharedBytes"] == sharing["savedBytes"] == plan["reusedBytes"]
    assert [box["sharedBytes"] for box in sharing["boxes"]] == [plan["reusedBytes"]] * 2


def poison(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size, other bytes: only a sha256 tells
    path.write_bytes(bytes(data))


def test_a_poisoned_shared_frame_is_caught_and_fetched_again(
    store: Path, server: tuple[str, ServerState], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = server
    a, b = archive_of(store, DEMO_BOX_ID), archive_of(store, BOX_B)
    install(capsys, url, a.boxId, host / "a")
    numpy = next(f for f in b.archive.frames or [] if f.name.startswith("conda/numpy-"))
    assert numpy.sha256 in {f.sha256 for f in a.archive.frames or []}  # shared: the same bytes in both boxes
    poison(FrameCache.default(host / "cache").path_for(numpy.sha256))

    capsys.readouterr()
    code = cli.main(["install", "--store", url, "--box", BOX_B, str(host / "b")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "was damaged on this machine" in captured.err + captured.out
    assert state.sent_for(b.archive.name) >= numpy.size  # the shared frame came from the store again
    assert FrameCache.default(host / "cache").intact(numpy)
    code, report = run_cli(capsys, "verify", "--installed", str(host / "b"))
    assert code == 0 and report["passed"], report


def test_a_store_that_ignores_ranges_gets_the_whole_download(
    store: Path, server: tuple[str, ServerState], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = server
    a, b = archive_of(store, DEMO_BOX_ID), archive_of(store, BOX_B)
    install(capsys, url, a.boxId, host / "a")
    state.honour_range = False
    capsys.readouterr()
    code = cli.main(["install", "--json", "--store", url, "--box", BOX_B, str(host / "b")])
    out, err = capsys.readouterr()  # err holds the server thread's own traceback: the client hung up on its 200
    data = json.loads(out)
    assert code == 0 and "downloading the whole archive instead" in err, err
    assert data["plan"]["how"] == "frames"  # what the cache held; the store then said no to ranges
    assert data["bytesDownloaded"] >= b.archive.size
    code, report = run_cli(capsys, "verify", "--installed", str(host / "b"))
    assert code == 0 and report["passed"], report
