"""End to end: a real box from a real relocatable CPython and real numpy, built, unpacked, moved, run,
verified, tampered with, rebuilt elsewhere, and refused when it must be."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from junitparser import JUnitXml

from scrollcase.build.pipeline import STAGES, BuildResult, execute_build
from scrollcase.build.plan import LockedInstall, locked_install, plan_build
from scrollcase.build.sbom import validation_errors
from scrollcase.build.verify import verify_release
from scrollcase.demo.run import DEMO_CHANNEL_NAME, demo_target, make_demo_channel, write_demo_recipe
from scrollcase.errors import BuildError, HostError, IntegrityError, SelfTestError
from scrollcase.format.archive.peek import read_member
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER
from scrollcase.io.fetch import default_fetchers, fetch_file
from scrollcase.io.proc import run_python
from scrollcase.lock import solve as engine
from scrollcase.recipe.loader import RecipeDir, resolve_recipe
from tests.support.wheels import make_wheel

pytestmark = pytest.mark.slow


def stage_line(name: str) -> str:
    """How the build announces stage ``name`` (``[7/9] pack``)."""
    return f"[{STAGES.index(name) + 1}/{len(STAGES)}] {name}"


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def demo_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_demo_channel(tmp_path_factory.mktemp("channel") / "demo", demo_target().subdir)


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One package/asset cache for the builds that are not about caching, so they link warm."""
    return tmp_path_factory.mktemp("cache")


def make_recipe(root: Path, channel: Path, **changes: object) -> RecipeDir:
    """The demo recipe under ``root`` (optionally changed), locked against ``channel``."""
    folder = write_demo_recipe(root / "recipes", demo_target(), root / "assets")
    if changes:
        data = json.loads((folder / "recipe.json").read_text())
        data.update(changes)
        (folder / "recipe.json").write_text(json.dumps(data, indent=2))
    recipe_dir = resolve_recipe(str(folder))
    engine.lock_recipe(recipe_dir, channel_overrides={DEMO_CHANNEL_NAME: channel.as_uri()})
    return recipe_dir


def build(recipe_dir: RecipeDir, root: Path, **kwargs: object) -> BuildResult:
    plan = plan_build(recipe_dir, out_dir=root / "dist", state_dir=root / "state", **kwargs)  # type: ignore[arg-type]
    records = engine.locked_records(recipe_dir.lock_file, demo_target().subdir)
    return execute_build(plan, locked=LockedInstall(tuple(records)), fetchers=default_fetchers())


