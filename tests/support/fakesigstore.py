"""A small Sigstore instance of our own, for tests with real signatures and no network: a Fulcio-like CA
(a root and an intermediate that issues short-lived leaf certificates carrying Fulcio's OIDC extensions and an
SCT embedded by a fake CT log), a Rekor-like transparency log (a dsse/0.0.1 entry in a two-leaf Merkle tree,
its inclusion proof, a signed checkpoint and a signed entry timestamp), and the ``trusted_root.json`` naming
all three.

The bundles it writes are what ``actions/attest`` writes on GitHub (bundle v0.3, a DSSE envelope around an
in-toto statement, one tlog entry with inclusion promise and proof), so sigstore-python's real ``Verifier``
checks every signature in them; nothing in the verifier is replaced.  Each part is built from the formats'
specifications (RFC 6962 for the SCT and the Merkle tree, the signed-note format for the checkpoint, RFC 8785
for the entry timestamp), not from sigstore-python's own helpers, so a mistake on either side shows."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID, NameOID

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
_OIDC_ISSUER = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")  # the raw issuer URL (Fulcio's first form)
_OIDC_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")  # the issuer as a DER UTF8String
_SOURCE_REPOSITORY_URI = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.12")
_IN_TOTO = "application/vnd.in-toto+json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _key_id(key: ec.EllipticCurvePublicKey) -> bytes:
    """RFC 6962's log ID: the SHA-256 of the key's SubjectPublicKeyInfo."""
    return hashlib.sha256(_spki(key)).digest()


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _der_utf8(text: str) -> bytes:
    raw = text.encode()
    return b"\x0c" + _der_length(len(raw)) + raw


def _sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _ca_cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    not_before: datetime,
    path_length: int,
) -> x509.Certificate:
    """A CA certificate as Fulcio's: self-signed when ``issuer`` is None; an intermediate limited to code signing."""
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "scrollcase-tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


@dataclass
class FakeCA:
    """A Fulcio-like CA, shaped as the public-good one: a self-signed root and an intermediate under it that
    signs the leaves (``key`` and ``cert`` are the intermediate's); the trusted root lists both."""

    name: str
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    root_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    not_before: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(days=30))

    def __post_init__(self) -> None:
        root_name = _name(self.name)
        self.root = _ca_cert(root_name, self.root_key, None, self.not_before, 1)
        self.cert = _ca_cert(
            _name(f"{self.name}-intermediate"), self.key, (root_name, self.root_key), self.not_before, 0
        )

    @property
    def chain(self) -> list[x509.Certificate]:
        """The certificate chain of the trusted root's certificate authority: intermediate, then root."""
        return [self.cert, self.root]


@dataclass
class FakeLog:
    """A log's key (Rekor's, or the CT log's) and the name its checkpoints carry."""

    origin: str
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    @property
    def log_id(self) -> bytes:
        return _key_id(self.key.public_key())

    def instance(self, url: str, start: datetime) -> dict[str, object]:
        """Its ``TransparencyLogInstance`` in a trusted root."""
        return {
            "baseUrl": url,
            "hashAlgorithm": "SHA2_256",
            "publicKey": {
                "rawBytes": _b64(_spki(self.key.public_key())),
                "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                "validFor": {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ")},
            },
            "logId": {"keyId": _b64(self.log_id)},
        }


@dataclass
class Identity:
    """Who signs: the certificate's SAN (a workflow URI) and the OIDC issuer that vouched for it."""

    san: str
    issuer: str = GITHUB_ISSUER
    repository: str = ""
    legacy_issuer: bool = True  # also the deprecated raw form (1.1) Fulcio still writes beside the DER one (1.8)


def workflow_identity(repo: str, workflow: str = "release.yml", ref: str = "refs/tags/release-1") -> Identity:
    """The identity GitHub's OIDC token gives a workflow run, as Fulcio writes it into the certificate."""
    return Identity(
        f"https://github.com/{repo}/.github/workflows/{workflow}@{ref}", repository=f"https://github.com/{repo}"
    )


