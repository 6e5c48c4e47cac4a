"""``scrollcase build``: recipe + lock -> box archive + release manifest, in visible stages.

:func:`scrollcase.build.plan.plan_build` is pure (what to do, where, and whether this host may do it);
:func:`execute_build` runs the stages.  Everything is made in a work folder under the state folder
(``.scrollcase/work``); only complete files are renamed into the output folder, archive first and release
manifest last, so an interrupted build leaves nothing half-written there and can simply be rerun.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollcase.build import assets as asset_mod
from scrollcase.build import bytecode as bytecode_mod
from scrollcase.build import conda as install
from scrollcase.build import sbom as sbom_mod
from scrollcase.build import selftest
from scrollcase.build.plan import BuildPlan, LockedInstall
from scrollcase.errors import BuildError, Problem, SelfTestError, describe_path
from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import PackResult, UnhashedPack, pack_tree_unhashed
from scrollcase.format.archive.packcache import PackCache
from scrollcase.format.archive.tar import FIXED_MTIME
from scrollcase.format.archive.unpack import absolute_as_given, unpack_archive
from scrollcase.format.boxjson import BoxAsset, BoxJson, dump_box_json
from scrollcase.format.filedigests import TreeDigests, digest_tree
from scrollcase.format.identity import identity_fields, identity_of
from scrollcase.format.layout import BOX_JSON, BoxLayout
from scrollcase.format.release import (
    ArchiveInfo,
    BuiltBy,
    ReleaseManifest,
    ReleaseRelocation,
    SbomInfo,
    SelfTestReport,
    dump_release,
    object_keys,
    release_relocation,
)
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, RelocationInfo, scan_prefix_files
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.fetch import Fetcher
from scrollcase.io.files import move_into_place, write_atomic
from scrollcase.progress import MeterFactory, silent_meter
from scrollcase.reports.junit import write_junit
from scrollcase.targets import evidence as evidence_mod
from scrollcase.version import package_version
from scrollcase.wheels import cache as wheelcache
from scrollcase.wheels import install as wheel_install
from scrollcase.wheels import source as wheels_mod

STAGES = ("install", "prune", "bytecode", "evidence", "assets", "box.json", "pack", "self-test", "release")


@dataclass
class BuildResult:
    plan: BuildPlan
    manifest: ReleaseManifest
    archive: Path
    release: Path
    junit: Path
    timings: dict[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------------- stages

Progress = Callable[[str], None]


@dataclass
class _Stages:
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str, text: str) -> Iterator[None]:
        index = STAGES.index(name) + 1
        self.progress(f"[{index}/{len(STAGES)}] {name}: {text}")
        start = time.monotonic()
        yield
        self.timings[name] = round(time.monotonic() - start, 3)
        self.progress(f"      {name} done in {self.timings[name]:.1f}s")


def execute_build(
    plan: BuildPlan,
    *,
    locked: LockedInstall,
    fetchers: Mapping[str, Fetcher],
    progress: Progress = lambda _: None,
    meter: MeterFactory = silent_meter,
) -> BuildResult:
    """Run every stage; on any failure the output folder is untouched (the work folder is kept)."""
    stages = _Stages(progress)
    if plan.bundled:
        asset_mod.check_local_sizes(plan.assets)
    _fresh_dir(plan.work_dir)
    count = f"{len(locked.records)} packages" + (f" + {len(locked.wheels)} wheels" if locked.wheels else "")
    with stages.stage("install", f"{count} into {plan.layout.env_dir}/"):
        install_locked(plan, locked, fetchers, meter)
    with stages.stage("prune", f"{len(plan.prune)} prunePaths + bytecode caches"):
        for note in prune_box(plan.box_root, plan.layout, plan.prune):
            progress(f"      note: {note}")
    with stages.stage("bytecode", "the box's own interpreter compiles its modules (reproducible .pyc)"):
        for note in bytecode_mod.add_bytecode(
            plan.box_root,
            plan.layout,
            prune=plan.prune,
            placeholder=BOX_PREFIX_PLACEHOLDER,
            scratch=plan.work_dir / "bytecode",
            pyc_cache=plan.pyc_cache,
        ):
            progress(f"      {note}")
    with stages.stage("evidence", "the box's own interpreter reports its CUDA runtime, cuDNN and GPU archs"):
        gpu = evidence_mod.gather_evidence(plan.box_root, plan.recipe.pythonEntryPoint, plan.layout.env_dir.as_posix())
        progress(f"      {gpu.describe()}")
        evidence_mod.require_evidence(plan.recipe.target.spec, gpu)
    with stages.stage("assets", f"{len(plan.assets)} asset(s), weights {plan.weights}"):
        if plan.bundled:
            asset_mod.place_assets(plan.assets, plan.asset_cache, fetchers, plan.box_root)
    reuse = PackCache.open(plan.pack_cache)  # its inode digests serve box.json's file list too
    with stages.stage("box.json", "describe the box and the files that embed its prefix"):
        box = _describe_box(plan, gpu, reuse)
    with stages.stage("pack", f"{plan.recipe.archive_name}"):
        packing = meter("packing", tree_bytes(plan.box_root))
        written = pack_tree_unhashed(
            plan.box_root, plan.work_dir / plan.recipe.archive_name, on_bytes=packing, cache=reuse
        )
        packing.finish()
        progress(f"      {written.files} files, {written.size / 1e6:.1f} MB")
        progress(f"      {reuse.hits} of {len(written.frames) - 1} frames reused from {plan.pack_cache}")
    with stages.stage(
        "self-test", "unpack the archive (its sha256 computed) and run the checks with the box's own interpreter"
    ):
        report, packed = self_test_archive(plan, written, box, meter)
        progress(f"      archive sha256 {packed.sha256[:16]}...")
    with stages.stage("release", f"{plan.out_dir}/ (archive, SBOM, release manifest)"):
        sbom = make_box_sbom(plan, locked, packed.sha256)
        manifest = make_manifest(
            plan, packed, report, gpu, sbom=sbom_info(plan, sbom), relocation=release_relocation(box.relocation)
        )
        _publish_outputs(plan, packed.path, dump_release(manifest), sbom)
    shutil.rmtree(plan.work_dir, ignore_errors=True)
    return BuildResult(plan, manifest, plan.archive_path, plan.release_path, plan.junit_path, stages.timings)


def install_locked(
    plan: BuildPlan,
    locked: LockedInstall,
    fetchers: Mapping[str, Fetcher],
    meter: MeterFactory = silent_meter,
) -> None:
    """Conda packages with rattler, then the lock's PyPI wheels (as pixi does), all checked first.
    A wheel already in the unpacked-wheel cache is neither fetched nor inflated again: linked."""
    install.verify_local_packages(locked.records, str(plan.recipe_dir.lock_file))
    cache = wheelcache.WheelCache(plan.unpacked_cache)
    hits = cache.load_all([w.sha256 for w in locked.wheels])
    missing = [w for w in locked.wheels if w.sha256 not in hits]
    downloading = meter("downloading wheels", None)
    fetched = [(wheels_mod.fetch_wheel(w, plan.wheel_cache, fetchers, on_bytes=downloading), w) for w in missing]
    downloading.finish()
    env = plan.box_root / plan.layout.env_dir
    install.install_records(
        locked.records,
        env,
        subdir=plan.recipe.target.spec.subdir,
        cache_dir=plan.package_cache,
        placeholder=env_placeholder(plan.layout),
    )
    install.scrub_conda_meta(env)
    unpacking = meter("unpacking wheels into the cache", sum(path.stat().st_size for path, _ in fetched))
    hits.update(wheelcache.fill_all(cache, [(path, w.sha256) for path, w in fetched], on_bytes=unpacking))
    unpacking.finish()
    unpacked = [hits[w.sha256] for w in locked.wheels]
    installing = meter("installing wheels", sum(u.size for u in unpacked))
    wheel_install.install_wheels(
        unpacked,
        plan.layout,
        env,
        placeholder=env_placeholder(plan.layout),
        arch=plan.recipe.target.arch,
        on_bytes=installing,
    )
    installing.finish()


def env_placeholder(layout: BoxLayout) -> str:
    """Where the environment is linked as if it lived: the box-root placeholder (which unpacking
    replaces with the real box folder) plus the environment folder."""
    return f"{BOX_PREFIX_PLACEHOLDER}/{layout.env_dir.as_posix()}"


def prune_box(box_root: Path, layout: BoxLayout, prune: Sequence[str]) -> list[str]:
    """Delete prunePaths (relative to the box root) and every ``__pycache__``; return notes for misses."""
    notes = []
    inside = box_root.resolve()
    for rel in prune:
        target = box_root / rel
        if not target.parent.resolve().is_relative_to(inside):  # a symlinked folder on the way out
            raise BuildError(
                f"prunePaths entry {rel!r} leads outside the box through a symlink",
                problems=[
                    Problem(
                        message="refusing to delete outside the box",
                        key="prunePaths",
                        value=rel,
                        fix="prune the real path inside the box instead",
                    )
                ],
            )
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        else:
            notes.append(f"prunePaths entry {rel!r} matched nothing")
    env = box_root / layout.env_dir
    for cache in sorted(env.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)
    for pyc in env.rglob("*.py[co]"):
        pyc.unlink()
    return notes


def tree_bytes(root: Path) -> int:
    """The bytes of the regular files below ``root`` (what packing reads; links and folders are headers)."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def _describe_box(plan: BuildPlan, gpu: evidence_mod.GpuEvidence | None, reuse: PackCache) -> BoxJson:
    """Write box.json into the box; what the later stages need of it: its identity and checks, not the
    file entries (23,000 models, 40 MiB in a torch runtime box, would be held through the pack stage)."""
    digests = digest_tree(plan.box_root, skip=[BOX_JSON], known=reuse.file_digest)
    clean = {f.path for f in digests.files if f.sha256 in reuse.clean}  # content an earlier scan read
    carriers = scan_prefix_files(plan.box_root, BOX_PREFIX_PLACEHOLDER, clean)
    hits = {c.path for c in carriers}
    reuse.remember_clean(f.sha256 for f in digests.files if f.path not in hits)
    box = make_box_json(plan, carriers, gpu, digests)
    write_atomic(plan.box_root / BOX_JSON, dump_box_json(box))
    return box.model_copy(update={"files": [], "links": []})