@pytest.fixture(scope="module")
def built(demo_channel: Path, shared_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    root = tmp_path_factory.mktemp("build1")
    return build(make_recipe(root, demo_channel), root, cache_dir=shared_cache, env={})  # not on GitHub Actions


def test_build_writes_archive_sbom_and_release_only(built: BuildResult) -> None:
    names = sorted(p.name for p in built.release.parent.iterdir())
    assert names == sorted([built.archive.name, built.plan.sbom_path.name, built.release.name])
    manifest = json.loads(built.release.read_text())
    assert manifest["archive"]["sha256"] == built.manifest.archive.sha256
    # packed without its digest, hashed by the self-test's unpack: the manifest's is the file's own
    assert built.manifest.archive.sha256 == hashlib.sha256(built.archive.read_bytes()).hexdigest()
    assert manifest["selfTest"]["passed"] is True
    assert [c["kind"] for c in manifest["selfTest"]["checks"]] == [
        "entrypoint",
        "import",
        "import",
        "file",
        "code",
    ]
    assert manifest["assets"][0]["bundled"] is True and "url" not in manifest["assets"][0]
    # The longest DEST, known before downloading (#17): 196 bytes when a binary file embeds the placeholder
    box = json.loads(read_member(built.archive, "box.json") or b"{}")
    binary = any(f["mode"] == "binary" for f in box["relocation"]["files"])
    assert manifest["relocation"] == {"placeholderBytes": 196, **({"maxDestBytes": 196} if binary else {})}
    assert not (built.plan.work_dir).exists()  # work folder removed after success


def test_unpacked_box_runs_after_moving(built: BuildResult, tmp_path: Path) -> None:
    first = tmp_path / "first" / "box"
    unpack_archive(
        built.archive,
        first,
        expected_size=built.manifest.archive.size,
        expected_sha256=built.manifest.archive.sha256,
    )
    moved = tmp_path / "elsewhere" / "moved-box"
    moved.parent.mkdir()
    shutil.move(str(first), moved)
    shutil.rmtree(tmp_path / "first")
    run = run_python(
        moved / "venv/bin/python", ["-c", "import sys, numpy; print(numpy.ones(3).sum()); print(sys.prefix)"]
    )
    assert run.ok, run.stderr
    total, prefix = run.stdout.split()
    assert total == "3.0"
    assert Path(prefix).resolve() == (moved / "venv").resolve()


def test_no_build_path_leaks_into_archive(built: BuildResult, tmp_path: Path) -> None:
    box = tmp_path / "box"
    unpack_archive(
        built.archive,
        box,
        expected_size=built.manifest.archive.size,
        expected_sha256=built.manifest.archive.sha256,
    )
    build_root = str(built.plan.work_dir.parent.parent.parent).encode()
    leaks = [p for p in box.rglob("*") if p.is_file() and not p.is_symlink() and build_root in p.read_bytes()]
    assert leaks == []
    meta = json.loads(next((box / "venv/conda-meta").glob("numpy-*.json")).read_text())
    assert "extracted_package_dir" not in meta and "source" not in meta.get("link", {})


def test_verify_passes_and_writes_junit(built: BuildResult, tmp_path: Path) -> None:
    junit = tmp_path / "verify.xml"
    report = verify_release(built.release, self_test=True, junit=junit, temp_parent=tmp_path)
    assert report.self_test is not None and report.self_test.passed
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert suite.tests == 5 and suite.failures == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verify.xml"]  # temp folder removed


def _tampered_copy(built: BuildResult, dest: Path, change: str) -> Path:
    dest.mkdir()
    shutil.copy(built.release, dest / built.release.name)
    data = bytearray(built.archive.read_bytes())
    if change == "flip":
        data[len(data) // 2] ^= 0x01
    else:
        data = data[: len(data) - 1000]
    (dest / built.archive.name).write_bytes(bytes(data))
    return dest / built.release.name


@pytest.mark.parametrize("change", ["flip", "truncate"])
def test_verify_rejects_tampered_archive(built: BuildResult, tmp_path: Path, change: str) -> None:
    release = _tampered_copy(built, tmp_path / "copy", change)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(IntegrityError) as caught:
        verify_release(release, self_test=True, temp_parent=scratch)
    assert built.archive.name in str(caught.value) or "sha256" in str(caught.value)
    assert list(scratch.iterdir()) == []
    assert sorted(p.name for p in release.parent.iterdir()) == sorted([built.archive.name, built.release.name])


def test_verify_rejects_an_sbom_that_is_not_the_manifests(built: BuildResult, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in (built.release, built.archive):
        shutil.copy(path, copy / path.name)
    sbom = copy / built.plan.sbom_path.name
    sbom.write_bytes(built.plan.sbom_path.read_bytes().replace(b'"numpy"', b'"numpy-free"'))
    with pytest.raises(IntegrityError, match=r"sbom\.json is \d+ bytes with sha256 \w+, but .* records"):
        verify_release(copy / built.release.name, self_test=False)
    sbom.unlink()
    with pytest.raises(IntegrityError, match=r"names the SBOM \S+\.sbom\.json, which is not beside it"):
        verify_release(copy / built.release.name, self_test=False)
    shutil.copy(built.plan.sbom_path, sbom)
    assert "SBOM size and sha256" in verify_release(copy / built.release.name, self_test=False).layout_checks


def test_cli_verify_reports_tampering_without_traceback(built: BuildResult, tmp_path: Path) -> None:
    release = _tampered_copy(built, tmp_path / "copy", "flip")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "verify", str(release), "--self-test"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 8
    assert "Traceback" not in done.stderr and "sha256" in done.stderr


def test_build_is_reproducible_across_working_dirs(
    built: BuildResult, demo_channel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "a" / "completely" / "different" / "place"
    other.mkdir(parents=True)
    monkeypatch.chdir(other)
    second = build(make_recipe(Path("."), demo_channel), Path("."))
    assert second.manifest.archive.sha256 == built.manifest.archive.sha256
    assert second.archive.read_bytes() == built.archive.read_bytes()


def box_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_bytecode_ships_reproducibly_and_is_what_the_box_imports(
    built: BuildResult, demo_channel: Path, shared_cache: Path, tmp_path: Path
) -> None:
    """Two builds in two folders: the same archive, .pyc included; no .pyc names the build folder or the
    placeholder (none is a relocation target); the unpacked box imports from its .pyc and writes nothing."""
    second = build(make_recipe(tmp_path / "second", demo_channel), tmp_path / "second", cache_dir=shared_cache)
    assert second.manifest.archive.sha256 == built.manifest.archive.sha256
    box = tmp_path / "box"
    unpack_archive(
        second.archive, box, expected_size=second.manifest.archive.size, expected_sha256=second.manifest.archive.sha256
    )
    pycs = sorted(box.rglob("*.pyc"))
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"  # the demo box packages this CPython
    names = {p.relative_to(box).as_posix() for p in pycs}
    assert any(n.endswith(f"/json/__pycache__/__init__.{tag}.pyc") for n in names)  # the standard library
    assert any(n.endswith(f"/numpy/__pycache__/__init__.{tag}.pyc") for n in names)  # site-packages
    for build_root in (built.plan.work_dir.parent.parent.parent, tmp_path / "second"):
        assert not [p for p in pycs if str(build_root).encode() in p.read_bytes()]
    assert not [p for p in pycs if BOX_PREFIX_PLACEHOLDER.encode() in p.read_bytes()]
    assert all(int.from_bytes(p.read_bytes()[4:8], "little") == 0b01 for p in pycs)  # unchecked-hash
    relocated = json.loads((box / "box.json").read_text())["relocation"]["files"]
    assert not [f for f in relocated if f["path"].endswith(".pyc")]
    before = box_files(box)
    run = run_python(box / "venv/bin/python", ["-v", "-c", "import json, numpy; print(numpy.ones(2).sum())"])
    assert run.ok and run.stdout.strip() == "2.0", run.stderr[-2000:]
    assert f"/numpy/__pycache__/__init__.{tag}.pyc'" in run.stderr  # "# code object from '<pyc>'"
    assert box_files(box) == before  # nothing compiled, nothing written


def test_import_missing_from_box_fails_though_host_has_it(
    demo_channel: Path, shared_cache: Path, tmp_path: Path
) -> None:
    import yaml  # noqa: F401 - the host has it; the box must not borrow it

    recipe_dir = make_recipe(tmp_path, demo_channel, selfTest={"imports": ["numpy", "yaml"], "files": []})
    with pytest.raises(SelfTestError) as caught:
        build(recipe_dir, tmp_path, cache_dir=shared_cache)
    text = caught.value.render()
    assert "import yaml" in text and "No module named 'yaml'" in text and "import numpy" not in text
    assert not (tmp_path / "dist").exists() or list((tmp_path / "dist").iterdir()) == []
    junit = tmp_path / "state/reports" / f"selftest-{recipe_dir.recipe.recipeId}.xml"
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert suite.failures == 1
    failed = [case for case in suite if case.result]
    assert failed[0].name == "import yaml" and failed[0]._elem.get("line")


def test_cross_build_is_refused(demo_channel: Path, tmp_path: Path) -> None:
    recipe_dir = make_recipe(tmp_path, demo_channel)
    with pytest.raises(HostError) as caught:
        plan_build(recipe_dir, host=("osx", "arm64"))
    assert "natively" in caught.value.message


def test_interrupted_build_reruns_cleanly(demo_channel: Path, shared_cache: Path, tmp_path: Path) -> None:
    recipe_dir = make_recipe(tmp_path, demo_channel)
    plan = plan_build(
        recipe_dir,
        out_dir=tmp_path / "dist",
        state_dir=tmp_path / "state",
        cache_dir=shared_cache / "interrupted",
    )
    records = engine.locked_records(recipe_dir.lock_file, demo_target().subdir)

    def dies(url: str, out: object, offset: int) -> None:
        raise ConnectionResetError("network went away")

    with pytest.raises(BuildError, match="interrupted"):
        execute_build(plan, locked=LockedInstall(tuple(records)), fetchers={"file": dies})
    assert not (tmp_path / "dist").exists() or list((tmp_path / "dist").iterdir()) == []
    assert plan.work_dir.exists()  # leftovers live in the work folder, which the rerun discards
    result = execute_build(plan, locked=LockedInstall(tuple(records)), fetchers={"file": fetch_file})
    assert sorted(p.name for p in (tmp_path / "dist").iterdir()) == sorted(
        [result.archive.name, result.plan.sbom_path.name, result.release.name]
    )


def test_on_demand_weights_stay_out_of_the_box(demo_channel: Path, shared_cache: Path, tmp_path: Path) -> None:
    recipe_dir = make_recipe(
        tmp_path,
        demo_channel,
        selfTest={"imports": ["numpy"], "files": ["model-cache/scrollcase-demo/weights.json"]},
    )
    result = build(recipe_dir, tmp_path, weights="on-demand", cache_dir=shared_cache)
    asset = result.manifest.assets[0]
    assert not asset.bundled and asset.url and asset.url.startswith("file://")
    assert asset.url.endswith("/weights.json")
    assert result.manifest.selfTest is not None
    file_check = next(c for c in result.manifest.selfTest.checks if c.kind == "file")
    assert file_check.passed and file_check.message.startswith("skipped")


def test_cli_build_json(demo_channel: Path, tmp_path: Path) -> None:
    recipe_dir = make_recipe(tmp_path, demo_channel)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "build", str(recipe_dir.path), "--json", "--out", "out"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert Path(tmp_path / data["release"]).is_file() and data["targetId"] == demo_target().target_id
    assert stage_line("self-test") in done.stderr


def test_killed_build_leaves_no_partial_output_and_reruns(demo_channel: Path, tmp_path: Path) -> None:
    """SIGKILL the CLI between stages (as a cancelled CI job would), then simply run it again."""
    recipe_dir = make_recipe(tmp_path, demo_channel)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "scrollcase", "build", str(recipe_dir.path), "--out", "dist"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(stage_line("pack")):
            proc.kill()
            break
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert not (tmp_path / "dist").exists() or list((tmp_path / "dist").iterdir()) == []
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.suffix for p in (tmp_path / "dist").iterdir()) == [".json", ".json", ".zst"]


def add_pypi_wheel(lock: Path, wheel: Path) -> None:
    """Pin ``wheel`` in a v7 pixi.lock the way pixi pins a PyPI package (URL + sha256)."""
    data = yaml.safe_load(lock.read_text())
    url = wheel.as_uri()
    data["environments"]["default"]["packages"][demo_target().subdir].append({"pypi": url})
    data["packages"].append(
        {
            "pypi": url,
            "name": "tinywheel",
            "version": "1.0",
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "requires_python": ">=3.8",
        }
    )
    lock.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_locked_pypi_wheel_is_installed_and_relocated(demo_channel: Path, shared_cache: Path, tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path / "wheels",
        "tinywheel",
        "1.0",
        {"tinywheel/__init__.py": b"ANSWER = 42\n\ndef main():\n    print(ANSWER)\n"},
        {"tinywheel-answer": "tinywheel:main"},
    )
    recipe_dir = make_recipe(
        tmp_path,
        demo_channel,
        selfTest={
            "imports": ["numpy", "tinywheel"],
            "files": [],
            "pythonCode": "import tinywheel; assert tinywheel.ANSWER == 42",
        },
    )
    add_pypi_wheel(recipe_dir.lock_file, wheel)
    plan = plan_build(recipe_dir, out_dir=tmp_path / "dist", state_dir=tmp_path / "state", cache_dir=shared_cache)
    locked = locked_install(plan)
    assert [(w.name, w.version) for w in locked.wheels] == [("tinywheel", "1.0")]
    result = execute_build(plan, locked=locked, fetchers=default_fetchers())
    assert result.manifest.selfTest is not None and result.manifest.selfTest.passed
    box = tmp_path / "somewhere else" / "box"
    unpack_archive(
        result.archive, box, expected_size=result.manifest.archive.size, expected_sha256=result.manifest.archive.sha256
    )
    tool = subprocess.run(
        [str(box / "venv/bin/tinywheel-answer")],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert (tool.returncode, tool.stdout) == (0, "42\n"), tool.stderr
    record = box / "venv/lib/python3.11/site-packages/tinywheel-1.0.dist-info/INSTALLER"
    assert record.read_text() == "scrollcase\n"
    sbom = json.loads(plan.sbom_path.read_bytes())
    (wheel_component,) = [c for c in sbom["components"] if c["purl"].startswith("pkg:pypi/")]
    assert wheel_component["purl"] == "pkg:pypi/tinywheel@1.0"
    assert wheel_component["hashes"] == [{"alg": "SHA-256", "content": locked.wheels[0].sha256}]


def test_a_wheel_changed_after_locking_fails_the_build_before_output(
    demo_channel: Path, shared_cache: Path, tmp_path: Path
) -> None:
    wheel = make_wheel(tmp_path / "wheels", "tinywheel", "1.0", {"tinywheel/__init__.py": b"ANSWER = 42\n"})
    recipe_dir = make_recipe(tmp_path, demo_channel)
    add_pypi_wheel(recipe_dir.lock_file, wheel)
    make_wheel(tmp_path / "wheels", "tinywheel", "1.0", {"tinywheel/__init__.py": b"ANSWER = 666\n"})
    plan = plan_build(recipe_dir, out_dir=tmp_path / "dist", state_dir=tmp_path / "state", cache_dir=shared_cache)
    with pytest.raises(IntegrityError, match="does not match the lock"):
        execute_build(plan, locked=locked_install(plan), fetchers=default_fetchers())
    assert not (tmp_path / "dist").exists() or list((tmp_path / "dist").iterdir()) == []


def test_a_rebuild_links_wheels_from_the_unpacked_cache_into_the_same_bytes(demo_channel: Path, tmp_path: Path) -> None:
    """The second build neither fetches nor inflates the wheel (it is gone) and packs the same archive."""
    wheel = make_wheel(tmp_path / "wheels", "tinywheel", "1.0", {"tinywheel/__init__.py": b"ANSWER = 42\n"})
    wheel_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    digests = []
    lines: list[str] = []
    for attempt in ("fills the cache", "links from it"):
        root = tmp_path / attempt
        recipe_dir = make_recipe(root, demo_channel)
        add_pypi_wheel(recipe_dir.lock_file, wheel)
        if attempt == "links from it":
            wheel.unlink()  # a fetch would fail now: the lock's file:// wheel is gone
        plan = plan_build(recipe_dir, out_dir=root / "dist", state_dir=root / "state", cache_dir=cache)
        result = execute_build(plan, locked=locked_install(plan), fetchers=default_fetchers(), progress=lines.append)
        digests.append(result.manifest.archive.sha256)
        frames = result.manifest.archive.frames or []
        assert "wheel/tinywheel-1.0" in [f.name for f in frames]
    assert digests[0] == digests[1]
    assert [p.name for p in (cache / "unpacked").iterdir()] == [wheel_sha]
    reused = [line.split()[0] for line in lines if "frames reused" in line]
    # The second pack copies the frames of unchanged units from the pack cache (at most the few units of
    # files each build makes anew may differ) and still gives the same bytes.
    assert reused[0] == "0" and int(reused[1]) >= len(frames) - 3


def test_the_sbom_is_valid_cyclonedx_and_its_digest_is_in_the_manifest(built: BuildResult) -> None:
    sbom = built.plan.sbom_path.read_bytes()
    assert validation_errors(sbom) is None  # cyclonedx-python-lib's strict JSON Schema validator
    info = built.manifest.sbom
    assert info is not None and info.name == built.archive.name.replace(".tar.zst", ".sbom.json")
    assert (info.size, info.sha256) == (len(sbom), hashlib.sha256(sbom).hexdigest())
    doc = json.loads(sbom)
    assert doc["specVersion"] == "1.6" and doc["metadata"]["component"]["name"] == built.manifest.boxId
    assert doc["metadata"]["component"]["hashes"] == [{"alg": "SHA-256", "content": built.manifest.archive.sha256}]
    by_name = {c["name"]: c for c in doc["components"]}
    for name in ("python", "numpy"):
        assert by_name[name]["purl"].startswith(f"pkg:conda/{name}@{by_name[name]['version']}?build=")
        assert {h["alg"] for h in by_name[name]["hashes"]} == {"SHA-256", "MD5"}
    assert built.manifest.provenance is None  # not on GitHub Actions: the bytes stay reproducible
