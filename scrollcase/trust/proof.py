"""The GPU proof's statement: an in-toto Statement v1 about a box's archive (its sha256) whose predicate, of
scrollcase's own type, is what the build proved about the box (GPU evidence, self-test, parity), taken from the
release manifest so it says nothing the manifest does not (docs/trust.md#signed-gpu-proof).

Pure: :func:`predicate_of` and :func:`statement_of` make it, :func:`parse_statement` reads a signed one, and
:func:`check_subject`, :func:`check_evidence` and :func:`check_predicate` hold it to a manifest.  The signature
is trust/bundle.py's."""

from __future__ import annotations

import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scrollcase.errors import Problem, TrustError
from scrollcase.format.release import (
    FileName,
    ParityReport,
    ReleaseManifest,
    SelfTestReport,
    dump_release,
)
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import (
    canonical_json,
    load_json,
    validation_problems,
)
from scrollcase.recipe.model import Sha256, Target
from scrollcase.targets.evidence import GpuEvidence

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://scrollcase.dev/gpu-proof/v1"
PROOF_FIX = "verify with the bundle `actions/attest` wrote for this release (<archive stem>.gpu-proof.sigstore.json)"


class ProofError(TrustError):
    """A GPU-proof bundle, or the trusted root given to check it, that cannot be read as what it must be."""


class ProofSignatureError(TrustError):
    """A bundle whose signatures do not verify against the trusted root: not from the trusted CA, no valid
    SCT, a log entry not in the log, or a statement changed after signing."""


class ProofSignerError(TrustError):
    """A bundle validly signed, but by another identity than the one the host trusts to sign GPU proofs."""


class ProofSubjectError(TrustError):
    """A signed GPU proof about another archive than the release manifest's."""


class ProofMismatchError(TrustError):
    """A signed GPU proof whose predicate differs from what the release manifest says."""


class ProofEvidenceError(TrustError):
    """A signed GPU proof whose GPU evidence is not what its target's name promises (a CPU build under a
    CUDA name)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProofRelease(_Model):
    """The release manifest the proof was taken from: its file name and the sha256 of its bytes."""

    name: FileName
    sha256: Sha256


class GpuProofPredicate(_Model):
    """What the build proved about the box, as its release manifest records it (without run timings)."""

    boxId: str
    version: str
    targetId: str
    target: Target
    release: ProofRelease
    gpu: GpuEvidence | None = None
    selfTest: SelfTestReport | None = None
    parity: ParityReport | None = None


class Subject(_Model):
    name: str
    digest: dict[str, str]


class GpuProofStatement(_Model):
    """An in-toto Statement v1 about the archive, with scrollcase's GPU-proof predicate."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: Annotated[list[Subject], Field(min_length=1)]
    predicateType: Literal["https://scrollcase.dev/gpu-proof/v1"] = PREDICATE_TYPE
    predicate: GpuProofPredicate


# ------------------------------------------------------------------------------------------------ pure


def release_file_name(manifest: ReleaseManifest) -> str:
    return manifest.archive.name.removesuffix(".tar.zst") + ".release.json"


def predicate_of(manifest: ReleaseManifest) -> GpuProofPredicate:
    """The GPU-proof predicate of a release: its fields as the manifest's canonical bytes carry them."""
    manifest_bytes = dump_release(manifest)
    fields: dict[str, Any] = json.loads(manifest_bytes)
    taken = {name: fields.get(name) for name in ("boxId", "version", "targetId", "target", "gpu", "selfTest", "parity")}
    release = {"name": release_file_name(manifest), "sha256": sha256_bytes(manifest_bytes)}
    return GpuProofPredicate.model_validate({k: v for k, v in taken.items() if v is not None} | {"release": release})


def statement_of(manifest: ReleaseManifest) -> GpuProofStatement:
    subject = Subject(name=manifest.archive.name, digest={"sha256": manifest.archive.sha256})
    return GpuProofStatement(subject=[subject], predicate=predicate_of(manifest))


