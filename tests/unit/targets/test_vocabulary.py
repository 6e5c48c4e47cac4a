"""The target registry (vocabulary, subdirs, supported combinations) and the rules a target obeys."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scrollcase.recipe.model import Target
from scrollcase.recipe.rules import target_rules
from scrollcase.targets.vocabulary import SUBDIRS, SUPPORTED, TargetSpec, host_platform, target_id


def _fields(platform: str, arch: str, accelerator: str, cuda_version: str | None) -> dict[str, Any]:
    fields = {"platform": platform, "arch": arch, "accelerator": accelerator}
    return fields | ({"cudaVersion": cuda_version} if cuda_version is not None else {})


@pytest.mark.parametrize(
    ("spec", "tid", "subdir"),
    [
        (("linux", "x86_64", "cuda", "12.4"), "linux-x86_64-cuda12.4", "linux-64"),
        (("linux", "x86_64", "cuda", "12.8"), "linux-x86_64-cuda12.8", "linux-64"),
        (("windows", "x86_64", "cuda", "12.4"), "windows-x86_64-cuda12.4", "win-64"),
        (("linux", "x86_64", "cpu", None), "linux-x86_64-cpu", "linux-64"),
        (("windows", "x86_64", "cpu", None), "windows-x86_64-cpu", "win-64"),
        (("linux", "aarch64", "cpu", None), "linux-aarch64-cpu", "linux-aarch64"),
        (("linux", "aarch64", "cuda", "12.6"), "linux-aarch64-cuda12.6", "linux-aarch64"),
        (("osx", "arm64", "metal", None), "osx-arm64-metal", "osx-arm64"),
        (("osx", "arm64", "cpu", None), "osx-arm64-cpu", "osx-arm64"),
        (("osx", "x86_64", "cpu", None), "osx-x86_64-cpu", "osx-64"),
    ],
)
def test_registry_ids_and_subdirs(spec: tuple[str, str, str, str | None], tid: str, subdir: str) -> None:
    target = Target.model_validate(_fields(*spec))
    assert target.spec == TargetSpec(*spec)
    assert target.target_id == tid == target_id(*spec)
    assert target.spec.subdir == subdir


def test_subdirs_match_the_spec() -> None:
    assert SUBDIRS == {
        ("linux", "x86_64"): "linux-64",
        ("linux", "aarch64"): "linux-aarch64",
        ("windows", "x86_64"): "win-64",
        ("osx", "arm64"): "osx-arm64",
        ("osx", "x86_64"): "osx-64",
    }


def test_every_supported_combination_is_a_valid_target() -> None:
    assert SUPPORTED.keys() == SUBDIRS.keys()
    for (platform, arch), accelerators in SUPPORTED.items():
        for accelerator in accelerators:
            fields = _fields(platform, arch, accelerator, "12.4" if accelerator == "cuda" else None)
            assert target_rules(fields) == [], fields
            assert Target.model_validate(fields).spec.subdir == SUBDIRS[(platform, arch)]
    assert all("cuda" not in accelerators for (platform, _), accelerators in SUPPORTED.items() if platform == "osx")


@pytest.mark.parametrize(
    ("spec", "key", "needle"),
    [
        (("osx", "arm64", "cuda", "12.4"), "accelerator", "use metal"),
        (("osx", "x86_64", "cuda", "12.4"), "accelerator", "use metal"),
        (("linux", "x86_64", "cuda", None), "cudaVersion", "cudaVersion is required"),
        (("linux", "x86_64", "cpu", "12.4"), "cudaVersion", "only allowed for CUDA"),
        (("linux", "x86_64", "metal", None), "accelerator", "not available on linux-x86_64"),
        (("windows", "aarch64", "cpu", None), "arch", "not a supported platform/arch pair"),
        (("osx", "x86_64", "metal", None), "accelerator", "not available"),
    ],
)
def test_unsupported_targets_say_why(spec: tuple[str, str, str, str | None], key: str, needle: str) -> None:
    [violation] = target_rules(_fields(*spec))
    assert violation.path == ("target", key) and needle in violation.message and violation.fix
    with pytest.raises(ValidationError, match=needle):
        Target.model_validate(_fields(*spec))


def test_cuda_version_format_is_the_field_rule() -> None:
    assert target_rules(_fields("linux", "x86_64", "cuda", "12")) == []
    with pytest.raises(ValidationError, match=r"must be MAJOR\.MINOR"):
        Target.model_validate(_fields("linux", "x86_64", "cuda", "12"))


def test_virtual_packages() -> None:
    cuda = TargetSpec("linux", "x86_64", "cuda", "12.4").virtual_packages()
    assert cuda["__cuda"] == "12.4" and "__glibc" in cuda and "__linux" in cuda
    assert "__cuda" not in TargetSpec("linux", "x86_64", "cpu").virtual_packages()
    assert TargetSpec("windows", "x86_64", "cpu").virtual_packages() == {"__win": "0"}
    assert TargetSpec("osx", "arm64", "metal").virtual_packages()["__osx"] == "11.0"


@pytest.mark.parametrize(
    ("sys_platform", "machine", "expected"),
    [
        ("linux", "x86_64", ("linux", "x86_64")),
        ("linux", "aarch64", ("linux", "aarch64")),
        ("linux", "arm64", ("linux", "aarch64")),
        ("win32", "AMD64", ("windows", "x86_64")),
        ("darwin", "arm64", ("osx", "arm64")),
        ("darwin", "x86_64", ("osx", "x86_64")),
    ],
)
def test_host_platform_vocabulary(sys_platform: str, machine: str, expected: tuple[str, str]) -> None:
    assert host_platform(sys_platform, machine) == expected


def test_host_platform_of_this_machine_is_known() -> None:
    plat, arch = host_platform()
    assert plat in ("linux", "windows", "osx") and arch
