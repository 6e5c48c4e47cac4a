from __future__ import annotations

import dataclasses

import pytest

from scrollcase.lock.read import LockedPackage
from scrollcase.targets.classify import (
    TorchBuild,
    accelerator_of_conda_build,
    accelerator_of_wheel,
    classify_torch,
    cuda_library_wheels,
    cuda_runtime_wheels,
    pypi_torch_releases,
    pytorch_index,
)

CF = "https://conda.anaconda.org/conda-forge/linux-64/"
PYPI = "https://files.pythonhosted.org/packages/aa/bb/"


def conda(name: str, version: str, build: str) -> LockedPackage:
    return LockedPackage("conda", f"{CF}{name}-{version}-{build}.conda", name, version, build)


def wheel(name: str, version: str, filename: str | None = None) -> LockedPackage:
    filename = filename or f"{name.replace('-', '_')}-{version}-py3-none-manylinux_2_28_x86_64.whl"
    return LockedPackage("pypi", PYPI + filename, name, version)


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        ("cuda126_mkl_py312_h1234567_300", "cuda12.6"),
        ("cuda120_py312h26b3cf7_301", "cuda12.0"),
        ("cuda129_generic_py312_h08ae647_203", "cuda12.9"),
        ("cuda130_mkl_py313_habc_300", "cuda13.0"),
        ("cuda112py39h1234567_200", "cuda11.2"),  # older conda-forge: no underscore after the digits
        ("cpu_mkl_py311_h338015a_100", "cpu"),
        ("cpu_generic_py313_h1ee2325_2", "cpu"),
        ("py3.10_cuda11.7_cudnn8.5.0_0", "cuda11.7"),  # legacy pytorch channel
        ("py3.8_cuda10.1.243_cudnn7.6.3_0", "cuda10.1"),
        ("py3.12_cuda12.4_cudnn9.1.0_0", "cuda12.4"),
        ("py3.10_cpu_0", "cpu"),
        ("py310h1234567_0", None),
    ],
)
def test_conda_build_strings(build: str, expected: str | None) -> None:
    assert accelerator_of_conda_build(build) == expected


@pytest.mark.parametrize(
    ("version", "filename", "expected"),
    [
        ("2.5.1+cu124", "", "cuda12.4"),
        ("2.10.0+cu128", "", "cuda12.8"),
        ("2.1.0+cu118", "", "cuda11.8"),
        ("2.13.0+cu130", "", "cuda13.0"),
        ("2.5.1+cpu", "", "cpu"),
        ("2.5.1", "torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl", "cuda12.1"),  # tag only in the URL
        ("2.5.1", "torch-2.5.1%2bcpu-cp311-cp311-win_amd64.whl", "cpu"),
        ("2.5.1+rocm6.2", "", "rocm6.2"),
        ("2.5.1", "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl", None),
    ],
)
def test_wheel_tags(version: str, filename: str, expected: str | None) -> None:
    assert accelerator_of_wheel(version, filename) == expected


def test_metapackage_is_not_the_build() -> None:
    """pytorch-gpu asks for a GPU build; the pytorch record beside it is what is installed."""
    packages = [
        conda("pytorch-gpu", "2.7.1", "cuda129_mkl_h43a4b0b_304"),
        conda("pytorch", "2.7.1", "cpu_mkl_py313_h58dab0e_103"),
    ]
    torch = classify_torch(packages)
    assert (torch.provider, torch.build, torch.accelerator) == ("conda", "cpu_mkl_py313_h58dab0e_103", "cpu")


def test_look_alike_names_are_not_torch_or_cuda() -> None:
    packages = [
        conda("libopenvino-pytorch-frontend", "2024.4.0", "h5888daf_0"),
        conda("pytorch-3dunet", "1.9.2", "pyhd8ed1ab_1"),
        conda("libtorch", "2.5.1", "cuda126_hebb32c0_306"),
        wheel("nvidia-ml-py", "12.560.30"),
        wheel("torchvision", "0.20.1"),
    ]
    torch = classify_torch(packages)
    assert torch.provider is None and torch.accelerator is None
    assert torch.to_json() == {"provider": None, "version": None, "build": None, "accelerator": None}


