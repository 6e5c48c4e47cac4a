"""The README's first command, as a user runs it: `scrollcase demo`, offline, start to finish."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.build.sbom import validation_errors
from tests.integration.test_build_e2e import stage_line

REPO = Path(__file__).resolve().parents[2]

# The demo archive's sha256, keyed by what it is built from: this interpreter (the demo packages this
# CPython's stdlib) and the installed numpy wheel, on this machine's architecture.  A restructuring must
# leave these bytes alone; a new interpreter or numpy needs its own row (run the demo, add the digest).
# Changed on purpose twice: box.json gained `files` and `links` (every file's size and sha256: issue 17),
# and the archive became one zstd frame per package (issue 16).
# The demo's numpy package is made from this interpreter's numpy, dist-info included (INSTALLER and
# RECORD differ between pip versions and uv), so the key ends with the sha256 of numpy's RECORD: the row
# below is .ci/run's fresh venv; another venv skips with its key printed.
# (sys.version, numpy, machine) -> the demo archive's sha256.  Nothing else of the venv reaches the
# archive: the demo packs numpy's files with a RECORD of just those (the installed one also lists the
# console scripts, whose shebang names the venv), so a venv anywhere, by any pip, gives these bytes.
DEMO_ARCHIVE_SHA256: dict[tuple[str, str, str], str] = {
    ("3.11.7 (main, May  9 2026, 07:35:25) [GCC 12.2.0]", "2.4.6", "x86_64"): (
        "379a7bf612ec4500c530eb7084bb3dc3fd3f9fb4f9294f60749a71c6b7e5b6b5"
    ),
}


@pytest.mark.slow
def test_demo_command_builds_and_verifies_a_release(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", "w", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data["timings"]) == {"channel", "recipe", "lock", "build", "verify", "publish"}
    release = tmp_path / data["release"]
    assert release.parent == tmp_path / "w/.scrollcase/dist"
    manifest = json.loads(release.read_text())
    assert manifest["selfTest"]["passed"] and manifest["archive"]["sha256"] == data["sha256"]
    for stage in ("== channel", "== lock", stage_line("pack"), "== verify", "== publish"):
        assert stage in done.stderr
    store = tmp_path / "w/.scrollcase/store"
    keys = manifest["keys"]
    assert (store / keys["archive"]).read_bytes() == (release.parent / manifest["archive"]["name"]).read_bytes()
    assert json.loads((store / keys["release"]).read_text())["archive"]["sha256"] == data["sha256"]
    # The digest chain: the index records the manifest's sha256, the manifest the SBOM's and the archive's.
    index = json.loads((store / "boxes" / manifest["boxId"] / "index.json").read_text())
    entry = index["versions"][manifest["version"]][manifest["targetId"]]
    assert entry["releaseSha256"] == hashlib.sha256((store / keys["release"]).read_bytes()).hexdigest()
    sbom_file = release.parent / manifest["sbom"]["name"]
    sbom = sbom_file.read_bytes()
    assert manifest["sbom"]["sha256"] == hashlib.sha256(sbom).hexdigest()
    assert (store / keys["release"]).parent.joinpath(manifest["sbom"]["name"]).read_bytes() == sbom
    assert validation_errors(sbom) is None  # cyclonedx-python-lib's JSON Schema validation
    components = {c["name"]: c for c in json.loads(sbom)["components"]}
    numpy = pytest.importorskip("numpy")
    assert components["python"]["version"] == platform.python_version()
    assert components["numpy"]["version"] == numpy.__version__
    for name in ("python", "numpy"):
        assert components[name]["purl"].startswith(f"pkg:conda/{name}@{components[name]['version']}")
        assert {h["alg"] for h in components[name]["hashes"]} == {"SHA-256", "MD5"}
        assert all(len(h["content"]) in (32, 64) for h in components[name]["hashes"])
    assert len(data["published"]) == 4  # archive, sidecar, SBOM, manifest

    # A rerun rebuilds the same bytes, so publishing again uploads nothing.
    again = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", "w", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    rerun = json.loads(again.stdout)
    assert rerun["sha256"] == data["sha256"] and rerun["published"] == []

    # Installed from the store, the box verifies clean; a changed file is reported (exit 8).  Its own user cache:
    # the install hard-links files to the cache's shared copies, and the edit below must not reach the real
    # user cache's copies (the next run's install, and every box sharing them).
    env_py = {**env, "PATH": "/usr/bin:/bin", "SCROLLCASE_CACHE_DIR": str(tmp_path / "host-cache")}  # a CPU machine
    scrollcase = [sys.executable, "-m", "scrollcase"]
    box_id = manifest["boxId"]
    done = subprocess.run(
        [*scrollcase, "install", "--store", str(store), "--box", box_id, "installed", "--json"],
        capture_output=True,
        text=True,
        env=env_py,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    verify = [*scrollcase, "verify", "--installed", "installed", "--json"]
    clean = subprocess.run(verify, capture_output=True, text=True, env=env_py, cwd=tmp_path, timeout=600)
    assert clean.returncode == 0, clean.stderr
    assert json.loads(clean.stdout)["passed"] and json.loads(clean.stdout)["checked"] > 100
    numpy_init = next((tmp_path / "installed").rglob("numpy/__init__.py"))
    numpy_init.write_text(numpy_init.read_text() + "\nprint('planted')\n")
    dirty = subprocess.run(verify, capture_output=True, text=True, env=env_py, cwd=tmp_path, timeout=600)
    assert dirty.returncode == 8, dirty.stderr
    changes = json.loads(dirty.stdout)["changes"]
    assert [{k: c[k] for k in ("path", "change", "found")} for c in changes] == [
        {
            "path": numpy_init.relative_to(tmp_path / "installed").as_posix(),
            "change": "changed",
            "found": hashlib.sha256(numpy_init.read_bytes()).hexdigest(),
        }
    ]
    assert changes[0]["expected"] != changes[0]["found"]


def _demo_key() -> tuple[str, str, str]:
    numpy = pytest.importorskip("numpy")
    return (sys.version, numpy.__version__, platform.machine())


@pytest.mark.slow
def test_demo_archive_bytes_are_pinned(tmp_path: Path) -> None:
    key = _demo_key()
    if key not in DEMO_ARCHIVE_SHA256:
        pytest.skip(f"no pinned demo archive sha256 for (sys.version, numpy, machine) = {key!r}")
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "demo", "--workdir", "w", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    digest = hashlib.sha256((tmp_path / data["archive"]).read_bytes()).hexdigest()
    assert (digest, data["sha256"]) == (DEMO_ARCHIVE_SHA256[key], digest)
