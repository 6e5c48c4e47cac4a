"""Property tests of torch classification (issue #19): generated conda build strings and wheel versions
in every naming scheme docs/locks.md lists, and generated package lists around them."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scrollcase.lock.read import LockedPackage
from scrollcase.targets.classify import accelerator_of_conda_build, accelerator_of_wheel, classify_torch

CF = "https://conda.anaconda.org/conda-forge/linux-64/"
PYPI = "https://files.pythonhosted.org/packages/aa/bb/"

CUDA = st.tuples(st.integers(10, 13), st.integers(0, 9))  # (major, minor)
HASH = st.text(alphabet="0123456789abcdef", min_size=7, max_size=7)
BUILD_NUMBER = st.integers(0, 999).map(str)
BLAS = st.sampled_from(["mkl", "generic", "openblas"])
PYTHON = st.sampled_from(["39", "310", "311", "312", "313"])
# names that sit beside torch in real locks and must not change the verdict
BYSTANDERS = st.lists(
    st.sampled_from(
        [
            ("conda", "libopenvino-pytorch-frontend", "2024.4.0", "h5888daf_2"),
            ("conda", "pytorch-3dunet", "1.8.0", "pyhd8ed1ab_0"),
            ("pypi", "nvidia-ml-py", "12.560.30", None),
            ("pypi", "numpy", "2.1.3", None),
            ("conda", "python", "3.12.7", "hc5c86c4_0_cpython"),
        ]
    ),
    max_size=4,
    unique=True,
)


@st.composite
def conda_cuda_builds(draw: st.DrawFn) -> tuple[str, str]:
    """(build string, "cudaX.Y") in the conda-forge, old conda-forge and legacy pytorch-channel forms."""
    major, minor = draw(CUDA)
    py, blas, h, n = draw(PYTHON), draw(BLAS), draw(HASH), draw(BUILD_NUMBER)
    build = draw(
        st.sampled_from(
            [
                f"cuda{major}{minor}_{blas}_py{py}_h{h}_{n}",
                f"cuda{major}{minor}_py{py}h{h}_{n}",
                f"cuda{major}{minor}py{py}h{h}_{n}",
                f"py{py[0]}.{py[1:]}_cuda{major}.{minor}_cudnn8.{minor}.0_{n}",
            ]
        )
    )
    return build, f"cuda{major}.{minor}"


@st.composite
def conda_cpu_builds(draw: st.DrawFn) -> str:
    py, blas, h, n = draw(PYTHON), draw(BLAS), draw(HASH), draw(BUILD_NUMBER)
    return draw(st.sampled_from([f"cpu_{blas}_py{py}_h{h}_{n}", f"py{py[0]}.{py[1:]}_cpu_{n}"]))


@st.composite
def tagged_wheels(draw: st.DrawFn) -> tuple[str, str, str]:
    """(version, filename, accelerator) with the tag in the version, in the filename (maybe %2B-quoted) or both."""
    release = f"2.{draw(st.integers(0, 15))}.{draw(st.integers(0, 3))}"
    major, minor = draw(CUDA)
    tag, accelerator = draw(
        st.sampled_from(
            [
                (f"cu{major}{minor}", f"cuda{major}.{minor}"),
                ("cpu", "cpu"),
                (f"rocm{major % 7}.{minor}", f"rocm{major % 7}.{minor}"),
            ]
        )
    )
    plus = draw(st.sampled_from(["+", "%2B", "%2b"]))
    filename = f"torch-{release}{plus}{tag}-cp312-cp312-linux_x86_64.whl"
    version = draw(st.sampled_from([f"{release}+{tag}", release]))
    return version, filename, accelerator


def _bystanders(draw_list: list[tuple[str, str, str, str | None]]) -> list[LockedPackage]:
    return [
        LockedPackage("conda", f"{CF}{n}-{v}-{b}.conda", n, v, b)
        if kind == "conda"
        else LockedPackage("pypi", f"{PYPI}{n}-{v}-py3-none-any.whl", n, v)
        for kind, n, v, b in draw_list
    ]


@settings(max_examples=200, deadline=None)
@given(conda_cuda_builds())
def test_a_conda_cuda_build_string_names_its_cuda(case: tuple[str, str]) -> None:
    build, accelerator = case
    assert accelerator_of_conda_build(build) == accelerator


@settings(max_examples=100, deadline=None)
@given(conda_cpu_builds())
def test_a_conda_cpu_build_string_is_cpu(build: str) -> None:
    assert accelerator_of_conda_build(build) == "cpu"


@settings(max_examples=200, deadline=None)
@given(tagged_wheels())
def test_a_wheel_local_tag_names_its_accelerator(case: tuple[str, str, str]) -> None:
    version, filename, accelerator = case
    assert accelerator_of_wheel(version, filename) == accelerator


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 15), st.integers(0, 9), st.sampled_from(["cp311", "cp312", "cp313"]))
def test_an_untagged_wheel_has_no_accelerator_of_its_own(minor: int, patch: int, python: str) -> None:
    release = f"2.{minor}.{patch}"
    assert accelerator_of_wheel(release, f"torch-{release}-{python}-{python}-manylinux_2_28_x86_64.whl") is None


@settings(max_examples=150, deadline=None)
@given(conda_cuda_builds(), tagged_wheels(), BYSTANDERS, st.randoms(use_true_random=False))
def test_a_conda_pytorch_wins_over_a_pypi_torch_in_any_lock_order(
    conda: tuple[str, str],
    wheel: tuple[str, str, str],
    bystanders: list[tuple[str, str, str, str | None]],
    rng: random.Random,
) -> None:
    """docs/locks.md: "a conda pytorch wins over a PyPI torch", whatever the order and the neighbours."""
    build, accelerator = conda
    version, filename, _ = wheel
    packages = [
        LockedPackage("conda", f"{CF}pytorch-2.5.1-{build}.conda", "pytorch", "2.5.1", build),
        LockedPackage("pypi", PYPI + filename, "torch", version),
        *_bystanders(bystanders),
    ]
    rng.shuffle(packages)
    found = classify_torch(packages)
    assert (found.provider, found.build, found.accelerator) == ("conda", build, accelerator)


@settings(max_examples=150, deadline=None)
@given(tagged_wheels(), BYSTANDERS, st.randoms(use_true_random=False))
def test_a_pypi_torch_alone_is_classified_by_its_tag(
    wheel: tuple[str, str, str], bystanders: list[tuple[str, str, str, str | None]], rng: random.Random
) -> None:
    version, filename, accelerator = wheel
    packages = [LockedPackage("pypi", PYPI + filename, "torch", version), *_bystanders(bystanders)]
    rng.shuffle(packages)
    found = classify_torch(packages)
    assert (found.provider, found.version, found.accelerator) == ("pypi", version, accelerator)
