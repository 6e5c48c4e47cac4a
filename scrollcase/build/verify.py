"""``scrollcase verify``: prove a built release is what its manifest says, in a throwaway folder.

Order matters: the archive's size and sha256 are checked before anything is extracted (by
``unpack_archive``), the layout is checked against ``box.json`` and the manifest, and only then is
the box's own interpreter trusted to run the self-test.  The temporary folder is always removed.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scrollcase.build.pipeline import run_self_test
from scrollcase.build.plan import check_host
from scrollcase.errors import IntegrityError, Problem
from scrollcase.format.archive.frames import check_frame_table
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.layout import BOX_JSON, env_dir_for
from scrollcase.format.release import ReleaseManifest, SelfTestReport, load_release
from scrollcase.format.soundness import MISSING, Measured, Missing, release_problems, require_sound_release
from scrollcase.io.digest import sha256_file
from scrollcase.targets import evidence
from scrollcase.targets.vocabulary import host_platform


@dataclass(frozen=True)
class VerifyReport:
    release: Path
    archive: Path
    manifest: ReleaseManifest
    layout_checks: tuple[str, ...]
    self_test: SelfTestReport | None

    def to_json(self) -> dict[str, object]:
        return {
            "release": str(self.release),
            "archive": str(self.archive),
            "passed": True,
            "archiveSha256": self.manifest.archive.sha256,
            "layout": list(self.layout_checks),
            "selfTest": None if self.self_test is None else self.self_test.model_dump(mode="json"),
        }


def layout_problems(box_root: Path, box: BoxJson, manifest: ReleaseManifest, windows: bool) -> list[Problem]:
    """What only the unpacked tree shows: an envDir that does not hold the interpreter, an interpreter
    missing or not executable, a bundled asset missing (empty when it is sound)."""
    problems = []
    if env_dir_for(box.pythonEntryPoint, windows).as_posix() != box.envDir:
        problems.append(
            Problem(message="envDir does not contain pythonEntryPoint", file=BOX_JSON, key="envDir", value=box.envDir)
        )
    fault = _interpreter_fault(box_root / box.pythonEntryPoint, windows)
    if fault is not None:
        problems.append(Problem(message=fault, file=BOX_JSON, key="pythonEntryPoint", value=box.pythonEntryPoint))
    for asset in box.assets:
        if asset.bundled and not (box_root / box.modelCacheSubdir / asset.path).is_file():
            problems.append(
                Problem(
                    message="a bundled asset is missing", file=BOX_JSON, key=f"assets.{asset.name}", value=asset.path
                )
            )
    return problems


def _interpreter_fault(python: Path, windows: bool) -> str | None:
    if not python.is_file():
        return "the interpreter is missing from the archive"
    if not windows and not os.access(python, os.X_OK):
        return "the interpreter is not executable"
    return None


def verify_release(
    release: Path, *, self_test: bool, junit: Path | None = None, temp_parent: Path | None = None
) -> VerifyReport:
    """Unpack into a fresh temporary folder, check the layout, optionally re-run the self-test."""
    manifest = load_release(release)
    archive = release.parent / manifest.archive.name
    if self_test:
        check_host(manifest.target.platform, manifest.target.arch, manifest.targetId, host_platform())
    with tempfile.TemporaryDirectory(prefix="scrollcase-verify-", dir=temp_parent) as tmp:
        root = Path(tmp) / "box"
        unpack_archive(archive, root, expected_size=manifest.archive.size, expected_sha256=manifest.archive.sha256)
        if manifest.archive.frames:
            check_frame_table(archive, manifest.archive.frames, manifest.archive.size, release.name)
        box = _read_box_json(root)
        problems = release_problems(
            manifest, manifest_file=release.name, box=box, box_file=BOX_JSON, sbom=_sbom_beside(release, manifest)
        )
        if box is not MISSING:
            problems += layout_problems(root, box, manifest, manifest.target.platform == "windows")
        require_sound_release(problems, doing=None, archive=manifest.archive.name, manifest_file=release.name)
        assert isinstance(box, BoxJson)
        checks: tuple[str, ...] = (
            "archive size and sha256" + (", frame table" if manifest.archive.frames else ""),
            "box.json valid and matches the manifest",
            f"{box.pythonEntryPoint} exists and is executable",
            *(("SBOM size and sha256",) if manifest.sbom else ()),
        )
        report = None
        if self_test:
            report, error = run_self_test(root, box, recipe_file=None, recipe_text=None, junit=junit)
            if error is not None:
                raise error
            recheck_evidence(root, box, manifest)
            checks += ("GPU evidence re-measured with the box's interpreter",)
    return VerifyReport(release, archive, manifest, checks, report)


def _sbom_beside(release: Path, manifest: ReleaseManifest) -> Measured | Missing | None:
    """The SBOM the manifest names, measured where `scrollcase build` writes it (beside the manifest)."""
    if manifest.sbom is None:
        return None
    path = release.parent / manifest.sbom.name
    if not path.is_file():
        return MISSING
    sha256, size = sha256_file(path)
    return Measured(size, sha256)


def recheck_evidence(root: Path, box: BoxJson, manifest: ReleaseManifest) -> None:
    """The unpacked box's interpreter must still report what box.json records, and that must fit the target."""
    fresh = evidence.gather_evidence(root, box.pythonEntryPoint, box.envDir)
    if box.gpu is not None and fresh != box.gpu:
        problem = Problem(
            message=f"box.json: {box.gpu.describe()}; now: {fresh.describe()}",
            file=BOX_JSON,
            key="gpu",
            fix="rebuild the box with `scrollcase build`",
        )
        raise IntegrityError(
            "the box's interpreter reports other GPU evidence than its box.json records", problems=[problem]
        )
    evidence.require_evidence(manifest.target.spec, fresh, where="unpacked box")


def _read_box_json(root: Path) -> BoxJson | Missing:
    path = root / BOX_JSON
    return parse_box_json(path.read_bytes(), file=BOX_JSON) if path.is_file() else MISSING
