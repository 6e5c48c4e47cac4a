"""The box's SBOM: CycloneDX 1.6 JSON listing every conda package and PyPI wheel it holds.

Built from what the box actually holds: each conda package's ``conda-meta/*.json`` record (name, version,
build, channel, subdir, sha256 and md5 of the package file, license), and each PyPI wheel the lock pins
(name, version, the wheel's sha256) with the license its installed ``*.dist-info/METADATA`` declares
(``License-Expression``, else a one-line ``License``).  cyclonedx-python-lib builds and serialises it.

The SBOM is written beside the release manifest (``<archive stem>.sbom.json``), which records its name,
size and sha256: index → manifest → SBOM is part of the digest chain.  Its bytes are reproducible: the
serial number is derived from the archive's sha256 and the timestamp is the archive's fixed mtime.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from scrollcase.errors import BuildError
from scrollcase.format.identity import BoxIdentity
from scrollcase.format.layout import BoxLayout

SBOM_SUFFIX = ".sbom.json"
_NAMESPACE = uuid.UUID("5c0d1f6e-2a8b-4b7e-9a43-7f1b2f0c5e11")  # scrollcase's: serials are uuid5(archive sha256)


@dataclass(frozen=True)
class Package:
    """One component: ``kind`` conda or pypi; ``hashes`` algorithm -> hex digest of the package file."""

    kind: str
    name: str
    version: str
    hashes: tuple[tuple[str, str], ...]
    license: str | None
    qualifiers: tuple[tuple[str, str], ...] = ()


def sbom_name(archive_name: str) -> str:
    return archive_name.removesuffix(".tar.zst") + SBOM_SUFFIX


# ---------------------------------------------------------------- what the box holds


def conda_packages(box_root: Path, layout: BoxLayout) -> list[Package]:
    """Every conda package of the box, from its conda-meta records (sorted by name)."""
    found = []
    for record in sorted((box_root / layout.conda_meta).glob("*.json")):
        data = json.loads(record.read_text(encoding="utf-8"))
        hashes = tuple((alg, data[key]) for alg, key in (("SHA-256", "sha256"), ("MD5", "md5")) if data.get(key))
        qualifiers = tuple((k, str(data[k])) for k in ("build", "channel", "subdir") if data.get(k))
        found.append(
            Package("conda", data["name"], str(data["version"]), hashes, data.get("license") or None, qualifiers)
        )
    return sorted(found, key=lambda p: p.name)


def pypi_packages(box_root: Path, layout: BoxLayout, wheels: Iterable[Any]) -> list[Package]:
    """Every PyPI wheel the lock pins (``name``, ``version``, ``sha256``), licensed by its installed METADATA."""
    installed = _dist_infos(box_root / layout.site_packages)
    found = []
    for wheel in wheels:
        dist = installed.get(canonicalize_name(wheel.name))
        found.append(
            Package("pypi", wheel.name, wheel.version, (("SHA-256", wheel.sha256),), _license(dist) if dist else None)
        )
    return sorted(found, key=lambda p: canonicalize_name(p.name))


def _dist_infos(site_packages: Path) -> dict[str, PathDistribution]:
    found: dict[str, PathDistribution] = {}
    for folder in site_packages.glob("*.dist-info"):
        name = folder.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        found[canonicalize_name(name)] = PathDistribution(folder)
    return found


def _license(dist: PathDistribution) -> str | None:
    meta = dist.metadata
    if meta is None:  # no METADATA file
        return None
    expression = str((meta.get_all("License-Expression") or [""])[0]).strip()
    if expression:
        return expression
    text = str((meta.get_all("License") or [""])[0]).strip()
    return text if text and "\n" not in text and len(text) <= 100 else None  # not a whole licence text


# ---------------------------------------------------------------- the document


def make_sbom(identity: BoxIdentity, archive_sha256: str, packages: Sequence[Package], timestamp: int) -> bytes:
    """CycloneDX 1.6 JSON (sorted keys, two-space indent, trailing newline): the box and its packages."""
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6

    box = Component(
        type=ComponentType.APPLICATION,
        name=identity.boxId,
        version=identity.version,
        bom_ref=f"box:{identity.boxId}@{identity.version}/{identity.targetId}",
        hashes=[_hash("SHA-256", archive_sha256)],
        description=f"scrollcase box {identity.boxId} {identity.version} for {identity.targetId}",
    )
    meta = BomMetaData(component=box, timestamp=datetime.fromtimestamp(timestamp, UTC))
    bom = Bom(
        components=[_component(p) for p in packages],
        serial_number=uuid.uuid5(_NAMESPACE, archive_sha256),
        metadata=meta,
    )
    bom.register_dependency(box, bom.components)
    text = JsonV1Dot6(bom).output_as_string()
    return (json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n").encode("utf-8")


def _component(package: Package) -> Any:
    from cyclonedx.model.component import Component
    from packageurl import PackageURL

    purl = PackageURL(
        type=package.kind, name=package.name, version=package.version, qualifiers=dict(package.qualifiers) or None
    )
    return Component(
        name=package.name,
        version=package.version,
        purl=purl,
        bom_ref=purl.to_string(),
        hashes=[_hash(alg, value) for alg, value in package.hashes],
        licenses=[_licence(package.license)] if package.license else None,
    )


def _hash(algorithm: str, value: str) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType

    return HashType(alg=HashAlgorithm(algorithm), content=value)


def _licence(text: str) -> Any:
    try:
        from cyclonedx.contrib.license.factories import LicenseFactory
    except ImportError:  # cyclonedx-python-lib before 11.x kept it here (now a deprecated alias)
        from cyclonedx.factory.license import LicenseFactory

    return LicenseFactory().make_from_string(text)  # an SPDX id, an SPDX expression, or a plain name


def validation_errors(data: bytes) -> str | None:
    """None when ``data`` is valid CycloneDX 1.6 JSON (the library's strict JSON Schema), else why not."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(data.decode("utf-8"))
    return None if error is None else str(error)


def require_valid(data: bytes, name: str) -> None:
    """BuildError when the SBOM about to be written is not valid CycloneDX 1.6."""
    error = validation_errors(data)
    if error is not None:
        raise BuildError(f"{name} is not valid CycloneDX 1.6: {error}", fix="report this as a scrollcase bug")