def make_box_json(
    plan: BuildPlan,
    prefix_files: Sequence[Any],
    gpu: evidence_mod.GpuEvidence | None = None,
    digests: TreeDigests | None = None,
) -> BoxJson:
    r = plan.recipe
    return BoxJson(
        **identity_fields(identity_of(r)),
        pythonVersion=r.pythonVersion,
        pythonEntryPoint=r.pythonEntryPoint,
        envDir=plan.layout.env_dir.as_posix(),
        modelCacheSubdir=r.modelCacheSubdir,
        weights=plan.weights,
        assets=[
            BoxAsset(name=a.name, path=a.path, sha256=a.sha256, size=a.size, bundled=plan.bundled) for a in r.assets
        ],
        selfTest=r.selfTest,
        relocation=RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=list(prefix_files)),
        gpu=gpu,
        files=list(digests.files) if digests else [],
        links=list(digests.links) if digests else [],
    )


def self_test_archive(
    plan: BuildPlan, written: UnhashedPack, box: BoxJson, meter: MeterFactory = silent_meter
) -> tuple[SelfTestReport, PackResult]:
    """Unpack (which relocates) into the work folder and run the recipe's checks; JUnit either way.

    The unpack reads every byte of the archive, so the archive's sha256 is computed there, over the bytes
    the checks then run from, and not also by the pack (:func:`~scrollcase.format.archive.pack.pack_tree_unhashed`)."""
    dest = plan.work_dir / "check"
    unpacking = meter("unpacking", written.size)
    unpacked = unpack_archive(written.path, dest, expected_size=written.size, expected_sha256=None, on_bytes=unpacking)
    unpacking.finish()
    packed = written.hashed(unpacked.sha256)
    recipe_file = describe_path(plan.recipe_dir.recipe_file)
    report, error = run_self_test(
        dest, box, recipe_file=recipe_file, recipe_text=_read_text(plan.recipe_dir.recipe_file), junit=plan.junit_path
    )
    if error is not None:
        raise error
    return report, packed