def test_untagged_wheel_is_cuda_only_with_the_runtime_wheel_beside_it() -> None:
    untagged = wheel("torch", "2.4.0", "torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl")
    with_runtime = classify_torch(
        [untagged, wheel("nvidia-cuda-runtime-cu12", "12.1.105"), wheel("nvidia-ml-py", "12.560.30")]
    )
    assert with_runtime.accelerator == "cuda12.1"
    assert "nvidia-cuda-runtime-cu12" in with_runtime.evidence
    alone = classify_torch([untagged, wheel("nvidia-ml-py", "12.560.30"), wheel("nvidia-cuda-nvrtc-cu12", "12.1.105")])
    assert alone.accelerator == "cpu"


def test_tagged_wheel_wins_over_runtime_version() -> None:
    torch = classify_torch([wheel("torch", "2.10.0+cu128"), wheel("nvidia-cuda-runtime-cu12", "12.8.90")])
    assert (torch.provider, torch.version, torch.build, torch.accelerator) == ("pypi", "2.10.0+cu128", None, "cuda12.8")


@pytest.mark.parametrize("order", ["conda first", "pypi first"])
def test_conda_pytorch_wins_over_a_pypi_torch(order: str) -> None:
    """docs/locks.md: "a conda pytorch wins over a PyPI torch" -- whatever the order in the lock."""
    packages = [conda("pytorch", "2.5.1", "cuda124_py311_h1_300"), wheel("torch", "2.5.1+cpu")]
    torch = classify_torch(packages if order == "conda first" else packages[::-1])
    assert (torch.provider, torch.version, torch.accelerator) == ("conda", "2.5.1", "cuda12.4")


def test_untagged_conda_build_is_judged_by_its_companions() -> None:
    base = conda("pytorch", "1.0.0", "py3.7_0")
    assert classify_torch([base, conda("pytorch-cuda", "11.8", "h7e8668a_5")]).accelerator == "cuda11.8"
    assert classify_torch([base, conda("pytorch-mutex", "1.0", "cpu")]).accelerator == "cpu"
    assert classify_torch([base]).accelerator == "cpu"


def test_unsuffixed_cuda13_runtime_wheel_names_the_cuda_of_an_untagged_wheel() -> None:
    """Since torch 2.11 PyPI's torch pulls the unsuffixed nvidia-cuda-runtime (through cuda-toolkit)."""
    torch = classify_torch(
        [wheel("torch", "2.15.0"), wheel("cuda-toolkit", "13.2.1"), wheel("nvidia-cuda-runtime", "13.2.86")]
    )
    assert torch.accelerator == "cuda13.2"
    assert torch.evidence == "untagged wheel beside nvidia-cuda-runtime 13.2.86"


def test_every_cuda_runtime_wheel_is_found_in_lock_order() -> None:
    packages = [
        wheel("nvidia-cuda-runtime-cu12", "12.4.127"),
        wheel("nvidia-cuda-runtime", "13.0.96"),
        wheel("nvidia-cuda-runtime-cu12-extra", "1.0"),
        conda("cuda-cudart", "12.4.127", "h0_0"),
    ]
    assert [(p.name, p.version) for p in cuda_runtime_wheels(packages)] == [
        ("nvidia-cuda-runtime-cu12", "12.4.127"),
        ("nvidia-cuda-runtime", "13.0.96"),
    ]


