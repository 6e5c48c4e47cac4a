"""The signing keys of a store's TUF roles: ed25519 private keys in PEM (PKCS8) files or environment variables.

A keys folder holds ``root.pem``, ``targets.pem``, ``snapshot.pem`` and ``timestamp.pem`` (mode 0600); a role
with more than one key (a root of threshold 2, say) adds ``root-2.pem``, ``root-3.pem`` … .  The root keys stay
offline: publish and ``scrollcase trust timestamp`` need only the online keys, which a release workflow gets from
its secrets as PEM text in ``SCROLLCASE_TUF_TARGETS_KEY``, ``SCROLLCASE_TUF_SNAPSHOT_KEY`` and
``SCROLLCASE_TUF_TIMESTAMP_KEY`` (a variable wins over the folder's file).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.signer import CryptoSigner, SSlibKey

from scrollcase.errors import TrustError, UsageError, describe_path
from scrollcase.io.files import ReadErrors, read_bytes, write_atomic

ROLES = ("root", "targets", "snapshot", "timestamp")
ONLINE_ROLES = ("targets", "snapshot", "timestamp")
ENV_VARS = {role: f"SCROLLCASE_TUF_{role.upper()}_KEY" for role in ONLINE_ROLES}
_KEY_FILE = re.compile(r"^(root|targets|snapshot|timestamp)(?:-([2-9]|[1-9][0-9]+))?\.pem$")
_READ_KEY = ReadErrors(UsageError, missing_fix="pass the keys folder scrollcase trust init wrote")


class MissingKeysError(TrustError):
    """The keys a step needs are in neither the keys folder nor the environment."""


class WrongKeyError(TrustError):
    """A key that is not one the store's root names for the role, or a file that is not an ed25519 key."""


@dataclass(frozen=True)
class RoleKeys:
    """Signers per role name (``root``, ``targets``, ``snapshot``, ``timestamp``) and where each came from."""

    signers: Mapping[str, Sequence[CryptoSigner]] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # role -> "keys/targets.pem" or the env var

    def of(self, role: str) -> Sequence[CryptoSigner]:
        """The role's signers; MissingKeysError naming where they would come from when there are none."""
        found = self.signers.get(role, ())
        if not found:
            raise MissingKeysError(
                f"no {role} key: this step signs the {role} role",
                fix=key_fix(role),
            )
        return found

    def public(self, role: str) -> list[SSlibKey]:
        return [signer.public_key for signer in self.of(role)]

    def source(self, role: str) -> str:
        return self.sources.get(role, f"the {role} key")

    def with_role(self, role: str, signers: Sequence[CryptoSigner], source: str) -> RoleKeys:
        return RoleKeys({**self.signers, role: tuple(signers)}, {**self.sources, role: source})


def key_fix(role: str) -> str:
    if role == "root":
        return "pass --keys with the offline keys folder that holds root.pem (trust init wrote it)"
    return f"pass --keys with a folder holding {role}.pem, or set {ENV_VARS[role]} to the key's PEM text (a secret)"


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def signer_from_pem(data: bytes, source: str) -> CryptoSigner:
    """The signer of an ed25519 PKCS8 PEM private key; WrongKeyError naming ``source`` for anything else."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise WrongKeyError(
            f"{source} is not an unencrypted PEM private key ({exc})",
            fix="pass the ed25519 PKCS8 PEM file scrollcase trust init wrote (-----BEGIN PRIVATE KEY-----)",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise WrongKeyError(
            f"{source} is a {type(key).__name__.removeprefix('_')}, not an ed25519 key",
            fix="generate ed25519 keys: scrollcase trust init writes them, or "
            "openssl genpkey -algorithm ed25519 -out KEY.pem",
        )
    return CryptoSigner(key, SSlibKey.from_crypto(key.public_key()))


def key_files(folder: Path, role: str) -> list[Path]:
    """The role's key files in ``folder``: ``<role>.pem`` then ``<role>-2.pem`` … in number order."""
    if not folder.is_dir():
        return []
    found = [(m, p) for p in folder.iterdir() if (m := _KEY_FILE.match(p.name)) and m.group(1) == role]
    return [p for m, p in sorted(found, key=lambda item: int(item[0].group(2) or 1))]


def generate_keys(folder: Path, root_keys: int = 1) -> RoleKeys:
    """Write a new key for every role whose file ``folder`` lacks (``root_keys`` root keys), mode 0600, and
    return all of the folder's keys; existing key files are kept, never overwritten."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # the private keys: only their owner may list them
    for role in ROLES:
        wanted = root_keys if role == "root" else 1
        names = [f"{role}.pem", *(f"{role}-{n}.pem" for n in range(2, wanted + 1))]
        for name in names:
            if not (folder / name).exists():
                write_atomic(folder / name, private_pem(new_private_key()), mode=0o600)
    return load_keys(folder, {}, ROLES)


def load_keys(folder: Path | None, environ: Mapping[str, str], roles: Iterable[str]) -> RoleKeys:
    """The keys of ``roles`` from the environment (online roles only) or ``folder``; a role found in neither is
    left out (:meth:`RoleKeys.of` says what is missing when a step needs it)."""
    keys = RoleKeys()
    for role in roles:
        variable = ENV_VARS.get(role)
        if variable and environ.get(variable, "").strip():
            keys = keys.with_role(role, [signer_from_pem(environ[variable].encode(), variable)], variable)
            continue
        files = key_files(folder, role) if folder is not None else []
        if files:
            signers = [signer_from_pem(read_bytes(path, _READ_KEY), describe_path(path)) for path in files]
            keys = keys.with_role(role, signers, ", ".join(describe_path(path) for path in files))
    return keys


def require_keys(keys: RoleKeys, roles: Iterable[str], doing: str) -> None:
    """MissingKeysError naming every absent role's file and variable at once, before anything is written."""
    missing = [role for role in roles if not keys.signers.get(role)]
    if not missing:
        return
    if "root" in missing:
        fix = key_fix("root")
    else:
        files = ", ".join(f"{role}.pem" for role in missing)
        variables = ", ".join(ENV_VARS[role] for role in missing)
        fix = (
            f"pass --keys DIR with {files} (trust init wrote them), or set {variables} to the keys' PEM text (secrets)"
        )
    raise MissingKeysError(f"{doing} needs the {', '.join(missing)} key(s), and none was given", fix=fix)
