"""Every (environment, platform) of the 14 real-world pixi workspaces, classified and pinned.

The expected rows were checked by hand against the locks (grepping each environment's pytorch/torch
entries and the nvidia-cuda-runtime wheels beside untagged wheels).  Traps included: platforms that
declare ``__cuda`` but resolved CPU builds (multi-machine p2, array-api-extra dev-cuda/p2,
pytorch-jetson linux-64 under ``[system-requirements] cuda``), ``pytorch-gpu``/``pytorch-cpu``
metapackages, ``pytorch-3dunet``, ``libopenvino-pytorch-frontend``, untagged PyPI wheels.
Rows not listed have no torch at all.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scrollcase.lock.read import load_lock, parse_lock
from scrollcase.targets.classify import classify_torch
from tests.support.corpus import corpus_root, skip_without

ROOT = corpus_root()  # shared/ beside the checkout; an error only where .ci/run requires it

# workspace -> (lock version, number of (env, platform) rows, {"env/platform": (subdir, provider,
#                                                                version, build, accelerator)})
EXPECTED: dict[str, tuple[int, int, dict[str, tuple[str, str, str, str | None, str]]]] = {
    "Takobox710__yolo-tool": (
        7,
        4,
        {
            "default/p1": ("win-64", "pypi", "2.13.0+cu130", None, "cuda13.0"),
            "default/win-64": ("win-64", "pypi", "2.13.0+cu130", None, "cuda13.0"),
            "release-cpu/p1": ("win-64", "pypi", "2.13.0+cpu", None, "cpu"),
            "release-cpu/win-64": ("win-64", "pypi", "2.13.0+cpu", None, "cpu"),
        },
    ),
    "UH-LMU__microscopy-ai-envs": (
        6,
        8,
        {
            "cellpose3/linux-64": ("linux-64", "conda", "2.5.1", "cuda126_py310hf0de92c_306", "cuda12.6"),
            "cellpose3/win-64": ("win-64", "conda", "2.9.1", "cuda128_mkl_py310_hcc6672c_300", "cuda12.8"),
            "cellpose4/linux-64": ("linux-64", "conda", "2.5.1", "cuda126_py310hf0de92c_306", "cuda12.6"),
            "cellpose4/win-64": ("win-64", "conda", "2.7.1", "cuda128_mkl_py310_h9d6390c_304", "cuda12.8"),
            "micro-sam/linux-64": ("linux-64", "conda", "2.5.1", "cuda126_py312h1763f6d_306", "cuda12.6"),
            "micro-sam/win-64": ("win-64", "conda", "2.7.1", "cuda128_mkl_py312_ha31c84e_304", "cuda12.8"),
        },
    ),
    "data-apis__array-api-extra": (
        7,
        90,
        {
            "dev/linux-64": ("linux-64", "conda", "2.12.0", "cpu_mkl_py314_h94e416f_100", "cpu"),
            "dev/linux-aarch64": ("linux-aarch64", "conda", "2.12.0", "cpu_generic_py314_hac00946_0", "cpu"),
            "dev/osx-64": ("osx-64", "conda", "2.12.0", "cpu_mkl_py314_h02f7b3f_100", "cpu"),
            "dev/osx-arm64": ("osx-arm64", "conda", "2.12.0", "cpu_generic_py314_h30a3122_0", "cpu"),
            "dev/p1": ("linux-64", "conda", "2.12.0", "cuda129_mkl_py314_h245c5d3_300", "cuda12.9"),
            "dev/p2": ("win-64", "conda", "2.13.0", "cuda128_mkl_py314_hf773a96_301", "cuda12.8"),
            "dev/win-64": ("win-64", "conda", "2.13.0", "cpu_mkl_py314_hfc2ca84_101", "cpu"),
            "dev-cuda/p1": ("linux-64", "conda", "2.12.0", "cuda129_mkl_py314_h245c5d3_300", "cuda12.9"),
            "dev-cuda/p2": ("win-64", "conda", "2.13.0", "cpu_mkl_py314_hfc2ca84_101", "cpu"),
            "tests-backends/linux-64": ("linux-64", "conda", "2.12.0", "cpu_mkl_py314_h94e416f_100", "cpu"),
            "tests-backends/linux-aarch64": ("linux-aarch64", "conda", "2.12.0", "cpu_generic_py314_hac00946_0", "cpu"),
            "tests-backends/osx-64": ("osx-64", "conda", "2.12.0", "cpu_mkl_py314_h02f7b3f_100", "cpu"),
            "tests-backends/osx-arm64": ("osx-arm64", "conda", "2.12.0", "cpu_generic_py314_h30a3122_0", "cpu"),
            "tests-backends/p1": ("linux-64", "conda", "2.12.0", "cuda129_mkl_py314_h245c5d3_300", "cuda12.9"),
            "tests-backends/p2": ("win-64", "conda", "2.13.0", "cuda128_mkl_py314_hf773a96_301", "cuda12.8"),
            "tests-backends/win-64": ("win-64", "conda", "2.13.0", "cpu_mkl_py314_hfc2ca84_101", "cpu"),
            "tests-backends-py311/linux-64": ("linux-64", "conda", "2.12.0", "cpu_mkl_py311_h338015a_100", "cpu"),
            "tests-backends-py311/linux-aarch64": (
                "linux-aarch64",
                "conda",
                "2.12.0",
                "cpu_generic_py311_h8ebb990_0",
                "cpu",
            ),
            "tests-backends-py311/osx-64": ("osx-64", "conda", "2.12.0", "cpu_mkl_py311_h1a2d5a6_100", "cpu"),
            "tests-backends-py311/osx-arm64": ("osx-arm64", "conda", "2.12.0", "cpu_generic_py311_hbaf2b46_0", "cpu"),
            "tests-backends-py311/p1": ("linux-64", "conda", "2.12.0", "cuda129_mkl_py311_h49b8cc7_300", "cuda12.9"),
            "tests-backends-py311/p2": ("win-64", "conda", "2.13.0", "cuda128_mkl_py311_ha6b46c1_301", "cuda12.8"),
            "tests-backends-py311/win-64": ("win-64", "conda", "2.13.0", "cpu_mkl_py311_hd8a7154_101", "cpu"),
            "tests-cuda/p1": ("linux-64", "conda", "2.12.0", "cuda129_mkl_py314_h245c5d3_300", "cuda12.9"),
            "tests-cuda/p2": ("win-64", "conda", "2.13.0", "cpu_mkl_py314_hfc2ca84_101", "cpu"),
            "tests-cuda-py311/p1": ("linux-64", "conda", "2.12.0", "cuda129_mkl_py311_h49b8cc7_300", "cuda12.9"),
            "tests-cuda-py311/p2": ("win-64", "conda", "2.13.0", "cpu_mkl_py311_hd8a7154_101", "cpu"),
        },
    ),
    "intMinsu__pixi-sample": (
        5,
        13,
        {
            "py310cu115/linux-64": ("linux-64", "conda", "1.11.0", "py3.10_cuda11.5_cudnn8.3.2_0", "cuda11.5"),
            "py310cu117/linux-64": ("linux-64", "conda", "1.13.1", "py3.10_cuda11.7_cudnn8.5.0_0", "cuda11.7"),
            "py310cu121/linux-64": ("linux-64", "conda", "2.3.0", "py3.10_cuda12.1_cudnn8.9.2_0", "cuda12.1"),
            "py38cu101/linux-64": ("linux-64", "conda", "1.7.1", "py3.8_cuda10.1.243_cudnn7.6.3_0", "cuda10.1"),
            "py38cu110/linux-64": ("linux-64", "conda", "1.7.1", "py3.8_cuda11.0.221_cudnn8.0.5_0", "cuda11.0"),
            "py38cu115/linux-64": ("linux-64", "conda", "1.11.0", "py3.8_cuda11.5_cudnn8.3.2_0", "cuda11.5"),
            "py38cu117/linux-64": ("linux-64", "conda", "1.13.1", "py3.8_cuda11.7_cudnn8.5.0_0", "cuda11.7"),
            "py38cu121/linux-64": ("linux-64", "conda", "2.3.0", "py3.8_cuda12.1_cudnn8.9.2_0", "cuda12.1"),
            "py39cu110/linux-64": ("linux-64", "conda", "1.7.1", "py3.9_cuda11.0.221_cudnn8.0.5_0", "cuda11.0"),
            "py39cu115/linux-64": ("linux-64", "conda", "1.11.0", "py3.9_cuda11.5_cudnn8.3.2_0", "cuda11.5"),
            "py39cu117/linux-64": ("linux-64", "conda", "1.13.1", "py3.9_cuda11.7_cudnn8.5.0_0", "cuda11.7"),
            "py39cu121/linux-64": ("linux-64", "conda", "2.3.0", "py3.9_cuda12.1_cudnn8.9.2_0", "cuda12.1"),
        },
    ),
    "lorenzocerrone__BIA-Sanity-Preserver": (
        6,
        30,
        {
            "cellpose/linux-64": ("linux-64", "pypi", "2.9.1", None, "cuda12.8"),
            "cellpose/osx-arm64": ("osx-arm64", "pypi", "2.9.1", None, "cpu"),
            "cellpose/win-64": ("win-64", "pypi", "2.9.1", None, "cpu"),
            "convpaint/linux-64": ("linux-64", "pypi", "2.8.0", None, "cuda12.8"),
            "convpaint/osx-arm64": ("osx-arm64", "pypi", "2.8.0", None, "cpu"),
            "convpaint/win-64": ("win-64", "pypi", "2.8.0", None, "cpu"),
            "ilastik/linux-64": ("linux-64", "conda", "2.8.0", "cpu_mkl_py311_hcfbaf12_102", "cpu"),
            "ilastik/osx-arm64": ("osx-arm64", "conda", "2.8.0", "cpu_generic_py311_hf0c13c8_2", "cpu"),
            "ilastik/win-64": ("win-64", "conda", "2.8.0", "cpu_mkl_py311_h4f6e1b8_101", "cpu"),
            "plant-seg/linux-64": ("linux-64", "conda", "2.8.0", "cpu_mkl_py313_h19d87ba_102", "cpu"),
            "plant-seg/osx-arm64": ("osx-arm64", "conda", "2.8.0", "cpu_generic_py313_h1ee2325_2", "cpu"),
            "plant-seg/win-64": ("win-64", "conda", "2.8.0", "cpu_mkl_py313_ha63c8e0_102", "cpu"),
        },
    ),
    "matthewfeickert-talks__reproducible-cuda-workflows-with-pixi-scipy-2026__book-code-cupy-example": (7, 2, {}),
    "matthewfeickert__pytorch-gpu-pixi-example": (
        6,
        3,
        {
            "default/linux-64": ("linux-64", "conda", "2.8.0", "cuda129_mkl_py313_h7947483_302", "cuda12.9"),
            "default/osx-arm64": ("osx-arm64", "conda", "2.8.0", "cpu_generic_py313_h1ee2325_2", "cpu"),
            "default/win-64": ("win-64", "conda", "2.8.0", "cuda128_mkl_py313_hd1c3b22_302", "cuda12.8"),
        },
    ),
    "pablovela5620__wilor-nano": (
        6,
        2,
        {
            "default/linux-64": ("linux-64", "pypi", "2.10.0+cu128", None, "cuda12.8"),
            "dev/linux-64": ("linux-64", "pypi", "2.10.0+cu128", None, "cuda12.8"),
        },
    ),
    "prefix-dev__pixi__examples-llama-index-inference": (
        5,
        2,
        {
            "default/linux-64": ("linux-64", "pypi", "2.4.0", None, "cuda12.1"),
            "default/osx-arm64": ("osx-arm64", "pypi", "2.4.0", None, "cpu"),
        },
    ),
    "prefix-dev__pixi__examples-multi-machine": (
        7,
        5,
        {
            "default/linux-64": ("linux-64", "conda", "2.10.0", "cpu_mkl_py314_hf472749_104", "cpu"),
            "default/p1": ("win-64", "conda", "2.10.0", "cpu_mkl_py314_h9de12ed_104", "cpu"),
            "default/p2": ("linux-64", "conda", "2.10.0", "cpu_mkl_py314_hf472749_104", "cpu"),
            "default/p3": ("osx-arm64", "conda", "2.10.0", "cpu_generic_py313_h459cd70_4", "cpu"),
            "default/win-64": ("win-64", "conda", "2.10.0", "cpu_mkl_py314_h9de12ed_104", "cpu"),
        },
    ),
    "prefix-dev__pixi__examples-pytorch": (
        5,
        6,
        {
            "cf-channel/linux-64": ("linux-64", "conda", "2.4.0", "cuda120_py312h26b3cf7_301", "cuda12.0"),
            "cf-channel/linux-aarch64": ("linux-aarch64", "conda", "2.4.0", "cuda120_py312haadfe8f_200", "cuda12.0"),
            "cf-channel/osx-64": ("osx-64", "conda", "2.4.0", "cpu_mkl_py312h0c6306f_101", "cpu"),
            "cf-channel/osx-arm64": ("osx-arm64", "conda", "2.4.0", "cpu_generic_py312h6bd8f41_1", "cpu"),
            "nvidia-channel/linux-64": ("linux-64", "conda", "2.4.1", "py3.12_cuda12.4_cudnn9.1.0_0", "cuda12.4"),
            "pytorch-channel/linux-64": ("linux-64", "conda", "2.4.1", "py3.12_cuda12.4_cudnn9.1.0_0", "cuda12.4"),
        },
    ),
    "ruben-arts__haystack-pixi-example": (
        3,
        3,
        {
            "default/linux-64": ("linux-64", "conda", "2.0.0", "cpu_generic_py39h1dbe8e4_4", "cpu"),
            "default/osx-64": ("osx-64", "conda", "2.0.0", "cpu_mkl_py39h0a49516_104", "cpu"),
            "default/osx-arm64": ("osx-arm64", "conda", "2.0.0", "cpu_generic_py39h4a6bf10_4", "cpu"),
        },
    ),
    "ruben-arts__pytorch-jetson": (
        6,
        4,
        {
            "default/linux-64": ("linux-64", "conda", "2.10.0", "cpu_mkl_py312_hca44ed5_103", "cpu"),
            "default/linux-aarch64": (
                "linux-aarch64",
                "conda",
                "2.10.0",
                "cuda129_generic_py312_h08ae647_203",
                "cuda12.9",
            ),
            "default/osx-arm64": ("osx-arm64", "conda", "2.10.0", "cpu_generic_py312_h2470ad0_3", "cpu"),
            "default/win-64": ("win-64", "conda", "2.10.0", "cuda128_mkl_py312_hf522e72_303", "cuda12.8"),
        },
    ),
    "scipy__scipy__github-workflows": (
        6,
        49,
        {
            "array-api-cpu/linux-64": ("linux-64", "conda", "2.7.1", "cpu_mkl_py313_h58dab0e_103", "cpu"),
            "array-api-cpu/osx-arm64": ("osx-arm64", "conda", "2.7.1", "cpu_generic_py313_heefb1e6_4", "cpu"),
            "array-api-cpu/win-64": ("win-64", "conda", "2.8.0", "cpu_mkl_py313_he1d8d61_100", "cpu"),
            "torch-cpu/linux-64": ("linux-64", "conda", "2.7.1", "cpu_mkl_py313_h58dab0e_103", "cpu"),
            "torch-cpu/osx-arm64": ("osx-arm64", "conda", "2.7.1", "cpu_generic_py313_heefb1e6_4", "cpu"),
            "torch-cpu/win-64": ("win-64", "conda", "2.8.0", "cpu_mkl_py313_he1d8d61_100", "cpu"),
            "torch-cuda/linux-64": ("linux-64", "conda", "2.7.1", "cuda129_mkl_py313_h1e53aa0_304", "cuda12.9"),
        },
    ),
}


def _rows(lock_path: Path, fast: bool = True) -> dict[str, tuple[str, str | None, str | None, str | None, str | None]]:
    lock = parse_lock(lock_path.read_text(encoding="utf-8"), str(lock_path), fast=fast)
    out = {}
    for env in lock.environments.values():
        for platform, packages in env.packages.items():
            torch = classify_torch(packages)
            out[f"{env.name}/{platform}"] = (
                lock.subdir_of(platform),
                torch.provider,
                torch.version,
                torch.build,
                torch.accelerator,
            )
    return out


pytestmark = skip_without(ROOT)


@pytest.mark.parametrize("workspace", sorted(EXPECTED))
def test_every_environment_and_platform_is_classified(workspace: str) -> None:
    version, count, torch_rows = EXPECTED[workspace]
    lock_path = ROOT / workspace / "pixi.lock"
    assert load_lock(lock_path).version == version
    rows = _rows(lock_path)
    assert len(rows) == count
    with_torch = {key: row for key, row in rows.items() if row[1] is not None}
    assert with_torch == torch_rows
    for key, row in rows.items():
        if key not in torch_rows:
            assert row[1:] == (None, None, None, None), key


@pytest.mark.parametrize("workspace", sorted(EXPECTED))
def test_fast_scanner_and_yaml_reader_agree(workspace: str) -> None:
    lock_path = ROOT / workspace / "pixi.lock"
    fast = parse_lock(lock_path.read_text(encoding="utf-8"), str(lock_path))
    slow = parse_lock(lock_path.read_text(encoding="utf-8"), str(lock_path), fast=False)
    assert fast.platforms == slow.platforms
    assert fast.environments.keys() == slow.environments.keys()
    for name, env in fast.environments.items():
        other = slow.environments[name]
        assert (env.channels, env.indexes) == (other.channels, other.indexes)
        assert {p: [(x.kind, x.location, x.name, x.version, x.build) for x in v] for p, v in env.packages.items()} == {
            p: [(x.kind, x.location, x.name, x.version, x.build) for x in v] for p, v in other.packages.items()
        }


def test_record_lines_point_at_the_torch_record() -> None:
    lock_path = ROOT / "prefix-dev__pixi__examples-multi-machine" / "pixi.lock"
    lines = lock_path.read_text(encoding="utf-8").splitlines()
    lock = load_lock(lock_path)
    torch = classify_torch(lock.environments["default"].packages["p2"])
    assert torch.package is not None and torch.package.line and torch.package.entry_line
    assert lines[torch.package.line - 1] == f"- conda: {torch.package.location}"
    assert lines[torch.package.entry_line - 1].strip() == f"- conda: {torch.package.location}"


def test_v7_platforms_map_lock_local_names_to_subdirs() -> None:
    lock = load_lock(ROOT / "prefix-dev__pixi__examples-multi-machine" / "pixi.lock")
    assert lock.platforms["p1"].subdir == "win-64"
    assert "__cuda=12" in lock.platforms["p2"].virtual_packages
    assert lock.platform_names("default", "linux-64") == ["linux-64", "p2"]


def _independent_torch_rows(lock_path: Path) -> dict[str, tuple[str, str, str | None, str | None]]:
    """A second, deliberately naive reading of a lock: full YAML, torch found by package file name only.

    It shares no code with scrollcase's reader or classifier, so the pinned table above is checked against
    something other than the code under test.  Returns env/platform -> (provider, version, build, cuda runtime).
    """
    import re
    import urllib.parse

    import yaml

    data = yaml.load(lock_path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    rows: dict[str, list[tuple[str, str]]] = {}
    if data["version"] == 3:
        for package in data["package"]:
            rows.setdefault(f"default/{package['platform']}", []).append(
                ("conda" if package["manager"] == "conda" else "pypi", package["url"])
            )
    else:
        for env, body in data["environments"].items():
            for platform, packages in (body.get("packages") or {}).items():
                rows[f"{env}/{platform}"] = [next(iter(p.items())) for p in packages]
    out: dict[str, tuple[str, str, str | None, str | None]] = {}
    for key, refs in rows.items():
        runtime = None
        for kind, url in refs:
            name = urllib.parse.unquote(url.rsplit("/", 1)[-1])
            if kind == "conda" and (m := re.match(r"^pytorch-(\d[^-]*)-([^-]+)\.(conda|tar\.bz2)$", name)):
                out[key] = ("conda", m.group(1), m.group(2), None)
            elif kind == "pypi" and (m := re.match(r"^torch-([^-]+)-", name)):
                out[key] = ("pypi", m.group(1), None, None)
            elif kind == "pypi" and (m := re.match(r"^nvidia_cuda_runtime_cu1\d-(\d+\.\d+)", name)):
                runtime = m.group(1)
        if key in out:
            out[key] = (*out[key][:3], runtime)
    return out


@pytest.mark.parametrize("workspace", sorted(EXPECTED))
def test_pinned_table_matches_an_independent_reading(workspace: str) -> None:
    _, _, torch_rows = EXPECTED[workspace]
    independent = _independent_torch_rows(ROOT / workspace / "pixi.lock")
    assert set(independent) == set(torch_rows)
    for key, (_subdir, provider, version, build, accelerator) in torch_rows.items():
        i_provider, i_version, i_build, runtime = independent[key]
        assert (provider, version, build) == (i_provider, i_version, i_build), key
        if build is not None:  # conda: the build string names the CUDA version, or says cpu
            legacy = re.search(r"_cuda(\d+)\.(\d+)", build)  # pytorch channel: py3.10_cuda11.7_cudnn8.5.0_0
            compact = re.match(r"cuda(\d+)(\d)_", build)  # conda-forge: cuda126_py310...
            if legacy or compact:
                match = legacy or compact
                assert match is not None
                assert accelerator == f"cuda{match.group(1)}.{match.group(2)}", key
            else:
                assert build.startswith("cpu_") and accelerator == "cpu", key
        elif "+cu" in version:
            tag = version.split("+cu", 1)[1]
            assert accelerator == f"cuda{tag[:-1]}.{tag[-1]}", key
        elif "+cpu" in version:
            assert accelerator == "cpu", key
        else:  # an untagged wheel: CUDA when the nvidia runtime wheel sits beside it, else CPU
            assert accelerator == (f"cuda{runtime}" if runtime else "cpu"), key


def test_v3_records_managed_by_pypi_are_wheels() -> None:
    """pixi's v3 locks say `manager: pypi` for a wheel (ruben-arts__haystack-pixi-example holds 150 of them)."""
    lock_path = ROOT / "ruben-arts__haystack-pixi-example" / "pixi.lock"
    text = lock_path.read_text(encoding="utf-8")
    lock = parse_lock(text, str(lock_path), fast=False)
    packages = [p for env in lock.environments.values() for ps in env.packages.values() for p in ps]
    wheels = [p for p in packages if p.kind == "pypi"]
    assert len(wheels) == text.count("\n  manager: pypi\n") == 150
    assert all(p.location.startswith("https://files.pythonhosted.org/") for p in wheels)
    assert "farm-haystack" in {p.name for p in wheels}
