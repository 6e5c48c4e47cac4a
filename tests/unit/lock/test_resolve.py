"""Planning a PyPI resolution (pure): requirements, held conda packages, CUDA constraints, uv's input."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scrollcase.errors import ManifestError, SolveError
from scrollcase.lock.manifest import parse_manifest
from scrollcase.lock.resolve import (
    accelerator_constraints,
    held_packages,
    parse_pylock,
    plan_resolution,
    project_toml,
    pypi_requirements,
    python_platform,
    resolution_error,
    uv_arguments,
)
from scrollcase.targets.classify import CUDA_RUNTIME_WHEELS
from scrollcase.targets.vocabulary import TargetSpec

CUDA124 = TargetSpec("linux", "x86_64", "cuda", "12.4")
CPU = TargetSpec("linux", "x86_64", "cpu")

MANIFEST = """\
[workspace]
name = "demo"
channels = ["conda-forge"]
platforms = ["linux-64", "win-64"]
exclude-newer = "2026-11-30"

[system-requirements]
cuda = "12.4"

[dependencies]
python = "3.11.*"
numpy = "*"

[pypi-dependencies]
torch = "==2.6.0"
einops = "*"
transformers = { version = ">=4.40", extras = ["torch"] }

[target.win-64.pypi-dependencies]
torch = { version = "==2.6.0", index = "https://download.pytorch.org/whl/cu124/" }
"""


@dataclass
class Record:
    """The attributes of a rattler RepoDataRecord that planning reads."""

    name: str
    version: str
    depends: list[str] = field(default_factory=list)


RECORDS = [
    Record("python", "3.11.7"),
    Record("numpy", "2.4.6", ["python >=3.11,<3.12.0a0", "libblas"]),
    Record("pytorch", "2.5.1", ["python_abi 3.11.* *_cp311"]),
    Record("libblas", "3.9", ["libopenblas"]),
]


def test_requirements_in_pep508_form_with_target_overrides() -> None:
    manifest = parse_manifest(MANIFEST)
    linux = {r.name: r for r in pypi_requirements(manifest, "linux-64")}
    assert linux["torch"].requirement == "torch==2.6.0" and linux["torch"].index is None
    assert linux["einops"].requirement == "einops"
    assert linux["transformers"].requirement == "transformers[torch]>=4.40"
    windows = {r.name: r for r in pypi_requirements(manifest, "win-64")}
    assert windows["torch"].index == "https://download.pytorch.org/whl/cu124"
    assert windows["torch"].key == "target.win-64.pypi-dependencies.torch"


@pytest.mark.parametrize(
    "value",
    [
        '{ path = "wheels/x.whl" }',
        '{ git = "https://github.com/a/b" }',
        '{ url = "https://example.org/x.tar.gz" }',
        '{ path = ".", editable = true }',
    ],
)
def test_path_git_url_and_editable_requirements_are_refused_with_the_fix(value: str) -> None:
    manifest = parse_manifest(MANIFEST + f"\n[target.linux-64.pypi-dependencies]\nmine = {value}\n")
    with pytest.raises(ManifestError, match="hash-pinned wheels only") as info:
        pypi_requirements(manifest, "linux-64")
    problem = info.value.problems[0]
    assert problem.key == "target.linux-64.pypi-dependencies.mine" and problem.line == 23
    assert "index" in (problem.fix or "")


def test_conda_python_packages_are_held_and_never_emitted() -> None:
    held = held_packages(RECORDS)
    assert held == {"numpy": "2.4.6", "torch": "2.5.1"}  # pytorch is torch on PyPI; libblas is no Python package
    plan = plan_resolution(parse_manifest(MANIFEST), CUDA124, RECORDS, "demo")
    assert plan.held == ("numpy", "torch")
    assert "numpy==2.4.6" in plan.constraints and plan.python_version == "3.11.7"


def test_cuda_target_allows_only_its_cuda_runtime_wheels() -> None:
    assert accelerator_constraints(CUDA124) == tuple(f"{name}==12.4.*" for name in CUDA_RUNTIME_WHEELS)
    assert "nvidia-cuda-runtime==12.4.*" in accelerator_constraints(CUDA124)  # the CUDA 13 name cannot be 12.4
    assert accelerator_constraints(CPU) == tuple(f"{name}<0" for name in CUDA_RUNTIME_WHEELS)


@pytest.mark.parametrize(
    ("subdir", "platform", "env"),
    [
        ("linux-64", "x86_64-manylinux_2_28", {}),
        ("linux-aarch64", "aarch64-manylinux_2_28", {}),
        ("win-64", "x86_64-pc-windows-msvc", {}),
        ("osx-arm64", "aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "11.0"}),
        ("osx-64", "x86_64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "10.15"}),
    ],
)
def test_wheel_platform_per_subdir(subdir: str, platform: str, env: dict[str, str]) -> None:
    assert python_platform(subdir) == (platform, env)


def test_unknown_subdir_is_a_solve_error() -> None:
    with pytest.raises(SolveError, match="no PyPI wheel platform"):
        python_platform("linux-ppc64le")


def test_no_python_in_the_conda_solve_is_explained() -> None:
    with pytest.raises(SolveError, match="holds no python") as info:
        plan_resolution(parse_manifest(MANIFEST), CUDA124, [Record("numpy", "2.0")], "demo")
    assert 'python = "3.11.*"' in (info.value.fix or "")


def test_uv_is_told_the_platform_python_constraints_indexes_and_time_bound(tmp_path: Path) -> None:
    manifest = parse_manifest(MANIFEST + '\n[pypi-options]\nextra-index-urls = ["https://example.org/simple/"]\n')
    plan = plan_resolution(manifest, TargetSpec("windows", "x86_64", "cuda", "12.4"), RECORDS, "demo")
    args = uv_arguments(plan, tmp_path)
    assert args[:3] == ["pip", "compile", str(tmp_path / "pyproject.toml")]
    for pair in (
        ["--python-platform", "x86_64-pc-windows-msvc"],
        ["--python-version", "3.11.7"],
        ["--exclude-newer", "2026-11-30"],
        ["--index-url", "https://pypi.org/simple"],
        ["--extra-index-url", "https://example.org/simple"],
        ["--no-emit-package", "numpy"],
    ):
        assert any(args[i : i + 2] == pair for i in range(len(args))), pair
    assert "--no-build" in args and "--no-config" in args
    assert plan.indexes == ("https://pypi.org/simple", "https://example.org/simple")


def test_project_toml_pins_a_package_to_its_own_index() -> None:
    plan = plan_resolution(parse_manifest(MANIFEST), TargetSpec("windows", "x86_64", "cuda", "12.4"), RECORDS, "demo")
    project = tomllib.loads(project_toml(plan))
    assert project["project"]["requires-python"] == "==3.11.*"
    assert "torch==2.6.0" in project["project"]["dependencies"]
    assert project["tool"]["uv"]["sources"] == {"torch": {"index": "pixi-index-1"}}
    assert project["tool"]["uv"]["index"] == [
        {"name": "pixi-index-1", "url": "https://download.pytorch.org/whl/cu124", "explicit": True}
    ]


PYLOCK = """\
lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "Torch"
version = "2.6.0"
wheels = [{ url = "https://files.example/torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl", size = 10, \
hashes = { sha256 = "aa" } }]

