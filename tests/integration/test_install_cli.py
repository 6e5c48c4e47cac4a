"""`scrollcase install` end to end: the real CLI entry point, releases published by the real publish to a
directory store, to moto and SeaweedFS on 127.0.0.1, and served by a static HTTP server that honours Range
and counts the bytes it sends (tests/support/httpstore.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrollcase import cli
from scrollcase.client.download import cache_paths
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.filedigests import digest_tree
from scrollcase.format.release import ReleaseManifest, dump_release, parse_release
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files
from scrollcase.store.base import Store
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.s3 import S3Store
from scrollcase.targets.evidence import FrameworkEvidence, GpuEvidence
from tests.support.httpstore import ServerState, serve
from tests.support.releases import SyntheticRelease, box_json_for, make_manifest
from tests.support.s3servers import S3Server, s3_client

BOX = "demo-box"
CPU, CUDA = "linux-x86_64-cpu", "linux-x86_64-cuda12.4"
TORCH_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]
QUERY = "--query-gpu=driver_version,compute_cap,name"
PAYLOAD = 2_000_000
POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="the fake nvidia-smi is a shell script")


def make_release(work: Path, version: str, cuda: str | None = None) -> SyntheticRelease:
    """A demo-like box: a relocatable script, random payload, the box.json and manifest a build writes."""
    draft = make_manifest(box_id=BOX, version=version, cuda=cuda, size=0, sha256="0" * 64, driver="550.54.14")
    if cuda:
        framework = FrameworkEvidence(version="2.6.0", cuda=cuda, cudnn=90100, archList=TORCH_ARCHS)
        draft = draft.model_copy(update={"gpu": GpuEvidence(cudaRuntime=cuda, source="framework", framework=framework)})
    tree = work / f"tree-{version}-{draft.targetId}"
    (tree / "venv" / "bin").mkdir(parents=True)
    (tree / "venv" / "bin" / "tool").write_text(f"#!{BOX_PREFIX_PLACEHOLDER}/venv/bin/python\n")
    (tree / "venv" / "bin" / "tool").chmod(0o755)
    (tree / "payload.bin").write_bytes(os.urandom(PAYLOAD))
    files = scan_prefix_files(tree, BOX_PREFIX_PLACEHOLDER)
    (tree / "venv" / "lib").mkdir()
    os.symlink("../bin/tool", tree / "venv" / "lib" / "tool-link")
    digests = digest_tree(tree)
    box = box_json_for(draft).model_copy(
        update={
            "relocation": RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=files),
            "files": list(digests.files),
            "links": list(digests.links),
        }
    )
    (tree / "box.json").write_bytes(dump_box_json(box))
    packed = pack_tree(tree, work / "dist" / draft.archive.name, level=1)
    archive = draft.archive.model_copy(update={"size": packed.size, "sha256": packed.sha256})
    manifest = draft.model_copy(update={"archive": archive})
    path = packed.path.with_name(archive.name.removesuffix(".tar.zst") + ".release.json")
    path.write_bytes(dump_release(manifest))
    return SyntheticRelease(manifest, path, packed.path)


RELEASES = [("1.0.0", None), ("1.1.0", None), ("1.1.0", "12.4"), ("1.2.0-rc.1", None)]


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], SyntheticRelease]:
    work = tmp_path_factory.mktemp("install-releases")
    made = [make_release(work, version, cuda) for version, cuda in RELEASES]
    return {(r.manifest.version, r.manifest.targetId): r for r in made}


def publish_all(store: Store, releases: dict[tuple[str, str], SyntheticRelease]) -> None:
    for release in releases.values():
        publish(store, release.manifest, release.archive_path)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory, releases: dict[tuple[str, str], SyntheticRelease]) -> Path:
    root = tmp_path_factory.mktemp("install-store") / "store"
    publish_all(LocalStore(root), releases)
    return root


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch cwd with its own download cache and a PATH without nvidia-smi (a CPU-only machine)."""
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_", "GITHUB_"))]:
        monkeypatch.delenv(key)
    for key in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(key)  # the test servers are on 127.0.0.1
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fake_smi(host: Path, line: str) -> None:
    tool = host / "bin" / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\n[ "$1" = "{QUERY}" ] || exit 2\necho "{line}"\n', encoding="utf-8")
    tool.chmod(0o755)