@dataclass
class FakeSigstore:
    """One instance: its CA, CT log and Rekor, and what a verifier must trust to check what it signs."""

    name: str = "fake"
    ca: FakeCA = field(init=False)
    ct: FakeLog = field(init=False)
    rekor: FakeLog = field(init=False)

    def __post_init__(self) -> None:
        self.ca = FakeCA(f"{self.name}-fulcio")
        self.ct = FakeLog(f"{self.name}-ctlog")
        self.rekor = FakeLog(f"{self.name}-rekor - 1234567890")

    def trusted_root(self) -> dict[str, object]:
        start = self.ca.not_before
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [self.rekor.instance(f"https://rekor.{self.name}.invalid", start)],
            "certificateAuthorities": [
                {
                    "subject": {"organization": "scrollcase-tests", "commonName": self.ca.name},
                    "uri": f"https://fulcio.{self.name}.invalid",
                    "certChain": {
                        "certificates": [
                            {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))} for cert in self.ca.chain
                        ]
                    },
                    "validFor": {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ")},
                }
            ],
            "ctlogs": [self.ct.instance(f"https://ctfe.{self.name}.invalid", start)],
            "timestampAuthorities": [],
        }

    def write_trusted_root(self, path: Path) -> Path:
        path.write_text(json.dumps(self.trusted_root(), indent=2), encoding="utf-8")
        return path

    def attest(self, statement: bytes, identity: Identity, *, at: datetime | None = None) -> dict[str, object]:
        """A bundle v0.3 over ``statement`` as ``actions/attest`` makes one: a fresh key, a leaf certificate
        for ``identity`` valid ten minutes, the DSSE signature, and the Rekor entry proving it was logged."""
        signed_at = (at or datetime.now(UTC) - timedelta(minutes=5)).replace(microsecond=0)
        signer = ec.generate_private_key(ec.SECP256R1())
        cert = self.leaf_certificate(signer.public_key(), identity, signed_at)
        signature = _sign(signer, _pae(_IN_TOTO, statement))
        body = _dsse_body(statement, signature, cert)
        return {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [self.log_entry(body, int(signed_at.timestamp()) + 1)],
                "timestampVerificationData": {},
            },
            "dsseEnvelope": {
                "payload": _b64(statement),
                "payloadType": _IN_TOTO,
                "signatures": [{"sig": _b64(signature)}],
            },
        }

    def leaf_certificate(self, public: ec.EllipticCurvePublicKey, identity: Identity, at: datetime) -> x509.Certificate:
        """Fulcio's leaf: empty subject, the identity as a critical SAN, code signing, the OIDC extensions, and
        an SCT from the CT log over the precertificate (the same certificate without the SCT list)."""
        builder = _leaf_builder(self.ca, public, identity, at)
        precert = builder.sign(self.ca.key, hashes.SHA256())
        sct = self._sct(precert.tbs_certificate_bytes, int(at.timestamp()) * 1000)
        ext = x509.UnrecognizedExtension(ExtensionOID.PRECERT_SIGNED_CERTIFICATE_TIMESTAMPS, _der_octets(sct))
        cert = builder.add_extension(ext, critical=False).sign(self.ca.key, hashes.SHA256())
        assert cert.tbs_precertificate_bytes == precert.tbs_certificate_bytes
        return cert

    def _sct(self, tbs: bytes, millis: int) -> bytes:
        """RFC 6962 3.2: a v1 SCT for a precert entry, as the TLS-encoded SignedCertificateTimestampList."""
        issuer_key_hash = _key_id(self.ca.key.public_key())
        signed = struct.pack("!BBQH", 0, 0, millis, 1) + issuer_key_hash + len(tbs).to_bytes(3, "big") + tbs
        signed += struct.pack("!H", 0)
        signature = _sign(self.ct.key, signed)
        one = bytes([0]) + self.ct.log_id + struct.pack("!QH", millis, 0) + bytes([4, 3])
        one += struct.pack("!H", len(signature)) + signature
        serialized = struct.pack("!H", len(one)) + one
        return struct.pack("!H", len(serialized)) + serialized

    def log_entry(self, body: bytes, integrated_time: int) -> dict[str, object]:
        """Rekor's entry for ``body``: leaf 1 of a two-leaf tree, its inclusion proof, the signed checkpoint
        over the tree's root, and the signed entry timestamp (the inclusion promise)."""
        other = _leaf_hash(b"an earlier entry of the fake log")
        root = _node_hash(other, _leaf_hash(body))
        index, size = 1, 2
        header = f"{self.rekor.origin}\n{size}\n{_b64(root)}\n"
        note_sig = self.rekor.log_id[:4] + _sign(self.rekor.key, header.encode())
        checkpoint = f"{header}\n\u2014 {self.rekor.origin.split()[0]} {_b64(note_sig)}\n"
        promise = {
            "body": _b64(body),
            "integratedTime": integrated_time,
            "logID": self.rekor.log_id.hex(),
            "logIndex": index,
        }
        return {
            "logIndex": str(index),
            "logId": {"keyId": _b64(self.rekor.log_id)},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": _b64(_sign(self.rekor.key, rfc8785.dumps(promise)))},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": _b64(root),
                "treeSize": str(size),
                "hashes": [_b64(other)],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": _b64(body),
        }


def _leaf_builder(
    ca: FakeCA, public: ec.EllipticCurvePublicKey, identity: Identity, at: datetime
) -> x509.CertificateBuilder:
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(ca.cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(at - timedelta(seconds=30))
        .not_valid_after(at + timedelta(minutes=10))
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity.san)]), critical=True)
        .add_extension(x509.UnrecognizedExtension(_OIDC_ISSUER_V2, _der_utf8(identity.issuer)), critical=False)
    )
    if identity.legacy_issuer:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(_OIDC_ISSUER, identity.issuer.encode()), critical=False
        )
    if identity.repository:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(_SOURCE_REPOSITORY_URI, _der_utf8(identity.repository)), critical=False
        )
    return builder


def _der_octets(data: bytes) -> bytes:
    return b"\x04" + _der_length(len(data)) + data


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding: what the signature covers."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(payload), payload)


def _dsse_body(statement: bytes, signature: bytes, cert: x509.Certificate) -> bytes:
    """Rekor's dsse/0.0.1 entry body (canonical JSON) for one signed envelope."""
    envelope = {"payload": _b64(statement), "payloadType": _IN_TOTO, "signatures": [{"sig": _b64(signature)}]}
    pem = cert.public_bytes(serialization.Encoding.PEM)
    body = {
        "apiVersion": "0.0.1",
        "kind": "dsse",
        "spec": {
            "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(rfc8785.dumps(envelope)).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement).hexdigest()},
            "signatures": [{"signature": _b64(signature), "verifier": _b64(pem)}],
        },
    }
    return rfc8785.dumps(body)