# The manifest leaves run timings out (format/release.py: a rebuild gives the same bytes); so does the proof.
_RUN_TIMINGS: Any = {
    "selfTest": {"checks": {"__all__": {"durationSeconds"}}},
    "parity": {"results": {"__all__": {"durationSeconds"}}},
}


def dump_predicate(predicate: GpuProofPredicate) -> bytes:
    """Canonical bytes (sorted keys, two-space indent, trailing newline): ``actions/attest``'s predicate-path."""
    return canonical_json(predicate.model_dump(mode="json", exclude_none=True, exclude=_RUN_TIMINGS))


def dump_statement(statement: GpuProofStatement) -> bytes:
    dumped = statement.model_dump(mode="json", exclude_none=True, by_alias=True, exclude={"predicate": _RUN_TIMINGS})
    return canonical_json(dumped)


def parse_statement(payload: bytes, file: str) -> GpuProofStatement:
    """The signed statement as a GPU proof; another predicate type (a provenance bundle) is refused by name."""
    raw = load_json(payload, file=f"{file} (statement)", error=ProofError, fix=PROOF_FIX)
    found = raw.get("predicateType") if isinstance(raw, dict) else None
    if found != PREDICATE_TYPE:
        raise ProofError(
            f"{file} signs a statement of predicate type {found}, not a GPU proof ({PREDICATE_TYPE})",
            fix=f"pass the GPU proof's bundle, not the build provenance's: {PROOF_FIX}",
        )
    try:
        return GpuProofStatement.model_validate(raw)
    except ValidationError as exc:
        problems = validation_problems(exc, f"{file} (statement)")
        raise ProofError(f"{file} signs a GPU proof this scrollcase cannot read", problems, fix=PROOF_FIX) from None


def check_subject(
    statement: GpuProofStatement, manifest: ReleaseManifest, bundle_file: str, manifest_file: str
) -> None:
    archive = manifest.archive
    if any(s.digest.get("sha256") == archive.sha256 for s in statement.subject):
        return
    about = ", ".join(f"{s.name} (sha256 {s.digest.get('sha256', 'none')})" for s in statement.subject)
    raise ProofSubjectError(
        f"{bundle_file} is a GPU proof of {about}, not of {archive.name} (sha256 {archive.sha256}) that "
        f"{manifest_file} names",
        fix="verify each release with its own proof: a proof of another archive says nothing about this one",
    )


def check_evidence(predicate: GpuProofPredicate, bundle_file: str) -> None:
    """The signed evidence is what the signed target promises, whatever the manifest says."""
    spec = predicate.target.spec
    if predicate.gpu is None:
        problems = [] if not spec.kind.uses_gpu else [Problem(f"{spec.target_id} carries no GPU evidence")]
    else:
        problems = spec.kind.evidence_problems(spec, predicate.gpu, "box")
    if spec.target_id != predicate.targetId:
        problems.append(Problem(f"targetId {predicate.targetId} is not the target's id {spec.target_id}"))
    if problems:
        located = [Problem(p.message, file=bundle_file, key="predicate.gpu", value=p.value) for p in problems]
        raise ProofEvidenceError(
            f"{bundle_file} proves a box that is not what its name {predicate.targetId} says",
            located,
            fix="do not install this box: its signed GPU evidence contradicts its target",
        )


def check_predicate(
    found: GpuProofPredicate, expected: GpuProofPredicate, bundle_file: str, manifest_file: str
) -> None:
    signed, said = found.model_dump(mode="json"), expected.model_dump(mode="json")
    differ = [name for name in GpuProofPredicate.model_fields if signed[name] != said[name]]
    if not differ:
        return
    problems = [
        Problem(
            f"signed {_short(signed[name])}, {manifest_file} says {_short(said[name])}",
            file=bundle_file,
            key=f"predicate.{name}",
        )
        for name in differ
    ]
    raise ProofMismatchError(
        f"{bundle_file} does not prove what {manifest_file} says ({', '.join(differ)} differ)",
        problems,
        fix="the manifest or the proof is not the one the release workflow built and signed: fetch both again "
        "from the release, and do not install until they agree",
    )


def _short(value: object, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"