def install(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = cli.main(["install", "--json", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, json.loads(out), err


def downloads(host: Path) -> list[str]:
    folder = host / "cache" / "downloads"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def assert_installed(result: dict[str, Any], release: SyntheticRelease, dest: Path) -> None:
    manifest: ReleaseManifest = release.manifest
    assert (result["boxId"], result["version"], result["targetId"]) == (BOX, manifest.version, manifest.targetId)
    assert (result["sha256"], result["size"]) == (manifest.archive.sha256, manifest.archive.size)
    assert result["dest"] == str(dest.absolute())
    assert (dest / "venv" / "bin" / "tool").read_text() == f"#!{dest.absolute()}/venv/bin/python\n"
    assert result["relocatedFiles"] == 1 and (dest / "payload.bin").stat().st_size == PAYLOAD


# --- a directory store ---------------------------------------------------------------------------------------


def test_a_cpu_machine_gets_the_newest_cpu_release(
    store_dir: Path, releases: dict[tuple[str, str], SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, err = install(capsys, "--store", str(store_dir), "--box", BOX, "box")
    assert code == 0, err
    assert_installed(result, releases[("1.1.0", CPU)], host / "box")
    assert result["bytesDownloaded"] == result["size"] and not result["fromCache"]
    assert result["gpuCheck"]["status"] == "skip"
    assert downloads(host) == []  # the checked archive is not kept without --keep-download


@POSIX_ONLY
def test_a_fitting_gpu_gets_the_cuda_release_and_the_cache_serves_a_second_install(
    store_dir: Path, releases: dict[tuple[str, str], SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_smi(host, "550.54.14, 8.6, NVIDIA GeForce RTX 3090")
    code, result, err = install(capsys, "--store", str(store_dir), "--box", BOX, "one", "--keep-download")
    assert code == 0, err
    assert_installed(result, releases[("1.1.0", CUDA)], host / "one")
    assert result["gpuCheck"]["status"] == "pass" and "runs sm_86" in result["gpuCheck"]["summary"]
    assert result["cachedArchive"] == str(cache_paths(result["sha256"], host / "cache").complete)
    code, again, err = install(capsys, "--store", str(store_dir), "--box", BOX, "two")
    assert code == 0, err
    assert again["fromCache"] and again["bytesDownloaded"] == 0 and downloads(host) == []


@POSIX_ONLY
def test_an_old_driver_falls_back_to_cpu_and_list_says_why(
    store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_smi(host, "535.104.05, 8.6, NVIDIA GeForce RTX 3090")
    code, listing, _ = install(capsys, "--list", "--store", str(store_dir), "--box", BOX)
    assert code == 0 and listing["selected"] == {"version": "1.1.0", "targetId": CPU}
    verdicts = {(r["version"], r["targetId"]): r for r in listing["releases"]}
    assert set(verdicts) == {(v, CUDA if c else CPU) for v, c in RELEASES}
    assert "older than minNvidiaDriverVersion 550.54.14" in verdicts[("1.1.0", CUDA)]["reasons"][0]
    assert verdicts[("1.2.0-rc.1", CPU)]["reasons"] == ["a pre-release: pass --pre or --version 1.2.0-rc.1"]
    assert listing["host"]["gpus"][0]["driverVersion"] == "535.104.05"
    code, result, err = install(capsys, "--store", str(store_dir), "--box", BOX, "box")
    assert code == 0 and result["targetId"] == CPU, err


def test_list_as_text(store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["install", "--list", "--store", str(store_dir), "--box", BOX, "--pre"]) == 0
    out = capsys.readouterr().out
    assert "* 1.2.0-rc.1" in out and "install would choose 1.2.0-rc.1 linux-x86_64-cpu" in out
    assert "nvidia-smi is not on PATH" in out  # why the CUDA release does not fit


def test_version_target_and_no_fit(store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, result, _ = install(capsys, "--store", str(store_dir), "--box", BOX, "--version", "1.0.0", "old")
    assert code == 0 and result["version"] == "1.0.0"
    code, error, _ = install(capsys, "--store", str(store_dir), "--box", BOX, "--target", CUDA, "gpu")
    assert code == 11 and error["error"] == "HostError" and not (host / "gpu").exists()
    assert [p["key"] for p in error["problems"]] == [f"1.1.0/{CUDA}"]
    code, error, _ = install(capsys, "--store", str(store_dir), "--box", BOX, "--version", "9.9.9", "x")
    assert code == 2 and "no version 9.9.9" in error["message"]
    code, error, _ = install(capsys, "--store", str(store_dir), "--box", "other-box", "x")
    assert code == 9 and "has no box 'other-box'" in error["message"]


@POSIX_ONLY
def test_skip_gpu_check_installs_the_cuda_box_with_a_warning(
    store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, err = install(capsys, "--store", str(store_dir), "--box", BOX, "--skip-gpu-check", "box")
    assert code == 0 and result["targetId"] == CUDA and result["gpuCheck"]["status"] == "skip"
    assert "installed without checking" in err


# --- broken stores: nothing appears at DEST --------------------------------------------------------------------


@pytest.fixture
def own_store(store_dir: Path, tmp_path: Path) -> Path:
    """A copy of the store this test may break."""
    copy = tmp_path / "own-store"
    shutil.copytree(store_dir, copy)
    return copy


def test_a_tampered_archive_is_refused_and_dest_stays_absent(
    own_store: Path, releases: dict[tuple[str, str], SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = own_store / releases[("1.1.0", CPU)].manifest.keys.archive
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    archive.write_bytes(bytes(data))
    code, error, _ = install(capsys, "--store", str(own_store), "--box", BOX, "box")
    assert code == 8 and error["error"] == "IntegrityError" and "its sha256 is" in error["message"]
    assert not (host / "box").exists() and not [p for p in host.iterdir() if p.name.startswith(".box.")]
    assert downloads(host) == []  # the bad partial was deleted


def test_a_manifest_that_disagrees_with_the_index_is_refused_before_downloading(
    own_store: Path, releases: dict[tuple[str, str], SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest_path = own_store / releases[("1.1.0", CPU)].manifest.keys.release
    raw = json.loads(manifest_path.read_text())
    raw["archive"]["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(raw))
    code, error, _ = install(capsys, "--store", str(own_store), "--box", BOX, "box")
    assert code == 8 and "not the release the index lists" in error["message"]
    assert [p["key"] for p in error["problems"]] == ["archive.sha256"]
    assert not (host / "box").exists() and downloads(host) == []


def test_a_store_missing_the_archive(
    own_store: Path, releases: dict[tuple[str, str], SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (own_store / releases[("1.1.0", CPU)].manifest.keys.archive).unlink()
    code, error, _ = install(capsys, "--store", str(own_store), "--box", BOX, "box")
    assert code == 9 and "does not exist" in error["message"] and not (host / "box").exists()


# --- a static HTTP server ----------------------------------------------------------------------------------------


@pytest.fixture
def http_state() -> ServerState:
    return ServerState(budget_suffix=".tar.zst")


@pytest.fixture
def http_store(store_dir: Path, http_state: ServerState) -> Iterator[str]:
    with serve(store_dir, http_state) as server:
        yield server.url + "/"


def test_install_over_http_downloads_each_byte_once(
    http_store: str,
    http_state: ServerState,
    releases: dict[tuple[str, str], SyntheticRelease],
    host: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, result, err = install(capsys, "--store", http_store, "--box", BOX, "box")
    assert code == 0, err
    assert_installed(result, releases[("1.1.0", CPU)], host / "box")
    assert http_state.sent_for(".tar.zst") == result["size"] == result["bytesDownloaded"]
    assert result["archive"] == http_store + releases[("1.1.0", CPU)].manifest.keys.archive


def test_a_server_that_dies_mid_download_is_resumed_by_a_rerun(
    http_store: str, http_state: ServerState, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http_state.budget = 700_000  # then every transfer of the archive breaks off: the server is "dead"
    code, error, err = install(capsys, "--store", http_store, "--box", BOX, "box")
    assert code == 9 and error["error"] == "StoreError", err
    assert "700000 of" in error["message"] and "resumes" in error["fix"]
    assert not (host / "box").exists()
    partial = host / "cache" / "downloads"
    assert [p.stat().st_size for p in partial.glob("*.part")] == [700_000]
    http_state.budget = None  # the server is back
    code, result, err = install(capsys, "--store", http_store, "--box", BOX, "box")
    assert code == 0, err
    assert result["resumedFrom"] == 700_000 and result["bytesDownloaded"] == result["size"] - 700_000
    assert http_state.sent_for(".tar.zst") == result["size"]  # every byte sent once, over both runs
    assert http_state.requests[-1].endswith("bytes=700000-")
    assert downloads(host) == []


# --- S3: moto and SeaweedFS ----------------------------------------------------------------------------------------


@pytest.fixture(params=["moto", "seaweedfs"])
def s3(request: pytest.FixtureRequest) -> tuple[S3Server, str]:
    server: S3Server = request.getfixturevalue("moto_s3" if request.param == "moto" else "weed")
    bucket: str = request.getfixturevalue("moto_bucket" if request.param == "moto" else "weed_bucket")
    return server, bucket


def test_install_from_s3_resumes_with_a_ranged_get(
    s3: tuple[S3Server, str],
    releases: dict[tuple[str, str], SyntheticRelease],
    host: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, bucket = s3
    publish_all(S3Store(s3_client(server), bucket, "releases", endpoint_url=server.endpoint), releases)
    for key, value in (("AWS_ACCESS_KEY_ID", server.access_key), ("AWS_SECRET_ACCESS_KEY", server.secret_key)):
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    release = releases[("1.1.0", CPU)]
    partial = cache_paths(release.manifest.archive.sha256, host / "cache").partial
    partial.parent.mkdir(parents=True)
    partial.write_bytes(release.archive_path.read_bytes()[:500_000])  # an earlier run that was interrupted
    store = f"s3://{bucket}/releases"
    code, result, err = install(capsys, "--store", store, "--endpoint-url", server.endpoint, "--box", BOX, "box")
    assert code == 0, err
    assert_installed(result, release, host / "box")
    assert result["resumedFrom"] == 500_000 and result["bytesDownloaded"] == result["size"] - 500_000
    assert result["archive"] == f"s3://{bucket}/releases/{release.manifest.keys.archive}"


def test_plain_output_and_progress_on_stderr(store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["install", "--store", str(store_dir), "--box", BOX, "box"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"installed {BOX} 1.1.0 ({CPU}) into {(host / 'box').absolute()}")
    assert "verified" in out and "1 relocated" in out
    assert f"installing {BOX} 1.1.0 ({CPU}) from {store_dir}" in err


# --- the digest chain: index -> release manifest, and an installed box against box.json -----------------------


def test_the_index_records_the_release_manifests_sha256(
    store_dir: Path, releases: dict[tuple[str, str], SyntheticRelease]
) -> None:
    index = json.loads((store_dir / "boxes" / BOX / "index.json").read_text())
    for (version, target), release in releases.items():
        published = (store_dir / release.manifest.keys.release).read_bytes()
        assert index["versions"][version][target]["releaseSha256"] == hashlib.sha256(published).hexdigest()


def test_a_manifest_with_other_bytes_than_the_index_records_is_refused(
    own_store: Path, releases: dict[tuple[str, str], SyntheticRelease], host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest_path = own_store / releases[("1.1.0", CPU)].manifest.keys.release
    # Every field the index repeats still agrees; only the bytes differ (a store that edited the manifest).
    manifest_path.write_text(json.dumps(json.loads(manifest_path.read_text()), indent=4))
    code, error, _ = install(capsys, "--store", str(own_store), "--box", BOX, "box")
    assert code == 8 and error["error"] == "IntegrityError"
    assert "its sha256 is" in error["message"] and "the index lists the release manifest" in error["message"]
    assert not (host / "box").exists() and downloads(host) == []


def verify_installed(capsys: pytest.CaptureFixture[str], dest: Path) -> tuple[int, Any]:
    code = cli.main(["verify", "--installed", str(dest), "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, json.loads(out)


def test_verify_installed_passes_on_a_clean_install_and_lists_every_change(
    store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = install(capsys, "--store", str(store_dir), "--box", BOX, "box")
    assert code == 0, err
    dest = host / "box"
    code, report = verify_installed(capsys, dest)
    assert code == 0 and report["passed"] and report["changes"] == []
    assert report["checked"] == 4  # payload.bin, the relocated tool, its symlink, box.json

    (dest / "payload.bin").write_bytes(b"repacked")
    (dest / "venv" / "bin" / "tool").write_text("#!/bin/sh\necho planted\n")  # a relocated file
    (dest / "venv" / "lib" / "tool-link").unlink()
    (dest / "venv" / "lib" / "evil.pth").write_text("import os\n")
    code, report = verify_installed(capsys, dest)
    assert code == 8 and not report["passed"]
    assert [(c["path"], c["change"]) for c in report["changes"]] == [
        ("payload.bin", "changed"),
        ("venv/bin/tool", "changed"),
        ("venv/lib/evil.pth", "added"),
        ("venv/lib/tool-link", "removed"),
    ]
    assert cli.main(["verify", "--installed", str(dest)]) == 8
    out, err = capsys.readouterr()
    assert "changed  payload.bin" in out and "4 file(s)" in err


def test_a_dest_longer_than_the_box_allows_is_refused_before_downloading(
    tmp_path: Path, host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test vectors' demo box has binary relocation: its index entry and manifest say 196 bytes at most."""
    from tests.vectors.generate import VECTORS

    release = next((VECTORS / "demo").glob("*.release.json"))
    manifest = parse_release(release.read_bytes())
    root = tmp_path / "limit-store"
    publish(LocalStore(root), manifest, release.parent / manifest.archive.name)
    entry = json.loads((root / "boxes" / manifest.boxId / "index.json").read_bytes())["versions"]["1.0.0"][CPU]
    assert entry["relocation"] == {"placeholderBytes": 196, "maxDestBytes": 196}
    state = ServerState()
    with serve(root, state) as server:
        too_long = host / ("d" * (200 - len(str(host))))
        code, error, _ = install(capsys, "--store", server.url, "--box", manifest.boxId, str(too_long))
        assert (code, error["error"]) == (5, "BuildError") and "nothing was downloaded" in error["message"]
        assert "at most 196 bytes" in error["fix"] and state.sent_for(".tar.zst") == 0 and not too_long.exists()
        code, result, err = install(capsys, "--store", server.url, "--box", manifest.boxId, str(host / "fits"))
        assert code == 0, err
        assert result["relocatedFiles"] == len(
            json.loads((host / "fits" / "box.json").read_bytes())["relocation"]["files"]
        )


@pytest.mark.parametrize("box", ["../../etc", "Demo-Box", "", "demo/box", "-demo"])
def test_a_box_that_is_no_box_id_is_a_usage_error_before_the_store_is_asked(
    store_dir: Path, host: Path, capsys: pytest.CaptureFixture[str], box: str
) -> None:
    """#32 item 11: --box becomes the store key boxes/<box>/index.json; ../../etc named a file outside the
    store and ended in a fix about keys edited by hand."""
    state = ServerState()
    with serve(store_dir, state) as running:
        for listing in ([], ["--list"]):
            argv = ["--store", running.url, f"--box={box}", *listing, *([] if listing else ["dest"])]
            code, error, _ = install(capsys, *argv)
            assert (code, error["error"]) == (2, "UsageError"), error
            assert f"--box {box!r} is not a box id" in error["message"] and "lowercase letters" in error["message"]
            assert "boxId of the box's recipe.json" in error["fix"] and "edited by hand" not in error["fix"]
            assert error["problems"][0]["key"] == "--box"
    assert state.requests == [] and not (host / "dest").exists()
