"""The library API as a host app uses it: docs/install.md's "From Python" examples, run as written (only the
store's URL and the box's name swapped for a real store's) by a real interpreter, in order, against releases
published by the real publish and served over HTTP on 127.0.0.1; and the calls' typed results and errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase import ScrollcaseError, install_box, upgrade_box, verify_installed
from scrollcase.errors import HostError, UsageError
from scrollcase.host.facts import HostProbes
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.integration.test_install_cli import BOX, make_release
from tests.support.httpstore import serve

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "install.md"
DOC_STORE, DOC_BOX = "https://boxes.example.com/prod", '"my-model", dest'  # the box id, not DEST's name
CPU = "linux-x86_64-cpu"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1.0.0 and 1.1.0 of one CPU box, published to a directory store."""
    work = tmp_path_factory.mktemp("api-releases")
    root = work / "store"
    for version in ("1.0.0", "1.1.0"):
        release = make_release(work, version)
        publish(LocalStore(root), release.manifest, release.archive_path)
    return root


@pytest.fixture
def store_url(store_dir: Path) -> Iterator[str]:
    with serve(store_dir) as running:
        yield running.url


def examples() -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)


def run_example(code: str, home: Path, url: str) -> str:
    assert DOC_STORE in code or "verify_installed" in code, code
    env = {
        "HOME": str(home),  # the examples install into Path.home() / "boxes" / "my-model"
        "SCROLLCASE_CACHE_DIR": str(home / "cache"),
        "PATH": "/usr/bin:/bin",  # no nvidia-smi: a CPU machine
        "PYTHONPATH": str(ROOT),
    }
    program = code.replace(DOC_STORE, url).replace(DOC_BOX, f'"{BOX}", dest')
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_docs_examples_install_upgrade_and_verify(store_url: str, tmp_path: Path) -> None:
    install, upgrade, verify = examples()
    assert "install_box(" in install and "upgrade_box(" in upgrade and "verify_installed(" in verify
    dest = tmp_path / "boxes" / "my-model"

    out = run_example(install, tmp_path, store_url)
    assert f"installing {BOX} 1.0.0 ({CPU}) from {store_url}" in out  # progress=print
    assert out.splitlines()[-1] == f"installed 1.0.0 ({CPU}): 3 files"  # payload.bin, the relocated tool, box.json
    assert (dest / "venv" / "bin" / "tool").read_text() == f"#!{dest}/venv/bin/python\n"

    out = run_example(upgrade, tmp_path, store_url)
    assert re.fullmatch(r"upgraded 1\.0\.0 -> 1\.1\.0: [1-9]\d* bytes downloaded\n", out), out
    assert (tmp_path / "boxes" / ".my-model.previous" / "box.json").is_file()  # keep_previous=True
    assert run_example(upgrade, tmp_path, store_url) == "nothing newer than 1.1.0\n"

    assert run_example(verify, tmp_path, store_url) == "intact\n"
    (dest / "payload.bin").write_bytes(b"repacked")
    assert run_example(verify, tmp_path, store_url) == "changed payload.bin\n1 file(s) changed since install\n"


def cpu_machine() -> HostProbes:
    return HostProbes(platform=lambda: ("linux", "x86_64"), which=lambda _: None)


def test_the_calls_return_typed_results_and_raise_located_errors(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCROLLCASE_CACHE_DIR", str(tmp_path / "cache"))
    store = LocalStore(store_dir)  # a store object, not a URL
    lines: list[str] = []
    installed = install_box(store, BOX, tmp_path / "box", version="1.0.0", probes=cpu_machine(), progress=lines.append)
    assert (installed.manifest.version, installed.dest, installed.download.cached) == ("1.0.0", tmp_path / "box", False)
    assert installed.to_json()["sha256"] == installed.manifest.archive.sha256 and any("installing" in x for x in lines)
    assert verify_installed(tmp_path / "box").passed

    upgraded = upgrade_box(store, tmp_path / "box", probes=cpu_machine())
    assert (upgraded.upgraded, upgraded.from_version, upgraded.to_version) == (True, "1.0.0", "1.1.0")
    assert upgraded.previous is None and not (tmp_path / ".box.previous").exists()

    with pytest.raises(UsageError, match="not an installed box"):
        upgrade_box(store, tmp_path / "nothing-here", probes=cpu_machine())
    with pytest.raises(HostError) as refused:  # a macOS machine: no release fits, each one's reason listed
        install_box(store, BOX, tmp_path / "mac", probes=HostProbes(platform=lambda: ("osx", "arm64")))
    assert isinstance(refused.value, ScrollcaseError) and refused.value.exit_code == 11
    assert not (tmp_path / "mac").exists() and os.listdir(tmp_path / "cache" / "downloads") == []


def test_list_releases_says_what_fits_as_install_would_choose(store_dir: Path) -> None:
    from scrollcase import list_releases

    listing = list_releases(str(store_dir), BOX, probes=cpu_machine())
    assert (listing.store, listing.box_id, listing.host.platform) == (LocalStore(store_dir).url, BOX, "linux")
    assert [(c.version, c.fits) for c in listing.selection.candidates] == [("1.1.0", True), ("1.0.0", True)]
    assert listing.selection.chosen is not None and listing.selection.chosen.version == "1.1.0"
    mac = list_releases(str(store_dir), BOX, probes=HostProbes(platform=lambda: ("osx", "arm64")))
    assert mac.selection.chosen is None and all("osx-arm64" in " ".join(c.reasons) for c in mac.selection.candidates)