def run_self_test(
    box_root: Path,
    box: BoxJson,
    *,
    recipe_file: str | None,
    recipe_text: str | None,
    junit: Path | None,
    timeout: float = selftest.DEFAULT_TIMEOUT,
) -> tuple[SelfTestReport, SelfTestError | None]:
    """Run ``box``'s self-test in an unpacked ``box_root``: (report, SelfTestError or None)."""
    box_root = absolute_as_given(box_root)  # the checks run there; a symlinked parent is kept, as unpack keeps it
    env_dir = box_root / box.envDir
    absent = frozenset(f"{box.modelCacheSubdir}/{a.path}" for a in box.assets if not a.bundled)
    checks = selftest.plan_checks(box.selfTest, box.pythonEntryPoint, recipe_text, absent)
    env = selftest.check_env(box.target.spec.kind.uses_gpu, box_root, box_root / box.modelCacheSubdir)
    results = selftest.run_checks(checks, box_root / box.pythonEntryPoint, env_dir, box_root, env=env, timeout=timeout)
    if junit is not None:
        write_junit(
            junit,
            f"selftest.{box.recipeId}",
            selftest.junit_cases(results, recipe_file, "selftest"),
            {"targetId": box.targetId, "boxId": box.boxId, "version": box.version},
        )
    return selftest.outcomes(results), selftest.failure(results, recipe_file, str(box_root))


