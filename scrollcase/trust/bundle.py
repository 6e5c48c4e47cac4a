"""The signed GPU proof's Sigstore bundle, checked offline (docs/trust.md#signed-gpu-proof): sigstore-python's
Verifier with the trusted root a host ships (the certificate chain to the trusted CA, the CT log's SCT, the
signer's identity by :class:`SignerPolicy`, the Rekor entry's inclusion proof, checkpoint and signed timestamp,
the DSSE signature), then what was signed, held to the release manifest by trust/proof.py.  Nothing here
reaches the network: the trusted root is passed in."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from cryptography.x509 import (
    Certificate,
    ExtensionNotFound,
    ObjectIdentifier,
    RFC822Name,
    SubjectAlternativeName,
    UniformResourceIdentifier,
)
from sigstore.errors import CertValidationError, Error, VerificationError
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier
from sigstore_models.trustroot import v1 as trustroot_v1

from scrollcase.errors import TrustError, UsageError, describe_path
from scrollcase.format.release import ReleaseManifest, load_release
from scrollcase.io.documents import MAX_JSON_DEPTH, json_depth, load_json, too_large
from scrollcase.io.files import ReadErrors, read_bytes
from scrollcase.trust.proof import (
    PREDICATE_TYPE,
    PROOF_FIX,
    GpuProofPredicate,
    GpuProofStatement,
    ProofError,
    ProofSignatureError,
    ProofSignerError,
    check_evidence,
    check_predicate,
    check_subject,
    parse_statement,
    predicate_of,
)

PAYLOAD_TYPE = "application/vnd.in-toto+json"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"  # the OIDC issuer of GitHub Actions' tokens
MAX_BUNDLE_BYTES = 1 << 20  # a bundle is a few KB: its statement, one certificate, one log entry
_OIDC_ISSUER = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")  # Fulcio: the token's issuer, raw bytes (deprecated)
_OIDC_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")  # the same as a DER UTF8String


@dataclass(frozen=True)
class SignerPolicy:
    """Who may sign GPU proofs: the OIDC issuer, and either one exact certificate identity (the SAN: for GitHub
    Actions ``https://github.com/OWNER/REPO/.github/workflows/release.yml@refs/tags/TAG``) or a workflow
    (``OWNER/REPO/.github/workflows/release.yml``: any ref of it, as ``gh attestation verify --signer-workflow``)."""

    identity: str | None = None
    workflow: str | None = None
    issuer: str = GITHUB_ISSUER

    def __post_init__(self) -> None:
        if (self.identity is None) == (self.workflow is None):
            raise ValueError("SignerPolicy takes one of identity or workflow")

    def describe(self) -> str:
        who = self.identity if self.identity is not None else f"the workflow {self.workflow} (any ref)"
        return f"{who}, issuer {self.issuer}"

    def accepts(self, san: str) -> bool:
        if self.identity is not None:
            return san == self.identity
        workflow = (self.workflow or "").removeprefix("https://").removeprefix("github.com/")
        return san.startswith(f"https://github.com/{workflow}@")

    def verify(self, cert: Certificate) -> None:
        """sigstore's VerificationPolicy protocol: raise when ``cert`` is not this signer's."""
        issuer, sans = signer_of(cert)
        if issuer != self.issuer or not any(self.accepts(san) for san in sans):
            raise _SignerRefusedError(", ".join(sans) or "no URI or email", issuer or "none")


def _issuer_of(cert: Certificate) -> str | None:
    """Fulcio's issuer extension: the DER form (1.8) where present, else the raw form (1.1) older certificates
    carry alone; None when neither is there or readable."""
    for oid in (_OIDC_ISSUER_V2, _OIDC_ISSUER):
        try:
            raw: bytes = cert.extensions.get_extension_for_oid(oid).value.value  # type: ignore[attr-defined]
        except ExtensionNotFound:
            continue
        text = _der_utf8(raw) if oid == _OIDC_ISSUER_V2 else raw
        try:
            return text.decode() if text is not None else None
        except UnicodeDecodeError:
            return None
    return None


def _der_utf8(raw: bytes) -> bytes | None:
    """The content of a DER UTF8String (tag 12, short or long length), None when ``raw`` is not one."""
    if len(raw) < 2 or raw[0] != 0x0C:
        return None
    length, start = raw[1], 2
    if length & 0x80:
        count = length & 0x7F
        length, start = int.from_bytes(raw[2 : 2 + count], "big"), 2 + count
    return raw[start:] if len(raw) - start == length else None


class _SignerRefusedError(VerificationError):
    def __init__(self, sans: str, issuer: str) -> None:
        super().__init__(f"signed by {sans} (issuer {issuer})")
        self.sans = sans
        self.issuer = issuer


def signer_of(cert: Certificate) -> tuple[str | None, list[str]]:
    """The certificate's OIDC issuer (Fulcio's extension) and its identities (URI and email SANs)."""
    issuer = _issuer_of(cert)
    try:
        sans = cert.extensions.get_extension_for_class(SubjectAlternativeName).value
    except ExtensionNotFound:
        return issuer, []
    return issuer, [*sans.get_values_for_type(UniformResourceIdentifier), *sans.get_values_for_type(RFC822Name)]


# -------------------------------------------------------------------------------------------- verify

_ROOT_FIX = (
    "pass the trusted_root.json of the Sigstore instance that signs the release workflow's attestations "
    "(`gh attestation trusted-root` prints the public-good one)"
)


@dataclass(frozen=True)
class VerifiedProof:
    """A GPU proof whose signature, signer, subject and predicate were all checked."""

    statement: GpuProofStatement
    signer: str  # the certificate identity (SAN) that signed it
    issuer: str

    @property
    def predicate(self) -> GpuProofPredicate:
        return self.statement.predicate

    def to_json(self) -> dict[str, object]:
        predicate = self.predicate
        return {
            "predicateType": PREDICATE_TYPE,
            "subject": [s.model_dump() for s in self.statement.subject],
            "signer": self.signer,
            "issuer": self.issuer,
            "boxId": predicate.boxId,
            "version": predicate.version,
            "targetId": predicate.targetId,
            "gpu": predicate.gpu.describe() if predicate.gpu is not None else None,
        }


def load_trusted_root(data: bytes, file: str) -> TrustedRoot:
    """A Sigstore trusted root (``trusted_root.json``), or ProofError naming ``file``."""
    load_json(data, file=file, error=ProofError, fix=_ROOT_FIX)  # bounded and nesting-checked first
    try:
        return TrustedRoot(trustroot_v1.TrustedRoot.from_json(data))
    except (ValueError, Error) as exc:
        raise ProofError(f"{file} is not a Sigstore trusted root: {_first_line(exc)}", fix=_ROOT_FIX) from None


def load_bundles(data: bytes, file: str) -> list[Bundle]:
    """The Sigstore bundles of ``file``: one JSON bundle (``actions/attest``'s bundle-path), or JSON lines of
    them (``gh attestation download``); ProofError naming ``file`` and the line when one is not a bundle."""
    if len(data) > MAX_BUNDLE_BYTES * 8:
        raise too_large(file, len(data), MAX_BUNDLE_BYTES * 8, ProofError, PROOF_FIX)
    lines = [(f"{file}:{n}", line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
    if len(lines) > 1 and not _one_document(data):
        return [load_bundle(text, where) for where, text in lines]
    return [load_bundle(data, file)]


def _one_document(data: bytes) -> bool:
    if json_depth(data) > MAX_JSON_DEPTH:
        return True  # load_bundle refuses it, naming the limit
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def load_bundle(data: bytes, file: str) -> Bundle:
    """A Sigstore bundle, or ProofError naming ``file``."""
    load_json(data, file=file, error=ProofError, fix=PROOF_FIX, max_bytes=MAX_BUNDLE_BYTES)
    try:
        return Bundle.from_json(data)
    except (ValueError, Error) as exc:
        raise ProofError(f"{file} is not a Sigstore bundle: {_first_line(exc)}", fix=_BUNDLE_FIX) from None


# GitHub signs a private repository's attestations with its own Sigstore instance, without a transparency log:
# sigstore-python (and so this check) needs the public-good instance's log entry.
_BUNDLE_FIX = (
    PROOF_FIX + "; a private repository's attestations (GitHub's own Sigstore, no transparency log) are "
    "checked with `gh attestation verify` instead"
)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def check_gpu_proof(
    manifest: ReleaseManifest,
    bundle: Bundle,
    trusted_root: TrustedRoot,
    policy: SignerPolicy,
    *,
    bundle_file: str = "gpu-proof.sigstore.json",
    manifest_file: str = "release.json",
) -> VerifiedProof:
    """``bundle`` checked offline against ``trusted_root`` and ``policy``, then what it signs against
    ``manifest``: TrustError subclasses for each refusal, naming ``bundle_file`` and ``manifest_file``."""
    payload_type, payload = _verified_payload(bundle, trusted_root, policy, bundle_file)
    if payload_type != PAYLOAD_TYPE:
        raise ProofError(f"{bundle_file} signs a {payload_type} payload, not an in-toto statement", fix=PROOF_FIX)
    statement = parse_statement(payload, bundle_file)
    check_subject(statement, manifest, bundle_file, manifest_file)
    check_evidence(statement.predicate, bundle_file)
    check_predicate(statement.predicate, predicate_of(manifest), bundle_file, manifest_file)
    issuer, sans = signer_of(bundle.signing_certificate)
    signer = next((san for san in sans if policy.accepts(san)), sans[0] if sans else "")
    return VerifiedProof(statement=statement, signer=signer, issuer=issuer or "")


def _verified_payload(
    bundle: Bundle, trusted_root: TrustedRoot, policy: SignerPolicy, bundle_file: str
) -> tuple[str, bytes]:
    """sigstore-python's DSSE verification, each of its refusals as the TrustError a user can act on."""
    try:
        return Verifier(trusted_root=trusted_root).verify_dsse(bundle, policy)
    except _SignerRefusedError as exc:
        raise ProofSignerError(
            f"{bundle_file} is signed by {exc.sans} (issuer {exc.issuer}), not by {policy.describe()}",
            fix="use the proof the release workflow signed; if the signer changed (a renamed repository or "
            "workflow), pass its identity with --cert-identity or --signer-workflow",
        ) from None
    except CertValidationError as exc:
        raise ProofSignatureError(
            f"{bundle_file}'s signing certificate was not issued by a certificate authority of the trusted root "
            f"({_first_line(exc)})",
            fix="verify against the trusted root of the Sigstore instance that signed it, or distrust the bundle",
        ) from None
    except (VerificationError, Error) as exc:
        raise ProofSignatureError(
            f"{bundle_file} does not verify against the trusted root: {_first_line(exc)}",
            fix="the bundle was changed after signing or was not logged by the trusted Rekor: " + PROOF_FIX,
        ) from None


def verify_gpu_proof(
    release: Path | ReleaseManifest,
    bundle: Path,
    trusted_root: Path,
    *,
    identity: str | None = None,
    workflow: str | None = None,
    issuer: str = GITHUB_ISSUER,
) -> VerifiedProof:
    """The library call (``scrollcase verify RELEASE --gpu-proof BUNDLE``): the GPU-proof ``bundle`` of the
    release (its ``.release.json`` or the manifest a host already read) checked offline against the Sigstore
    ``trusted_root`` the host ships, signed by ``identity`` (one exact certificate identity) or ``workflow``
    (``OWNER/REPO/.github/workflows/release.yml``, any ref).  Raises TrustError subclasses (exit 13)."""
    if (identity is None) == (workflow is None):
        raise UsageError(
            "a GPU proof is checked against its signer: give exactly one of identity or workflow",
            fix="e.g. workflow='OWNER/REPO/.github/workflows/release.yml' (the CLI's --signer-workflow)",
        )
    policy = SignerPolicy(identity=identity, workflow=workflow, issuer=issuer)
    manifest, manifest_file = (
        (release, "the release manifest")
        if isinstance(release, ReleaseManifest)
        else (load_release(release), describe_path(release))
    )
    bundle_file, root_file = describe_path(bundle), describe_path(trusted_root)
    root = load_trusted_root(read_bytes(trusted_root, _READ_ROOT), root_file)
    found = load_bundles(read_bytes(bundle, _READ_BUNDLE), bundle_file)
    return check_any(manifest, found, root, policy, bundle_file=bundle_file, manifest_file=manifest_file)


def check_any(
    manifest: ReleaseManifest,
    bundles: list[Bundle],
    trusted_root: TrustedRoot,
    policy: SignerPolicy,
    *,
    bundle_file: str,
    manifest_file: str,
) -> VerifiedProof:
    """The first of ``bundles`` that proves the release (a download holds the build provenance too, and the
    proofs of re-runs); none: the refusal of the first GPU proof among them, else of the first bundle."""
    refusals: list[TrustError] = []
    for bundle in bundles:
        try:
            return check_gpu_proof(
                manifest, bundle, trusted_root, policy, bundle_file=bundle_file, manifest_file=manifest_file
            )
        except TrustError as refused:
            refusals.append(refused)
    return _raise_first([r for r in refusals if not _other_predicate(r)] or refusals)


def _other_predicate(refusal: TrustError) -> bool:
    return isinstance(refusal, ProofError) and "not a GPU proof" in refusal.message


def _raise_first(refusals: list[TrustError]) -> NoReturn:
    raise refusals[0]


_READ_BUNDLE = ReadErrors(
    UsageError,
    missing="cannot read the GPU proof {path}: no such file",
    missing_fix=PROOF_FIX,
    unreadable="cannot read the GPU proof {path}: {strerror}",
    fix="check the path and its permissions",
)
_READ_ROOT = ReadErrors(
    UsageError,
    missing="cannot read the Sigstore trusted root {path}: no such file",
    missing_fix=_ROOT_FIX,
    unreadable="cannot read the Sigstore trusted root {path}: {strerror}",
    fix="check the path and its permissions",
)