[[packages]]
name = "filelock"
version = "3.0"
wheels = [{ url = "file:///w/filelock-3.0-py3-none-any.whl", hashes = { sha256 = "bb" } }]
"""


def test_pylock_wheels_carry_their_per_package_index() -> None:
    plan = plan_resolution(parse_manifest(MANIFEST), TargetSpec("windows", "x86_64", "cuda", "12.4"), RECORDS, "demo")
    wheels = parse_pylock(PYLOCK, plan)
    assert [(w.name, w.version, w.sha256, w.size, w.index) for w in wheels] == [
        ("filelock", "3.0", "bb", None, None),
        ("torch", "2.6.0", "aa", 10, "https://download.pytorch.org/whl/cu124"),
    ]


def test_a_package_with_only_an_sdist_is_refused() -> None:
    plan = plan_resolution(parse_manifest(MANIFEST), CUDA124, RECORDS, "demo")
    with pytest.raises(SolveError, match="without a wheel"):
        parse_pylock('[[packages]]\nname = "x"\nversion = "1"\nsdist = { url = "https://e/x-1.tar.gz" }\n', plan)


def test_a_failed_resolution_names_the_requirement_target_and_cuda_constraint() -> None:
    plan = plan_resolution(parse_manifest(MANIFEST), CUDA124, RECORDS, "demo")
    error = resolution_error(
        plan,
        "  x No solution found when resolving dependencies:\n"
        "  because torch==2.6.0 depends on nvidia-cuda-runtime-cu12==12.6.77 and ...",
    )
    assert "linux-x86_64-cuda12.4" in str(error)
    [problem] = error.problems
    assert problem.key == "pypi-dependencies.torch" and problem.value == "torch==2.6.0"
    assert "CUDA 12.4" in (problem.fix or "") and "nvidia-cuda-runtime*==12.4.*" in (problem.fix or "")
    assert "torch 2.5/2.6" in (problem.fix or "")
    assert "index to https://download.pytorch.org/whl/cu124" in (problem.fix or "")
    cpu = resolution_error(plan_resolution(parse_manifest(MANIFEST), CPU, RECORDS, "demo"), "no solution: einops")
    assert cpu.problems[0].key == "pypi-dependencies.einops"
    assert "download.pytorch.org/whl/cpu" in (cpu.problems[0].fix or "")
