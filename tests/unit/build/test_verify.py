"""verify_release on synthetic releases (real archives, no build): every layout rule, the SBOM and
frame-table links, and the re-measured GPU evidence."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from scrollcase.build import verify
from scrollcase.errors import BuildError, HostError, IntegrityError, ScrollcaseError
from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import BoxAsset, BoxJson, dump_box_json
from scrollcase.format.release import ArchiveInfo, ReleaseManifest, SbomInfo, dump_release, object_keys
from scrollcase.recipe.model import SelfTest, Target
from tests.support.releases import box_json_for, evidence_for, make_manifest, write_release


def test_self_test_on_another_platform_is_refused_with_exit_11(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/build.md (verify): "`--self-test` on a machine of another platform is refused (exit 11)"
    -- before anything is unpacked."""
    release = write_release(tmp_path / "dist")
    monkeypatch.setattr(verify, "host_platform", lambda: ("osx", "arm64"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(HostError, match=r"linux-x86_64-cuda12\.4 on a osx-arm64 machine") as caught:
        verify.verify_release(release.manifest_path, self_test=True, temp_parent=scratch)
    assert caught.value.exit_code == 11
    assert list(scratch.iterdir()) == []


# ---------------------------------------------------------------- a release with a runnable layout


BASE_PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def _tree(root: Path, box: BoxJson, *, executable: bool = True, runnable: bool = False) -> Path:
    """The unpacked layout of ``box``: its box.json and its interpreter, a stub that is never run or
    (``runnable``) a copy of this CPython made a venv by a ``pyvenv.cfg`` (so its sys.prefix is the box's)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "box.json").write_bytes(dump_box_json(box))
    python = root / box.pythonEntryPoint
    python.parent.mkdir(parents=True, exist_ok=True)
    if runnable:
        shutil.copy2(BASE_PYTHON, python)
        (root / box.envDir / "pyvenv.cfg").write_text(f"home = {BASE_PYTHON.parent}\n")
    else:
        python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755 if executable else 0o644)
    return root


def _release(
    tmp: Path,
    *,
    box_update: dict[str, object] | None = None,
    framed: bool = False,
    sbom: bytes | None = None,
    cuda: str | None = "12.4",
    runnable: bool = False,
    manifest_update: dict[str, object] | None = None,
    executable: bool = True,
) -> tuple[Path, ReleaseManifest]:
    """A packed release whose archive holds ``box.json`` (edited by ``box_update``) and its interpreter."""
    draft = make_manifest(size=0, sha256="0" * 64, cuda=cuda).model_copy(update=manifest_update or {})
    box = box_json_for(draft).model_copy(update=box_update or {})
    dist = tmp / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    tree = _tree(tmp / "tree", box, runnable=runnable, executable=executable)
    packed = pack_tree(tree, dist / draft.archive.name, level=1)
    archive = ArchiveInfo(
        name=draft.archive.name,
        size=packed.size,
        sha256=packed.sha256,
        frames=frame_table(packed.frames) if framed else None,
    )
    manifest = draft.model_copy(update={"archive": archive})
    if sbom is not None:
        name = draft.archive.name.replace(".tar.zst", ".sbom.json")
        (dist / name).write_bytes(sbom)
        info = SbomInfo(name=name, size=len(sbom), sha256=hashlib.sha256(sbom).hexdigest())
        manifest = manifest.model_copy(update={"sbom": info})
    path = dist / draft.archive.name.replace(".tar.zst", ".release.json")
    path.write_bytes(dump_release(manifest))
    return path, manifest


def _scratch(tmp: Path) -> Path:
    (tmp / "scratch").mkdir()
    return tmp / "scratch"


@pytest.mark.skipif(os.name == "nt", reason="the synthetic interpreter is a POSIX script")
def test_a_sound_release_verifies_naming_each_check_and_leaves_no_folder(tmp_path: Path) -> None:
    path, manifest = _release(tmp_path)
    scratch = _scratch(tmp_path)
    report = verify.verify_release(path, self_test=False, temp_parent=scratch)
    assert report.layout_checks == (
        "archive size and sha256",
        "box.json valid and matches the manifest",
        "venv/bin/python exists and is executable",
    )
    assert report.self_test is None and report.archive == path.parent / manifest.archive.name
    assert report.to_json() == {
        "release": str(path),
        "archive": str(path.parent / manifest.archive.name),
        "passed": True,
        "archiveSha256": manifest.archive.sha256,
        "layout": list(report.layout_checks),
        "selfTest": None,
    }
    assert list(scratch.iterdir()) == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.self_test = None  # type: ignore[misc]


@pytest.mark.skipif(os.name == "nt", reason="the synthetic interpreter is a POSIX script")
def test_the_frame_table_and_the_sbom_are_checked_when_the_manifest_has_them(tmp_path: Path) -> None:
    path, _ = _release(tmp_path, framed=True, sbom=b'{"bomFormat": "CycloneDX"}')
    report = verify.verify_release(path, self_test=False, temp_parent=_scratch(tmp_path))
    assert report.layout_checks[0] == "archive size and sha256, frame table"
    assert report.layout_checks[-1] == "SBOM size and sha256"


@pytest.mark.skipif(os.name == "nt", reason="the synthetic interpreter is a POSIX script")
@pytest.mark.parametrize(
    ("damage", "said"), [("edited", r"is \d+ bytes with sha256 \w+, but \S+ records"), ("missing", "not beside it")]
)
def test_an_sbom_that_is_not_the_recorded_one_is_refused(tmp_path: Path, damage: str, said: str) -> None:
    path, manifest = _release(tmp_path, sbom=b'{"bomFormat": "CycloneDX"}')
    assert manifest.sbom is not None
    sbom = path.parent / manifest.sbom.name
    if damage == "edited":
        sbom.write_bytes(b'{"bomFormat": "CycloneDx"}')  # same size, other bytes
    else:
        sbom.unlink()
    with pytest.raises(IntegrityError, match="do not describe one sound release") as caught:
        verify.verify_release(path, self_test=False, temp_parent=_scratch(tmp_path))
    assert [p.key for p in caught.value.problems] == ["sbom"]
    assert re.search(said, caught.value.problems[0].message)


@pytest.mark.skipif(os.name == "nt", reason="the synthetic interpreter is a POSIX script")
def test_no_sbom_in_the_manifest_means_no_sbom_check(tmp_path: Path) -> None:
    path, _ = _release(tmp_path)
    report = verify.verify_release(path, self_test=False, temp_parent=_scratch(tmp_path))
    assert "SBOM size and sha256" not in report.layout_checks


def test_a_box_json_that_disagrees_with_the_manifest_is_refused_with_its_problems(tmp_path: Path) -> None:
    path, _ = _release(tmp_path, box_update={"version": "9.9.9"})
    scratch = _scratch(tmp_path)
    with pytest.raises(IntegrityError, match="do not describe one sound release") as caught:
        verify.verify_release(path, self_test=False, temp_parent=scratch)
    assert [(p.key, p.message) for p in caught.value.problems] == [
        ("version", "box.json and the release manifest disagree: box.json says '9.9.9', the manifest says '1.0.0'")
    ]
    assert list(scratch.iterdir()) == []


def test_an_archive_without_box_json_is_refused(tmp_path: Path) -> None:
    release = write_release(tmp_path / "plain")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "payload.bin").write_bytes(b"x")
    packed = pack_tree(tmp_path / "tree", release.archive_path, level=1)
    manifest = release.manifest.model_copy(
        update={"archive": release.manifest.archive.model_copy(update={"size": packed.size, "sha256": packed.sha256})}
    )
    release.manifest_path.write_bytes(dump_release(manifest))
    with pytest.raises(IntegrityError, match=r"the archive has no box\.json at its root"):
        verify.verify_release(release.manifest_path, self_test=False, temp_parent=_scratch(tmp_path))


# ---------------------------------------------------------------- layout_problems, one rule at a time


def _sound(tmp: Path) -> tuple[Path, BoxJson, ReleaseManifest]:
    manifest = make_manifest(size=1, sha256="0" * 64)
    box = box_json_for(manifest)
    return _tree(tmp / "box", box), box, manifest


def test_a_sound_layout_has_no_problems(tmp_path: Path) -> None:
    root, box, manifest = _sound(tmp_path)
    assert verify.layout_problems(root, box, manifest, windows=False) == []


@pytest.mark.parametrize("env_dir", ["env", "zenv"])  # sorting before and after the right one, "venv"
def test_env_dir_must_hold_the_interpreter(tmp_path: Path, env_dir: str) -> None:
    root, box, manifest = _sound(tmp_path)
    problems = verify.layout_problems(root, box.model_copy(update={"envDir": env_dir}), manifest, windows=False)
    assert [(p.message, p.key, p.value) for p in problems] == [
        ("envDir does not contain pythonEntryPoint", "envDir", env_dir)
    ]


def test_a_missing_interpreter_is_a_problem(tmp_path: Path) -> None:
    root, box, manifest = _sound(tmp_path)
    (root / box.pythonEntryPoint).unlink()
    problems = verify.layout_problems(root, box, manifest, windows=False)
    assert [(p.message, p.key, p.value) for p in problems] == [
        ("the interpreter is missing from the archive", "pythonEntryPoint", "venv/bin/python")
    ]


@pytest.mark.skipif(os.name == "nt", reason="POSIX execute bits")
def test_an_interpreter_that_cannot_be_executed_is_a_problem_except_on_windows(tmp_path: Path) -> None:
    root, box, manifest = _sound(tmp_path)
    (root / box.pythonEntryPoint).chmod(0o644)
    problems = verify.layout_problems(root, box, manifest, windows=False)
    assert [(p.message, p.key) for p in problems] == [("the interpreter is not executable", "pythonEntryPoint")]
    windows_box = box.model_copy(update={"pythonEntryPoint": "venv/python.exe"})
    windows_manifest = manifest.model_copy(update={"pythonEntryPoint": "venv/python.exe"})
    _tree(root, windows_box, executable=False)
    assert verify.layout_problems(root, windows_box, windows_manifest, windows=True) == []


def test_a_bundled_asset_must_be_in_the_model_cache(tmp_path: Path) -> None:
    root, box, manifest = _sound(tmp_path)
    assets = [
        BoxAsset(name="weights", path="w/model.bin", sha256="0" * 64, size=1, bundled=True),
        BoxAsset(name="later", path="w/later.bin", sha256="0" * 64, size=1, bundled=False),
    ]
    box = box.model_copy(update={"assets": assets})
    problems = verify.layout_problems(root, box, manifest, windows=False)
    assert [(p.message, p.key, p.value) for p in problems] == [
        ("a bundled asset is missing", "assets.weights", "w/model.bin")
    ]
    (root / "demo" / "w").mkdir(parents=True)
    (root / "demo" / "w" / "model.bin").write_bytes(b"x")
    assert verify.layout_problems(root, box, manifest, windows=False) == []


# ---------------------------------------------------------------- GPU evidence re-measured


def test_evidence_the_box_no_longer_reports_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, box, manifest = _sound(tmp_path)
    monkeypatch.setattr(verify.evidence, "gather_evidence", lambda *_: evidence_for("12.6"))
    with pytest.raises(IntegrityError, match=r"other GPU evidence than its box\.json records") as caught:
        verify.recheck_evidence(root, box, manifest)
    assert caught.value.problems[0].key == "gpu"


def test_evidence_that_still_matches_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, box, manifest = _sound(tmp_path)
    monkeypatch.setattr(verify.evidence, "gather_evidence", lambda *_: evidence_for("12.4"))
    verify.recheck_evidence(root, box, manifest)


def test_evidence_must_fit_the_target_even_without_a_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, box, manifest = _sound(tmp_path)
    monkeypatch.setattr(verify.evidence, "gather_evidence", lambda *_: evidence_for(None))
    with pytest.raises(BuildError, match=r"unpacked box is not what linux-x86_64-cuda12\.4 promises"):
        verify.recheck_evidence(root, box.model_copy(update={"gpu": None}), manifest)


@pytest.mark.skipif(not BASE_PYTHON.is_file(), reason="needs a POSIX CPython under sys.base_prefix/bin")
def test_the_self_test_runs_in_the_unpacked_box_and_re_measures_its_evidence(tmp_path: Path) -> None:
    """A CPU box whose interpreter is this test's Python: its self-test (``import json``) passes and the
    evidence it reports (no GPU runtime) is what box.json records."""
    path, _ = _release(tmp_path, cuda=None, runnable=True)
    scratch = _scratch(tmp_path)
    report = verify.verify_release(path, self_test=True, temp_parent=scratch, junit=tmp_path / "junit.xml")
    assert report.self_test is not None and report.self_test.passed
    assert {"entrypoint venv/bin/python", "import json"} <= {c.name for c in report.self_test.checks}
    assert report.layout_checks[-1] == "GPU evidence re-measured with the box's interpreter"
    assert report.to_json()["selfTest"] == report.self_test.model_dump(mode="json")
    assert (tmp_path / "junit.xml").is_file()
    assert list(scratch.iterdir()) == []


@pytest.mark.skipif(not BASE_PYTHON.is_file(), reason="needs a POSIX CPython under sys.base_prefix/bin")
def test_a_failing_self_test_is_raised(tmp_path: Path) -> None:
    edit = {"selfTest": SelfTest(imports=["no_such_module_here"])}
    path, _ = _release(tmp_path, cuda=None, runnable=True, box_update=edit)
    with pytest.raises(ScrollcaseError, match="no_such_module_here"):
        verify.verify_release(path, self_test=True, temp_parent=_scratch(tmp_path))


def test_a_windows_release_needs_no_execute_bit_on_its_interpreter(tmp_path: Path) -> None:
    """The manifest's platform decides: a windows box's python.exe is checked to exist, not to be executable."""
    windows = {
        "target": Target(platform="windows", arch="x86_64", accelerator="cpu"),
        "targetId": "windows-x86_64-cpu",
        "pythonEntryPoint": "venv/python.exe",
        "gpu": evidence_for(None),
    }
    keys = object_keys("demo-box", "1.0.0", "windows-x86_64-cpu", "demo-box-1.0.0-linux-x86_64-cpu.tar.zst")
    manifest_update = {**windows, "keys": keys}
    path, _ = _release(tmp_path, cuda=None, box_update=windows, manifest_update=manifest_update, executable=False)
    report = verify.verify_release(path, self_test=False, temp_parent=_scratch(tmp_path))
    assert report.layout_checks[2] == "venv/python.exe exists and is executable"


def test_each_bundled_asset_is_looked_for_not_only_the_model_cache(tmp_path: Path) -> None:
    """A model cache that holds one bundled asset does not vouch for another that is missing from it."""
    root, box, manifest = _sound(tmp_path)
    assets = [
        BoxAsset(name="weights", path="w/model.bin", sha256="0" * 64, size=1, bundled=True),
        BoxAsset(name="tokenizer", path="w/tokenizer.json", sha256="0" * 64, size=1, bundled=True),
    ]
    (root / "demo" / "w").mkdir(parents=True)
    (root / "demo" / "w" / "model.bin").write_bytes(b"x")
    problems = verify.layout_problems(root, box.model_copy(update={"assets": assets}), manifest, windows=False)
    assert [(p.key, p.value) for p in problems] == [("assets.tokenizer", "w/tokenizer.json")]
