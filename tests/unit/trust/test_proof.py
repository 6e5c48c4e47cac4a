"""The signed GPU proof (#34): statements made from release manifests, signed by a Sigstore instance of our own
(tests/support/fakesigstore.py: real certificates, SCT, Rekor entry and signatures) and checked by
sigstore-python's real Verifier, offline, then against the manifest."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.errors import TrustError, UsageError
from scrollcase.format.release import ParityOutcome, ParityReport, ReleaseManifest, dump_release
from scrollcase.trust.bundle import verify_gpu_proof
from scrollcase.trust.proof import (
    PREDICATE_TYPE,
    ProofError,
    ProofEvidenceError,
    ProofMismatchError,
    ProofSignatureError,
    ProofSignerError,
    ProofSubjectError,
    dump_predicate,
    dump_statement,
    predicate_of,
    statement_of,
)
from tests.support.fakesigstore import FakeSigstore, workflow_identity
from tests.support.releases import evidence_for, make_manifest

REPO = "acme/boxes"
WORKFLOW = f"{REPO}/.github/workflows/release.yml"
SIGNER = workflow_identity(REPO)


@pytest.fixture(scope="module")
def sigstore() -> FakeSigstore:
    return FakeSigstore("good")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Verification is offline: any connection attempt fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the GPU-proof check tried to reach the network: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def manifest(cuda: str | None = "12.4", box_id: str = "demo-box", digest: str = "ab" * 32) -> ReleaseManifest:
    found = make_manifest(box_id=box_id, cuda=cuda, size=4096, sha256=digest)
    parity = ParityReport(
        passed=True,
        reference="cpu",
        accelerators=["cpu", "cuda"],
        tolerances={"absolute": 1e-5},
        results=[ParityOutcome(accelerator="cuda", output="logits", passed=True, durationSeconds=1.5, cosine=1.0)],
    )
    return found.model_copy(update={"parity": parity})


def write(tmp: Path, sigstore: FakeSigstore, release: ReleaseManifest, statement: bytes, signer=SIGNER) -> Path:  # type: ignore[no-untyped-def]
    """The release manifest, the bundle signing ``statement`` and the trusted root, under ``tmp``."""
    (tmp / "box.release.json").write_bytes(dump_release(release))
    (tmp / "box.gpu-proof.sigstore.json").write_text(json.dumps(sigstore.attest(statement, signer)))
    sigstore.write_trusted_root(tmp / "trusted_root.json")
    return tmp / "box.gpu-proof.sigstore.json"


def check(tmp: Path, *, workflow: str | None = WORKFLOW, identity: str | None = None):  # type: ignore[no-untyped-def]
    return verify_gpu_proof(
        tmp / "box.release.json",
        tmp / "box.gpu-proof.sigstore.json",
        tmp / "trusted_root.json",
        workflow=workflow,
        identity=identity,
    )


def test_the_statement_is_about_the_archive_and_says_what_the_manifest_says() -> None:
    release = manifest()
    statement = json.loads(dump_statement(statement_of(release)))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": release.archive.name, "digest": {"sha256": "ab" * 32}}]
    assert statement["predicateType"] == PREDICATE_TYPE == "https://scrollcase.dev/gpu-proof/v1"
    predicate = statement["predicate"]
    assert (predicate["boxId"], predicate["version"], predicate["targetId"]) == ("demo-box", "1.0.0", release.targetId)
    assert predicate["release"] == {
        "name": release.archive.name.replace(".tar.zst", ".release.json"),
        "sha256": hashlib.sha256(dump_release(release)).hexdigest(),
    }
    assert predicate["gpu"] == release.gpu.model_dump(mode="json", exclude_none=True)  # type: ignore[union-attr]
    assert predicate["selfTest"]["passed"] is True and predicate["parity"]["passed"] is True
    # run timings are not a claim: the manifest leaves them out, and so does the proof (rebuilds match)
    assert "durationSeconds" not in json.dumps(predicate)
    assert dump_predicate(predicate_of(release)) == dump_predicate(predicate_of(manifest()))
    assert json.loads(dump_predicate(predicate_of(release))) == predicate


def test_a_good_proof_verifies_offline(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    write(tmp_path, sigstore, release, dump_statement(statement_of(release)))
    proof = check(tmp_path)
    assert proof.signer == SIGNER.san
    assert proof.issuer == "https://token.actions.githubusercontent.com"
    assert proof.predicate == predicate_of(release)
    assert proof.to_json()["gpu"] == "CUDA runtime 12.4 (nvidia-cuda-runtime-cu12 12.4.127)"
    # one exact identity works as well as the workflow (any ref)
    assert check(tmp_path, workflow=None, identity=SIGNER.san).signer == SIGNER.san


def test_the_issuer_is_read_from_either_of_fulcios_extensions(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    for issuer in ("https://token.actions.githubusercontent.com", "https://issuer.example/with/a/" + "long" * 40):
        signer = workflow_identity(REPO)
        signer.issuer, signer.legacy_issuer = issuer, False  # only the DER form (1.8), a long one too
        write(tmp_path, sigstore, release, dump_statement(statement_of(release)), signer=signer)
        proof = verify_gpu_proof(
            tmp_path / "box.release.json",
            tmp_path / "box.gpu-proof.sigstore.json",
            tmp_path / "trusted_root.json",
            workflow=WORKFLOW,
            issuer=issuer,
        )
        assert proof.issuer == issuer


def test_a_proof_of_another_archive_is_refused(tmp_path: Path, sigstore: FakeSigstore) -> None:
    other = manifest(digest="cd" * 32)
    write(tmp_path, sigstore, manifest(), dump_statement(statement_of(other)))
    with pytest.raises(ProofSubjectError) as raised:
        check(tmp_path)
    assert raised.value.exit_code == 13
    assert f"not of {other.archive.name} (sha256 {'ab' * 32})" in raised.value.message
    assert "box.gpu-proof.sigstore.json is a GPU proof of" in raised.value.message


def test_a_statement_changed_after_signing_is_refused(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    bundle = write(tmp_path, sigstore, release, dump_statement(statement_of(release)))
    data = json.loads(bundle.read_text())
    forged = json.loads(base64.b64decode(data["dsseEnvelope"]["payload"]))
    forged["predicate"]["selfTest"]["passed"] = False
    data["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(forged).encode()).decode()
    bundle.write_text(json.dumps(data))
    with pytest.raises(ProofSignatureError, match=r"does not verify against the trusted root: .*DSSE"):
        check(tmp_path)


def test_a_signed_predicate_that_differs_from_the_manifest_is_refused(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    failed = release.parity.model_copy(update={"passed": False})  # type: ignore[union-attr]
    write(tmp_path, sigstore, release, dump_statement(statement_of(release.model_copy(update={"parity": failed}))))
    with pytest.raises(ProofMismatchError) as raised:
        check(tmp_path)
    keys = [p.key for p in raised.value.problems]
    assert keys == ["predicate.release", "predicate.parity"]  # the manifest's bytes differ, and its parity
    assert raised.value.message.endswith("box.release.json says (release, parity differ)")


def test_cpu_evidence_under_a_cuda_name_is_refused(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest(cuda="12.4").model_copy(update={"gpu": evidence_for(None)})
    write(tmp_path, sigstore, release, dump_statement(statement_of(release)))
    with pytest.raises(ProofEvidenceError) as raised:
        check(tmp_path)
    assert "proves a box that is not what its name linux-x86_64-cuda12.4 says" in raised.value.message
    assert "needs CUDA 12.4, but the box holds no CUDA runtime at all" in raised.value.problems[0].message


def test_a_cpu_box_with_cpu_evidence_verifies(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest(cuda=None)
    write(tmp_path, sigstore, release, dump_statement(statement_of(release)))
    assert check(tmp_path).predicate.targetId == "linux-x86_64-cpu"


def test_a_proof_signed_by_another_identity_is_refused(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    fork = workflow_identity("mallory/boxes")
    write(tmp_path, sigstore, release, dump_statement(statement_of(release)), signer=fork)
    with pytest.raises(ProofSignerError) as raised:
        check(tmp_path)
    assert f"is signed by {fork.san} (issuer https://token.actions.githubusercontent.com)" in raised.value.message
    assert f"not by the workflow {WORKFLOW} (any ref)" in raised.value.message
    # the same SAN from another OIDC issuer is not the workflow either
    other_issuer = workflow_identity(REPO)
    other_issuer.issuer = "https://issuer.example"
    write(tmp_path, sigstore, release, dump_statement(statement_of(release)), signer=other_issuer)
    with pytest.raises(ProofSignerError, match=r"issuer https://issuer\.example"):
        check(tmp_path)


def test_a_proof_from_a_ca_not_in_the_trusted_root_is_refused(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    write(tmp_path, FakeSigstore("elsewhere"), release, dump_statement(statement_of(release)))
    sigstore.write_trusted_root(tmp_path / "trusted_root.json")  # the host trusts only its own instance
    with pytest.raises(ProofSignatureError, match=r"not issued by a certificate authority of the trusted root"):
        check(tmp_path)


def test_a_provenance_bundle_is_refused_by_its_predicate_type(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    provenance = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": release.archive.name, "digest": {"sha256": release.archive.sha256}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {},
    }
    write(tmp_path, sigstore, release, json.dumps(provenance).encode())
    with pytest.raises(ProofError, match=r"predicate type https://slsa\.dev/provenance/v1, not a GPU proof"):
        check(tmp_path)


def test_unreadable_inputs_are_named(tmp_path: Path, sigstore: FakeSigstore) -> None:
    release = manifest()
    write(tmp_path, sigstore, release, dump_statement(statement_of(release)))
    (tmp_path / "trusted_root.json").write_text('{"mediaType": "nonsense"}')
    with pytest.raises(ProofError, match=r"trusted_root\.json is not a Sigstore trusted root"):
        check(tmp_path)
    sigstore.write_trusted_root(tmp_path / "trusted_root.json")
    (tmp_path / "box.gpu-proof.sigstore.json").write_text("{}")
    with pytest.raises(ProofError, match=r"box\.gpu-proof\.sigstore\.json is not a Sigstore bundle"):
        check(tmp_path)
    (tmp_path / "box.gpu-proof.sigstore.json").unlink()
    with pytest.raises(UsageError, match=r"cannot read the GPU proof .*: no such file"):
        check(tmp_path)
    with pytest.raises(UsageError, match=r"exactly one of identity or workflow"):
        check(tmp_path, workflow=None)


def test_every_refusal_is_a_trust_error() -> None:
    for error in (ProofError, ProofSignatureError, ProofSignerError, ProofSubjectError, ProofMismatchError):
        assert issubclass(error, TrustError) and error.exit_code == 13
    assert issubclass(ProofEvidenceError, TrustError)


def test_a_download_of_several_bundles_verifies_by_its_gpu_proof(tmp_path: Path, sigstore: FakeSigstore) -> None:
    """``gh attestation download`` writes JSON lines: the build provenance's bundle beside the GPU proof's."""
    release = manifest()
    provenance = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": release.archive.name, "digest": {"sha256": release.archive.sha256}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {},
    }
    bundle = write(tmp_path, sigstore, release, json.dumps(provenance).encode())
    proof = sigstore.attest(dump_statement(statement_of(release)), SIGNER)
    bundle.write_text(bundle.read_text() + "\n\n" + json.dumps(proof) + "\n")
    assert check(tmp_path).signer == SIGNER.san
    # a pretty-printed single bundle is one document, not lines
    bundle.write_text(json.dumps(proof, indent=2))
    assert check(tmp_path).predicate == predicate_of(release)
    # several, none of them this release's proof: the GPU proof's refusal, not the provenance's
    other = sigstore.attest(dump_statement(statement_of(manifest(digest="cd" * 32))), SIGNER)
    bundle.write_text(json.dumps(provenance | {"x": 1}) + "\n" + json.dumps(other) + "\n")
    with pytest.raises(ProofError, match=r"box\.gpu-proof\.sigstore\.json:1 is not a Sigstore bundle"):
        check(tmp_path)
    bundle.write_text(json.dumps(sigstore.attest(json.dumps(provenance).encode(), SIGNER)) + "\n" + json.dumps(other))
    with pytest.raises(ProofSubjectError):
        check(tmp_path)


def test_a_bundle_without_a_log_entry_says_to_use_gh(tmp_path: Path, sigstore: FakeSigstore) -> None:
    """GitHub's own Sigstore (private repositories) logs nothing: sigstore-python cannot check such a bundle."""
    release = manifest()
    bundle = write(tmp_path, sigstore, release, dump_statement(statement_of(release)))
    data = json.loads(bundle.read_text())
    data["verificationMaterial"]["tlogEntries"] = []
    bundle.write_text(json.dumps(data))
    with pytest.raises(ProofError, match=r"expected exactly one log entry") as raised:
        check(tmp_path)
    assert "`gh attestation verify`" in (raised.value.fix or "")
