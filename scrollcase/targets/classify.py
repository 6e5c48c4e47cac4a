"""Which torch a locked environment holds and which accelerator that build targets.  Pure.

Evidence, strongest first:

* conda ``pytorch`` build strings: conda-forge ``cuda126_mkl_py312_h..`` / ``cpu_mkl_..`` (older
  conda-forge wrote ``cuda112py39h..``), the legacy pytorch channel ``py3.10_cuda11.7_cudnn8.5.0_0``
  / ``py3.10_cpu_0``.  Metapackages (``pytorch-gpu``, ``pytorch-cpu``, ``pytorch-cuda``,
  ``pytorch-mutex``) only *ask* for a variant; the ``pytorch`` record is what gets installed.
* PyPI ``torch`` wheels with a local version tag (``2.5.1+cu124``, ``+cpu``; in URLs ``%2Bcu124``).
* untagged PyPI wheels (PyPI's default Linux builds) are CUDA builds only when the CUDA runtime
  wheel they need is locked beside them (``nvidia-cuda-runtime-cuNN`` up to CUDA 12, the unsuffixed
  ``nvidia-cuda-runtime`` since CUDA 13 / torch 2.11); its version is the CUDA version.

Names are matched exactly (``pytorch``, ``torch``, ``nvidia-cuda-runtime[-cuNN]``) so packages such as
``libopenvino-pytorch-frontend``, ``pytorch-3dunet`` or ``nvidia-ml-py`` are never taken for torch
or CUDA.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Provider = Literal["conda", "pypi"]


class PackageRecord(Protocol):
    """What classification reads of a locked package (lock/model.py's ``LockedPackage`` is one)."""

    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def build(self) -> str | None: ...
    @property
    def filename(self) -> str: ...
    @property
    def line(self) -> int | None: ...
    @property
    def entry_line(self) -> int | None: ...


CONDA_TORCH = "pytorch"
PYPI_TORCH = "torch"
CUDA_VERSION_PACKAGE = "cuda-version"
# pixi.toml's name for the CUDA the host must have (``[system-requirements] cuda`` or a platforms entry's).
SYSTEM_REQUIREMENT = "cuda"
# The CUDA runtime wheels a PyPI resolution may hold: CUDA 11/12 name the major, CUDA 13 does not.
CUDA_RUNTIME_WHEELS = (
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu11",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu13",
)
_CUDA_RUNTIME_WHEEL = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")
# NVIDIA's CUDA library wheels: every ``nvidia-*-cuNN`` (CUDA 11/12 naming, and cudnn/nccl/... for 13)
# and the unsuffixed CUDA 13 names.  Not nvidia-ml-py (NVML bindings), nvidia-pyindex or nvidia-modelopt.
_CUDA_LIBRARY_WHEEL = re.compile(
    r"^nvidia-(?:[a-z0-9-]+-cu\d+|cuda-[a-z0-9-]+|cublas|cublasmp|cudnn|cudss|cufft|cufile|curand|cusolver"
    r"|cusolvermp|cusparse|cusparselt|cutensor|nccl|npp|nvfatbin|nvjitlink|nvjpeg|nvjpeg2k|nvshmem|nvtx|nvvm)$"
)
# The CUDA of the Linux torch wheels on PyPI's default index (their CUDA runtime wheel), per release.
# PyPI's Windows and macOS torch wheels are CPU builds; PyTorch's own indexes carry ``+cuNNN`` builds.
PYPI_TORCH_CUDA: dict[str, str] = {
    "2.5": "12.4",
    "2.6": "12.4",
    "2.7": "12.6",
    "2.8": "12.8",
    "2.9": "12.8",
    "2.10": "12.8",
    "2.11": "13.0",
    "2.12": "13.0",
    "2.13": "13.0",
    "2.14": "13.0",
    "2.15": "13.2",
}
PYTORCH_INDEX = "https://download.pytorch.org/whl/"
_CONDA_CUDA_TAG = re.compile(r"(?:^|_)cuda(\d+)\.(\d+)|(?:^|_)cuda(\d{2,3})(?=_|py|h|$)")
_CONDA_CPU_TAG = re.compile(r"(?:^|_)cpu(?:_|$)")
_WHEEL_LOCAL = re.compile(r"\+(cu(\d+)|cpu|rocm[\d.]+)", re.IGNORECASE)


@dataclass(frozen=True)
class TorchBuild:
    """The torch of one (environment, platform) and the accelerator its build targets."""

    provider: Provider | None = None
    version: str | None = None
    build: str | None = None
    accelerator: str | None = None  # "cudaX.Y", "cpu", "rocmX.Y" or None (no torch / unknown)
    evidence: str = "no torch package"
    package: PackageRecord | None = None

    def to_json(self) -> dict[str, str | None]:
        return {
            "provider": self.provider,
            "version": self.version,
            "build": self.build,
            "accelerator": self.accelerator,
        }

    @property
    def cuda_version(self) -> str | None:
        return self.accelerator[4:] if self.accelerator and self.accelerator.startswith("cuda") else None


def _digits_to_cuda(digits: str) -> str:
    """conda-forge/PyPI tags drop the dot: ``126`` -> ``12.6``, ``118`` -> ``11.8``, ``130`` -> ``13.0``."""
    return f"{int(digits[:-1])}.{digits[-1]}"


def accelerator_of_conda_build(build: str) -> str | None:
    """``cudaX.Y``/``cpu`` from a conda pytorch build string, None when the string does not say."""
    match = _CONDA_CUDA_TAG.search(build)
    if match:
        if match.group(1):
            return f"cuda{int(match.group(1))}.{int(match.group(2))}"
        return f"cuda{_digits_to_cuda(match.group(3))}"
    if _CONDA_CPU_TAG.search(build) or build.startswith("cpu"):
        return "cpu"
    return None


def accelerator_of_wheel(version: str, filename: str = "") -> str | None:
    """``cudaX.Y``/``cpu``/``rocmX.Y`` from a wheel's local version tag, None when untagged."""
    for text in (version, filename):
        match = _WHEEL_LOCAL.search(text.replace("%2B", "+").replace("%2b", "+"))
        if match:
            tag = match.group(1).lower()
            if match.group(2):
                return f"cuda{_digits_to_cuda(match.group(2))}"
            return tag
    return None


def major_minor(version: str) -> str:
    parts = re.split(r"[.+]", version)
    return ".".join(parts[:2]) if len(parts) >= 2 else version


def cuda_tag(cuda: str) -> str:
    """``12.4`` -> ``cu124``, the tag of PyTorch's index and wheels for that CUDA."""
    return "cu" + cuda.replace(".", "")


def pytorch_index(cuda: str | None) -> str:
    """PyTorch's wheel index for a CUDA version (``.../whl/cu124``), or its CPU index for None."""
    return PYTORCH_INDEX + (cuda_tag(cuda) if cuda else "cpu")


def pypi_torch_releases(cuda: str) -> tuple[str, ...]:
    """The torch releases (``2.5``, ``2.6``) whose Linux wheels on PyPI's default index use ``cuda``."""
    return tuple(release for release, built in PYPI_TORCH_CUDA.items() if built == cuda)


def find(packages: Sequence[PackageRecord], name: str, kind: str | None = None) -> PackageRecord | None:
    for package in packages:
        if package.name == name and (kind is None or package.kind == kind):
            return package
    return None


def cuda_runtime_wheels(packages: Sequence[PackageRecord]) -> list[PackageRecord]:
    """Every CUDA runtime wheel (``nvidia-cuda-runtime-cuNN``, ``nvidia-cuda-runtime``), in lock order."""
    return [p for p in packages if p.kind == "pypi" and _CUDA_RUNTIME_WHEEL.match(p.name)]


def cuda_runtime_wheel(packages: Sequence[PackageRecord]) -> PackageRecord | None:
    runtimes = cuda_runtime_wheels(packages)
    return runtimes[0] if runtimes else None


def cuda_library_wheels(packages: Sequence[PackageRecord]) -> list[PackageRecord]:
    """Every NVIDIA CUDA library wheel (runtime, cuBLAS, cuDNN, NCCL, ...), in lock order."""
    return [p for p in packages if p.kind == "pypi" and _CUDA_LIBRARY_WHEEL.match(p.name)]


def cuda_version_record(packages: Sequence[PackageRecord]) -> PackageRecord | None:
    return find(packages, CUDA_VERSION_PACKAGE, "conda")


def _conda_evidence(packages: Sequence[PackageRecord]) -> str | None:
    """CUDA version implied by an untagged conda build's companions (legacy channels)."""
    for name in ("pytorch-cuda", "cudatoolkit"):
        companion = find(packages, name, "conda")
        if companion is not None:
            return f"cuda{major_minor(companion.version)}"
    mutex = find(packages, "pytorch-mutex", "conda")
    if mutex is not None and mutex.build == "cpu":
        return "cpu"
    return None


def classify_conda(package: PackageRecord, packages: Sequence[PackageRecord]) -> TorchBuild:
    build = package.build or ""
    accelerator = accelerator_of_conda_build(build)
    evidence = f"conda build string {build!r}"
    if accelerator is None:
        accelerator = _conda_evidence(packages) or "cpu"
        evidence = f"untagged conda build {build!r} (judged by its companions: {accelerator})"
    return TorchBuild("conda", package.version, build, accelerator, evidence, package)


def classify_pypi(package: PackageRecord, packages: Sequence[PackageRecord]) -> TorchBuild:
    accelerator = accelerator_of_wheel(package.version, package.filename)
    evidence = f"wheel tag of {package.filename}"
    if accelerator is None:
        runtime = cuda_runtime_wheel(packages)
        if runtime is not None:
            accelerator = f"cuda{major_minor(runtime.version)}"
            evidence = f"untagged wheel beside {runtime.name} {runtime.version}"
        else:
            accelerator = "cpu"
            evidence = "untagged wheel with no nvidia-cuda-runtime wheel beside it"
    return TorchBuild("pypi", package.version, None, accelerator, evidence, package)


def classify_torch(packages: Sequence[PackageRecord]) -> TorchBuild:
    """The torch build of one (environment, platform) package list.

    A conda ``pytorch`` wins over a PyPI ``torch``: pixi lets conda packages satisfy PyPI
    requirements, so a PyPI torch beside a conda one is not what gets imported first.
    """
    conda = find(packages, CONDA_TORCH, "conda")
    if conda is not None:
        return classify_conda(conda, packages)
    wheel = find(packages, PYPI_TORCH, "pypi")
    if wheel is not None:
        return classify_pypi(wheel, packages)
    return TorchBuild()
