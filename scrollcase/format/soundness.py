"""Is this release sound: the one list of rules a release manifest, its archive and the archive's box.json
must satisfy together, for every reader.

publish checks them before the first write, ``unpack``/``install``/``upgrade`` before a byte is extracted
(``client/preflight.py``), ``verify`` after unpacking into a throwaway folder (``build/verify.py``).  Each
reader passes the facts it holds (what it measured of the archive, the box.json it read, the SBOM beside
the manifest); a rule whose facts a reader does not hold is that reader's to skip (None), so every rule has
one home and one message here, and :func:`require_sound_release` one headline.  What only an unpacked tree
shows (the interpreter, bundled assets) stays with verify, and the frame table with
:func:`~scrollcase.format.archive.frames.check_frame_table`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from scrollcase.errors import IntegrityError, Problem
from scrollcase.format.boxjson import BoxJson
from scrollcase.format.release import ReleaseManifest, object_keys, release_relocation

# The fields both documents carry (the manifest's relocation summarises box.json's, when it has one).
SHARED_FIELDS = ("boxId", "version", "target", "targetId", "pythonEntryPoint", "modelCacheSubdir", "gpu")
ARCHIVE_DIGEST = "archive.sha256"  # the key of the archive rule's problem: a reader reads no box.json past it
REBUILD_FIX = "use the archive and release manifest `scrollcase build` wrote together; rebuild if in doubt"


class Missing(enum.Enum):
    """Looked for and not there (None, for a fact, means: not looked at by this reader)."""

    MISSING = "missing"


MISSING = Missing.MISSING


@dataclass(frozen=True)
class Measured:
    """A file's size and sha256 as a reader just measured them (not as a document claims)."""

    size: int
    sha256: str


def release_problems(
    manifest: ReleaseManifest,
    *,
    manifest_file: str = "release.json",
    archive_name: str | None = None,
    archive: Measured | None = None,
    box: BoxJson | Missing | None = None,
    box_file: str | None = None,
    sbom: Measured | Missing | None = None,
) -> list[Problem]:
    """Why ``manifest``, the archive and its box.json do not describe one sound release (empty: they do).

    ``archive``: the archive's measured size and sha256; ``box``: the archive's box.json (MISSING: it has
    none); ``sbom``: the SBOM found beside the manifest (MISSING: none there).  None skips a fact's rules.
    The manifest is what the index and every host app trust, so it must name the archive's bytes and
    this release's keys, say what the box itself says (identity, target), record a passed self-test and
    carry GPU evidence that fits its target."""
    name = archive_name or manifest.archive.name
    return [
        *_archive_problems(manifest, archive, name, manifest_file),
        *_keys_problems(manifest, manifest_file),
        *_box_problems(manifest, box, box_file or f"{name}!box.json"),
        *_self_test_problems(manifest, manifest_file),
        *_gpu_problems(manifest, manifest_file),
        *_sbom_problems(manifest, sbom, manifest_file),
    ]


def require_sound_release(
    problems: Sequence[Problem], *, doing: str | None, archive: str, manifest_file: str, fix: str = REBUILD_FIX
) -> None:
    """IntegrityError (exit 8) naming the first of ``problems`` in its headline, when there are any;
    ``doing``: what is refused (``"publish box 1.0.0 linux-x86_64-cpu"``, ``"unpack"``), None for verify."""
    if not problems:
        return
    first = problems[0]
    refusing = f"refusing to {doing}: " if doing else ""
    raise IntegrityError(
        f"{refusing}{archive} and {manifest_file} do not describe one sound release "
        f"({first.key or first.file}: {first.message})",
        problems=list(problems),
        fix=fix,
    )


def disagreements(box: BoxJson, manifest: ReleaseManifest) -> list[tuple[str, object, object]]:
    """(field, box.json's value, the manifest's value) for every shared field on which they differ."""
    pairs: dict[str, tuple[object, object]] = {
        key: (getattr(box, key), getattr(manifest, key)) for key in SHARED_FIELDS
    }
    if manifest.relocation is not None:  # absent in releases built before it: nothing to compare
        pairs["relocation"] = (release_relocation(box.relocation), manifest.relocation)
    return [(key, inside, outside) for key, (inside, outside) in pairs.items() if inside != outside]