def make_box_sbom(plan: BuildPlan, locked: LockedInstall, archive_sha256: str) -> bytes:
    """The CycloneDX SBOM of the built box: its conda packages (conda-meta) and the lock's wheels."""
    packages = sbom_mod.conda_packages(plan.box_root, plan.layout)
    packages += sbom_mod.pypi_packages(plan.box_root, plan.layout, locked.wheels)
    data = sbom_mod.make_sbom(identity_of(plan.recipe), archive_sha256, packages, FIXED_MTIME)
    sbom_mod.require_valid(data, plan.sbom_path.name)
    return data


def sbom_info(plan: BuildPlan, sbom: bytes) -> SbomInfo:
    return SbomInfo(name=plan.sbom_path.name, size=len(sbom), sha256=sha256_bytes(sbom))


def make_manifest(
    plan: BuildPlan,
    packed: PackResult,
    report: SelfTestReport,
    gpu: evidence_mod.GpuEvidence | None = None,
    *,
    sbom: SbomInfo | None = None,
    relocation: ReleaseRelocation | None = None,
) -> ReleaseManifest:
    r = plan.recipe
    lock_sha = sha256_bytes(plan.recipe_dir.lock_file.read_bytes())
    return ReleaseManifest(
        **identity_fields(identity_of(r)),
        recipeVersion=r.recipeVersion,
        compatibility=r.compatibility,
        archive=ArchiveInfo(
            name=r.archive_name, size=packed.size, sha256=packed.sha256, frames=frame_table(packed.frames)
        ),
        pythonEntryPoint=r.pythonEntryPoint,
        modelCacheSubdir=r.modelCacheSubdir,
        weights=plan.weights,
        assets=asset_mod.release_assets(plan.assets, r.assets, plan.bundled),
        keys=object_keys(r.boxId, r.version, r.target_id, r.archive_name),
        builtBy=BuiltBy(
            scrollcase=package_version(), pixi=r.pixiVersion, lockSha256=lock_sha, pythonVersion=r.pythonVersion
        ),
        selfTest=report,
        gpu=gpu,
        sbom=sbom,
        provenance=plan.provenance,
        relocation=relocation,
    )


def _publish_outputs(plan: BuildPlan, archive: Path, release: bytes, sbom: bytes) -> None:
    """Archive and SBOM first, release manifest last: a manifest in the output folder means a complete box."""
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    plan.release_path.unlink(missing_ok=True)  # an old manifest must never describe a new archive
    move_into_place(archive, plan.archive_path)
    write_atomic(plan.sbom_path, sbom)
    write_atomic(plan.release_path, release)


def _fresh_dir(path: Path) -> None:
    """An empty folder at ``path``: leftovers of an interrupted build are discarded."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
