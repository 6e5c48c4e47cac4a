"""Planning a solve (pure): channels with overrides, specs, virtual packages."""

from __future__ import annotations

import pytest

from scrollcase.errors import UsageError
from scrollcase.lock.channels import apply_overrides, channel_url, parse_overrides
from scrollcase.lock.manifest import parse_manifest
from scrollcase.lock.solve import plan_solve
from scrollcase.targets.vocabulary import TargetSpec

MANIFEST = """\
[workspace]
name = "demo"
channels = ["conda-forge", "https://prefix.dev/pytorch"]
platforms = ["linux-64", "win-64"]

[dependencies]
python = "3.11.*"
pytorch = { version = "2.*", build = "cuda*" }

[target.win-64.dependencies]
vc = "14.*"
"""


def test_cuda_target_adds_cuda_virtual_package() -> None:
    plan = plan_solve(parse_manifest(MANIFEST), TargetSpec("linux", "x86_64", "cuda", "12.4"), "demo")
    assert dict(plan.virtual_packages) == {"__unix": "0", "__linux": "5.10", "__glibc": "2.28", "__cuda": "12.4"}
    assert plan.specs == ('python[version="3.11.*"]', 'pytorch[version="2.*", build="cuda*"]')
    assert plan.channels == ("https://conda.anaconda.org/conda-forge/", "https://prefix.dev/pytorch/")
    assert plan.subdir == "linux-64"


def test_windows_target_uses_win_virtual_package_and_target_table() -> None:
    plan = plan_solve(parse_manifest(MANIFEST), TargetSpec("windows", "x86_64", "cpu"), "demo")
    assert dict(plan.virtual_packages) == {"__win": "0"}
    assert 'vc[version="14.*"]' in plan.specs and plan.subdir == "win-64"


def test_overrides_by_name_or_url() -> None:
    overrides = {"conda-forge": "file:///srv/mirror/cf", "https://prefix.dev/pytorch/": "file:///srv/pt"}
    assert apply_overrides(["conda-forge", "https://prefix.dev/pytorch"], overrides) == (
        "file:///srv/mirror/cf/",
        "file:///srv/pt/",
    )
    assert channel_url("conda-forge") == "https://conda.anaconda.org/conda-forge/"


def test_override_parsing_env_then_command_line() -> None:
    parsed = parse_overrides(["conda-forge=file:///b"], "conda-forge=file:///a, nvidia=file:///n")
    assert parsed == {"conda-forge": "file:///b", "nvidia": "file:///n"}
    with pytest.raises(UsageError, match="bad channel override"):
        parse_overrides(["conda-forge"])


def test_pypi_dependencies_no_longer_need_pixi() -> None:
    """[pypi-dependencies] are resolved by uv after the conda solve, so planning the conda part succeeds."""
    manifest = parse_manifest(MANIFEST + '\n[pypi-dependencies]\ntorch = "*"\n')
    plan = plan_solve(manifest, TargetSpec("linux", "x86_64", "cpu"), "demo")
    assert plan.specs[0] == 'python[version="3.11.*"]'