@pytest.mark.parametrize(
    ("name", "is_cuda"),
    [
        ("nvidia-cuda-runtime-cu12", True),
        ("nvidia-cuda-runtime", True),  # CUDA 13 names are unsuffixed
        ("nvidia-cuda-nvrtc", True),
        ("nvidia-cublas-cu12", True),
        ("nvidia-cublas", True),
        ("nvidia-cudnn-cu13", True),
        ("nvidia-nccl-cu12", True),
        ("nvidia-nvjitlink", True),
        ("nvidia-cusparselt-cu12", True),
        ("nvidia-ml-py", False),  # NVML bindings: no CUDA
        ("nvidia-pyindex", False),
        ("nvidia-modelopt", False),
        ("cuda-toolkit", False),  # a metapackage: the wheels it pulls are what get flagged
        ("cupy-cuda12x", False),
    ],
)
def test_cuda_library_wheels_are_named_exactly(name: str, is_cuda: bool) -> None:
    assert bool(cuda_library_wheels([wheel(name, "1.0")])) is is_cuda
    assert cuda_library_wheels([conda(name, "1.0", "h0_0")]) == []  # conda packages are never wheels


def test_pypi_torch_releases_and_pytorch_indexes() -> None:
    assert pypi_torch_releases("12.4") == ("2.5", "2.6")
    assert pypi_torch_releases("12.6") == ("2.7",)
    assert pypi_torch_releases("12.8") == ("2.8", "2.9", "2.10")
    assert pypi_torch_releases("13.0") == ("2.11", "2.12", "2.13", "2.14")
    assert pypi_torch_releases("13.2") == ("2.15",)
    assert pypi_torch_releases("11.8") == ()
    assert pytorch_index("12.4") == "https://download.pytorch.org/whl/cu124"
    assert pytorch_index("13.0") == "https://download.pytorch.org/whl/cu130"
    assert pytorch_index(None) == "https://download.pytorch.org/whl/cpu"


def test_a_pypi_package_named_pytorch_is_not_the_conda_pytorch() -> None:
    """Names are matched with their kind: PyPI's ``pytorch`` (a stub that refuses to install) beside the
    real PyPI torch is not a conda pytorch, and a conda ``torch`` is not a PyPI torch wheel."""
    stub = wheel("pytorch", "1.0.2", "pytorch-1.0.2.tar.gz")
    torch = wheel("torch", "2.5.1+cu124", "torch-2.5.1%2Bcu124-cp312-cp312-linux_x86_64.whl")
    found = classify_torch([stub, torch])
    assert (found.provider, found.accelerator) == ("pypi", "cuda12.4")
    assert classify_torch([conda("torch", "2.5.1", "cuda126_mkl_py312_h1234567_300")]).provider is None


def test_the_first_cuda_runtime_wheel_in_lock_order_names_the_cuda_of_an_untagged_wheel() -> None:
    torch = wheel("torch", "2.5.1")
    first, second = wheel("nvidia-cuda-runtime-cu12", "12.4.127"), wheel("nvidia-cuda-runtime-cu11", "11.8.89")
    assert classify_torch([torch, first, second]).accelerator == "cuda12.4"
    assert classify_torch([second, torch, first]).accelerator == "cuda11.8"


def test_only_pypi_packages_are_cuda_wheels() -> None:
    """A conda package that happens to carry a wheel's name is not a wheel."""
    runtime = conda("nvidia-cuda-runtime-cu12", "12.4.127", "h0_0")
    library = conda("nvidia-cublas-cu12", "12.4.5.8", "h0_0")
    assert cuda_runtime_wheels([runtime, library]) == []
    assert cuda_library_wheels([runtime, library]) == []


@pytest.mark.parametrize(
    ("accelerator", "cuda"),
    [("cuda12.4", "12.4"), ("cuda13.0", "13.0"), ("cpu", None), ("rocm6.1", None), (None, None)],
)
def test_only_a_cuda_build_has_a_cuda_version(accelerator: str | None, cuda: str | None) -> None:
    assert TorchBuild(accelerator=accelerator).cuda_version == cuda


def test_a_torch_build_is_a_value_that_cannot_change() -> None:
    found = classify_torch([wheel("torch", "2.5.1+cpu")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.accelerator = "cuda12.4"  # type: ignore[misc]