def shown(value: object) -> object:
    """A field's value as JSON shows it (models without their unset fields)."""
    return value.model_dump(mode="json", exclude_none=True) if isinstance(value, BaseModel) else value


def _archive_problems(
    manifest: ReleaseManifest, archive: Measured | None, name: str, manifest_file: str
) -> list[Problem]:
    expected = manifest.archive
    if archive is None or (archive.size, archive.sha256) == (expected.size, expected.sha256):
        return []
    return [
        Problem(
            message=f"{name} does not match {manifest_file}: it is {archive.size} bytes with sha256 "
            f"{archive.sha256}, the manifest says {expected.size} bytes with sha256 {expected.sha256}",
            file=name,
            key=ARCHIVE_DIGEST,
            fix="use the archive that was built with this release manifest (rebuild the box if it was "
            "modified or truncated)",
        )
    ]


def _keys_problems(manifest: ReleaseManifest, manifest_file: str) -> list[Problem]:
    keys = object_keys(manifest.boxId, manifest.version, manifest.targetId, manifest.archive.name)
    if manifest.keys == keys:
        return []
    return [
        Problem(
            message=f"keys are {manifest.keys.model_dump()}, but this release's keys are {keys.model_dump()}",
            file=manifest_file,
            key="keys",
            fix="rebuild the box; the release manifest was edited by hand",
        )
    ]


def _box_problems(manifest: ReleaseManifest, box: BoxJson | Missing | None, box_file: str) -> list[Problem]:
    if box is None:
        return []
    if box is MISSING:
        return [Problem(message="the archive has no box.json at its root", file=box_file, fix=REBUILD_FIX)]
    assert isinstance(box, BoxJson)
    return [
        Problem(
            message="box.json and the release manifest disagree: "
            f"box.json says {shown(inside)!r}, the manifest says {shown(outside)!r}",
            file=box_file,
            key=key,
            fix="use the release manifest built with this archive (rebuild the box if in doubt)",
        )
        for key, inside, outside in disagreements(box, manifest)
    ]


def _self_test_problems(manifest: ReleaseManifest, manifest_file: str) -> list[Problem]:
    if manifest.selfTest is not None and manifest.selfTest.passed:
        return []
    state = "has no self-test report" if manifest.selfTest is None else "records a failed self-test"
    return [
        Problem(
            message=f"the manifest {state}",
            file=manifest_file,
            key="selfTest.passed",
            fix="rebuild with `scrollcase build`: only a box whose self-test passed is a release",
        )
    ]


def _gpu_problems(manifest: ReleaseManifest, manifest_file: str) -> list[Problem]:
    spec = manifest.target.spec
    if manifest.gpu is None:
        if not spec.kind.uses_gpu:
            return []
        return [
            Problem(
                message=f"{manifest.targetId} is a {spec.kind.title} target, but the manifest carries no GPU evidence",
                file=manifest_file,
                key="gpu",
                fix="rebuild with this scrollcase version: the build records the evidence",
            )
        ]
    return [
        Problem(message=problem.message, file=manifest_file, key="gpu", value=problem.value, fix=problem.fix)
        for problem in spec.kind.evidence_problems(spec, manifest.gpu, "box")
    ]


def _sbom_problems(manifest: ReleaseManifest, sbom: Measured | Missing | None, manifest_file: str) -> list[Problem]:
    recorded = manifest.sbom
    if recorded is None or sbom is None:
        return []
    fix = "keep the .sbom.json `scrollcase build` wrote beside the release manifest (rebuild if in doubt)"
    if sbom is MISSING:
        message = f"{manifest_file} names the SBOM {recorded.name}, which is not beside it"
        return [Problem(message=message, file=manifest_file, key="sbom", fix=fix)]
    assert isinstance(sbom, Measured)
    if (sbom.size, sbom.sha256) == (recorded.size, recorded.sha256):
        return []
    message = (
        f"{recorded.name} is {sbom.size} bytes with sha256 {sbom.sha256}, but {manifest_file} records "
        f"{recorded.size} bytes with sha256 {recorded.sha256}"
    )
    return [Problem(message=message, file=recorded.name, key="sbom", fix=fix)]
