from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from scrollcase.build.sbom import Package, conda_packages, make_sbom, pypi_packages, sbom_name, validation_errors
from scrollcase.format.identity import BoxIdentity
from scrollcase.format.layout import box_layout
from tests.support.releases import make_manifest

LAYOUT = box_layout("venv/bin/python", "linux", "3.11", "models")


def identity() -> BoxIdentity:
    manifest = make_manifest(size=1, sha256="a" * 64)
    return BoxIdentity(**{name: getattr(manifest, name) for name in BoxIdentity.model_fields})


def test_the_sbom_is_named_after_the_archive() -> None:
    assert sbom_name("box-1.0.0-linux-x86_64-cpu.tar.zst") == "box-1.0.0-linux-x86_64-cpu.sbom.json"


def test_conda_records_and_locked_wheels_become_packages(tmp_path: Path) -> None:
    meta = tmp_path / "venv" / "conda-meta"
    meta.mkdir(parents=True)
    record = {"name": "numpy", "version": "2.1.0", "build": "py311_0", "channel": "conda-forge"}
    (meta / "numpy-2.1.0-py311_0.json").write_text(json.dumps({**record, "subdir": "linux-64", "sha256": "b" * 64}))
    dist = tmp_path / LAYOUT.site_packages / "tiny_wheel-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.4\nName: tiny-wheel\nVersion: 1.0\nLicense-Expression: MIT\n")
    (conda,) = conda_packages(tmp_path, LAYOUT)
    assert (conda.name, conda.version, conda.hashes, conda.license) == (
        "numpy",
        "2.1.0",
        (("SHA-256", "b" * 64),),
        None,
    )
    assert dict(conda.qualifiers) == {"build": "py311_0", "channel": "conda-forge", "subdir": "linux-64"}
    wheel = SimpleNamespace(name="Tiny_Wheel", version="1.0", sha256="c" * 64)
    (pypi,) = pypi_packages(tmp_path, LAYOUT, [wheel])
    assert (pypi.kind, pypi.license, pypi.hashes) == ("pypi", "MIT", (("SHA-256", "c" * 64),))


def test_the_document_is_valid_cyclonedx_16_and_reproducible() -> None:
    packages = [
        Package("conda", "python", "3.11.7", (("SHA-256", "d" * 64), ("MD5", "e" * 32)), "PSF-2.0", (("build", "0"),)),
        Package("pypi", "torch", "2.6.0", (("SHA-256", "f" * 64),), "BSD-3-Clause"),
        Package("pypi", "odd", "1.0", (), "Some Custom Licence"),
    ]
    data = make_sbom(identity(), "a" * 64, packages, 0)
    assert validation_errors(data) is None
    assert data == make_sbom(identity(), "a" * 64, packages, 0)
    doc = json.loads(data)
    assert doc["specVersion"] == "1.6" and doc["metadata"]["timestamp"].startswith("1970-01-01")
    by_purl = {c["purl"]: c for c in doc["components"]}
    assert set(by_purl) == {"pkg:conda/python@3.11.7?build=0", "pkg:pypi/torch@2.6.0", "pkg:pypi/odd@1.0"}
    assert by_purl["pkg:pypi/odd@1.0"]["licenses"] == [{"license": {"name": "Some Custom Licence"}}]
    assert by_purl["pkg:pypi/torch@2.6.0"]["licenses"] == [{"license": {"id": "BSD-3-Clause"}}]


def test_an_invalid_document_is_reported() -> None:
    assert validation_errors(b'{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": 3}') is not None
