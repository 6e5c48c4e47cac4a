"""trust/bundle.py's check of a bundle is sigstore-python's real Verifier, and tests/support/fakesigstore.py is
only worth its bundles if that Verifier checks every part of them: a good bundle passes, and each part changed,
or signed by a key the trusted root does not name, fails at the check meant for it (no check is skipped for a
bundle the fake makes) and is refused as ProofSignatureError with sigstore's reason."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from scrollcase.trust.bundle import SignerPolicy, VerifiedProof, check_gpu_proof, load_bundle, load_trusted_root
from scrollcase.trust.proof import ProofSignatureError, dump_statement, statement_of
from tests.support.fakesigstore import FakeSigstore, workflow_identity
from tests.support.releases import make_manifest

MANIFEST = make_manifest(size=4096, sha256="ab" * 32)
STATEMENT = dump_statement(statement_of(MANIFEST))
SIGNER = workflow_identity("acme/boxes")
INSTANCE = FakeSigstore("checked")


def verify(bundle: dict[str, Any], instance: FakeSigstore = INSTANCE) -> VerifiedProof:
    root = load_trusted_root(json.dumps(instance.trusted_root()).encode(), "trusted_root.json")
    policy = SignerPolicy(workflow="acme/boxes/.github/workflows/release.yml")
    return check_gpu_proof(MANIFEST, load_bundle(json.dumps(bundle).encode(), "b.json"), root, policy)


def entry(bundle: dict[str, Any]) -> dict[str, Any]:
    return bundle["verificationMaterial"]["tlogEntries"][0]  # type: ignore[no-any-return]


def flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[-1] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def test_a_bundle_of_the_fake_instance_verifies() -> None:
    assert verify(INSTANCE.attest(STATEMENT, SIGNER)).statement == statement_of(MANIFEST)


def set_entry(bundle: dict[str, Any]) -> None:
    entry(bundle)["inclusionPromise"]["signedEntryTimestamp"] = flip(
        entry(bundle)["inclusionPromise"]["signedEntryTimestamp"]
    )


def proof_hash(bundle: dict[str, Any]) -> None:
    entry(bundle)["inclusionProof"]["hashes"][0] = flip(entry(bundle)["inclusionProof"]["hashes"][0])


def checkpoint(bundle: dict[str, Any]) -> None:
    note = entry(bundle)["inclusionProof"]["checkpoint"]
    note["envelope"] = note["envelope"].replace("\n2\n", "\n3\n", 1)


def integrated_later(bundle: dict[str, Any]) -> None:
    entry(bundle)["integratedTime"] = str(int(entry(bundle)["integratedTime"]) + 3600)


def payload(bundle: dict[str, Any]) -> None:
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(STATEMENT.replace(b"demo-box", b"demo-bux")).decode()


TAMPERED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("signed entry timestamp", set_entry, "SET: invalid inclusion promise"),
    ("inclusion proof", proof_hash, "inclusion proof contains invalid root hash"),
    ("checkpoint", checkpoint, "checkpoint: invalid signature"),
    ("logged after the certificate expired", integrated_later, "cert is not valid at validation time"),
    ("statement", payload, "DSSE: invalid signature"),
]


@pytest.mark.parametrize(("part", "tamper", "refusal"), TAMPERED, ids=[t[0] for t in TAMPERED])
def test_each_part_changed_is_refused(part: str, tamper: Callable[[dict[str, Any]], None], refusal: str) -> None:
    bundle = copy.deepcopy(INSTANCE.attest(STATEMENT, SIGNER))
    tamper(bundle)
    with pytest.raises(ProofSignatureError, match=refusal):
        verify(bundle)


def test_each_key_the_trusted_root_does_not_name_is_refused() -> None:
    other_ca = FakeSigstore("other")
    with pytest.raises(ProofSignatureError, match="failed to build timestamp certificate chain"):
        verify(other_ca.attest(STATEMENT, SIGNER))
    other_ct = FakeSigstore("other-ct")
    other_ct.ca, other_ct.rekor = INSTANCE.ca, INSTANCE.rekor
    with pytest.raises(ProofSignatureError, match="SCT verify failed"):
        verify(other_ct.attest(STATEMENT, SIGNER))
    other_rekor = FakeSigstore("other-rekor")
    other_rekor.ca, other_rekor.ct = INSTANCE.ca, INSTANCE.ct
    with pytest.raises(ProofSignatureError, match="checkpoint: invalid signature"):
        verify(other_rekor.attest(STATEMENT, SIGNER))


def test_a_signature_outside_the_cas_validity_is_refused() -> None:
    early = INSTANCE.attest(STATEMENT, SIGNER, at=INSTANCE.ca.not_before - timedelta(days=1))
    with pytest.raises(ProofSignatureError, match="certificate chain"):
        verify(early)
