from __future__ import annotations

import pytest

from scrollcase.recipe.targets import (
    SUBDIRS,
    TargetSpec,
    all_targets,
    host_platform,
    make_target,
    parse_target_id,
    split_recipe_id,
    target_id,
    target_problem,
)


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
    target = make_target(*spec)
    assert target.target_id == tid == target_id(*spec)
    assert target.subdir == subdir
    assert parse_target_id(tid) == target


def test_subdirs_match_the_spec() -> None:
    assert SUBDIRS == {
        ("linux", "x86_64"): "linux-64",
        ("linux", "aarch64"): "linux-aarch64",
        ("windows", "x86_64"): "win-64",
        ("osx", "arm64"): "osx-arm64",
        ("osx", "x86_64"): "osx-64",
    }


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (("osx", "arm64", "cuda", "12.4"), "use metal"),
        (("osx", "x86_64", "cuda", "12.4"), "use metal"),
        (("linux", "x86_64", "cuda", None), "cudaVersion is required"),
        (("linux", "x86_64", "cuda", "12"), "major.minor"),
        (("linux", "x86_64", "cpu", "12.4"), "only allowed for CUDA"),
        (("linux", "x86_64", "metal", None), "not available on linux-x86_64"),
        (("windows", "aarch64", "cpu", None), "not a supported platform/arch pair"),
        (("osx", "x86_64", "metal", None), "not available"),
    ],
)
def test_unsupported_targets_say_why(spec: tuple[str, str, str, str | None], needle: str) -> None:
    assert needle in (target_problem(*spec) or "")
    with pytest.raises(ValueError, match=needle):
        make_target(*spec)


@pytest.mark.parametrize("text", ["linux-x86_64", "linux-x86_64-cuda", "osx-arm64-cuda12.4", "a-b-c-d", ""])
def test_bad_target_ids(text: str) -> None:
    with pytest.raises(ValueError):
        parse_target_id(text)


def test_virtual_packages() -> None:
    cuda = make_target("linux", "x86_64", "cuda", "12.4").virtual_packages()
    assert cuda["__cuda"] == "12.4" and "__glibc" in cuda and "__linux" in cuda
    assert "__cuda" not in make_target("linux", "x86_64", "cpu").virtual_packages()
    assert make_target("windows", "x86_64", "cpu").virtual_packages() == {"__win": "0"}
    assert make_target("osx", "arm64", "metal").virtual_packages()["__osx"] == "11.0"


def test_all_targets_expand_cuda_versions() -> None:
    ids = {t.target_id for t in all_targets(("12.4", "12.8"))}
    assert {
        "linux-x86_64-cuda12.4",
        "linux-x86_64-cuda12.8",
        "windows-x86_64-cuda12.8",
        "osx-arm64-metal",
    } <= ids
    assert not any(t.platform == "osx" and t.is_cuda for t in all_targets(("12.4",)))


def test_split_recipe_id() -> None:
    assert split_recipe_id("tiny-mlp-linux-x86_64-cuda12.4") == (
        "tiny-mlp",
        TargetSpec("linux", "x86_64", "cuda", "12.4"),
    )
    assert split_recipe_id("a.b-osx-arm64-metal") == ("a.b", TargetSpec("osx", "arm64", "metal"))
    assert split_recipe_id("tiny-mlp") is None
    assert split_recipe_id("tiny-osx-arm64-cuda12.4") is None


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
