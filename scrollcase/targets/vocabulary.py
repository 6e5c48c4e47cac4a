"""The target registry: which (platform, arch, accelerator) boxes exist and what they imply.

A target decides the conda subdir a recipe is solved for, the virtual packages the solver may
assume, the target ID that names the box, and whether this machine can build it natively.
"""

from __future__ import annotations

import platform as _platform
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from scrollcase.targets import registry
from scrollcase.targets.base import Accelerator as AcceleratorKind

# The vocabulary, defined once: the recipe's Target model types its fields with these.
Platform = Literal["linux", "windows", "osx"]
Arch = Literal["x86_64", "aarch64", "arm64"]

PLATFORMS: tuple[str, ...] = get_args(Platform)
ARCHES: tuple[str, ...] = get_args(Arch)


def accelerator_names() -> tuple[str, ...]:
    """The accelerators of the registry (targets/registry.py), in its order."""
    return tuple(registry.ACCELERATORS)


def _known_accelerator(value: str) -> str:
    if not registry.known(value):
        names = [repr(n) for n in accelerator_names()]
        expected = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        # The same error a Literal of the names gives, so messages read alike for every field.
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
    return value


# A recipe's target.accelerator: any registered accelerator (the schema lists the built-in ones).
Accelerator = Annotated[
    str,
    AfterValidator(_known_accelerator),
    WithJsonSchema({"enum": list(registry.ACCELERATORS), "type": "string"}),
]

SUBDIRS: dict[tuple[str, str], str] = {
    ("linux", "x86_64"): "linux-64",
    ("linux", "aarch64"): "linux-aarch64",
    ("windows", "x86_64"): "win-64",
    ("osx", "arm64"): "osx-arm64",
    ("osx", "x86_64"): "osx-64",
}


class _Supported(Mapping[tuple[str, str], tuple[str, ...]]):
    """(platform, arch) -> the accelerators a box may target there, read from the registry when asked."""

    def __getitem__(self, key: tuple[str, str]) -> tuple[str, ...]:
        if key not in SUBDIRS:
            raise KeyError(key)
        return tuple(a.name for a in registry.ACCELERATORS.values() if key in a.platforms)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(SUBDIRS)

    def __len__(self) -> int:
        return len(SUBDIRS)


SUPPORTED: Mapping[tuple[str, str], tuple[str, ...]] = _Supported()

# glibc the solver may assume for Linux targets: the manylinux_2_28 baseline most CUDA stacks need.
DEFAULT_GLIBC = "2.28"
DEFAULT_MACOS = {"arm64": "11.0", "x86_64": "10.15"}


@dataclass(frozen=True)
class TargetSpec:
    """A target as the rest of the package uses it; a validated one comes from the recipe's ``Target.spec``."""

    platform: str
    arch: str
    accelerator: str
    cuda_version: str | None = None

    @property
    def subdir(self) -> str:
        return SUBDIRS[(self.platform, self.arch)]

    @property
    def target_id(self) -> str:
        return target_id(self.platform, self.arch, self.accelerator, self.cuda_version)

    @property
    def kind(self) -> AcceleratorKind:
        """The accelerator's module (targets/cpu.py, cuda.py, metal.py, ...): ask it, not its name."""
        return registry.accelerator(self.accelerator)

    @property
    def is_cuda(self) -> bool:
        return self.accelerator == "cuda"

    @property
    def is_windows(self) -> bool:
        return self.platform == "windows"

    def virtual_packages(self, glibc: str = DEFAULT_GLIBC) -> dict[str, str]:
        """Virtual packages (name -> version, ``"0"`` when unversioned) the solver may assume."""
        packages: dict[str, str] = {}
        if self.platform == "linux":
            packages.update({"__unix": "0", "__linux": "5.10", "__glibc": glibc})
        elif self.platform == "osx":
            packages.update({"__unix": "0", "__osx": DEFAULT_MACOS[self.arch]})
        else:
            packages["__win"] = "0"
        packages.update(self.kind.virtual_packages(self.cuda_version))
        return packages


def target_id(platform: str, arch: str, accelerator: str, cuda_version: str | None = None) -> str:
    known = registry.known(accelerator)
    suffix = registry.ACCELERATORS[accelerator].target_suffix(cuda_version) if known else accelerator
    return f"{platform}-{arch}-{suffix}"


_SYS_PLATFORMS = {"linux": "linux", "win32": "windows", "cygwin": "windows", "darwin": "osx"}
_MACHINES = {"amd64": "x86_64", "x64": "x86_64", "x86_64": "x86_64", "arm64": "arm64", "aarch64": "aarch64"}


def host_platform(sys_platform: str | None = None, machine: str | None = None) -> tuple[str, str]:
    """(platform, arch) of this machine (or of the given ``sys.platform``/``machine()``) in our vocabulary."""
    raw_platform = sys.platform if sys_platform is None else sys_platform
    raw_machine = (_platform.machine() if machine is None else machine).lower()
    plat = _SYS_PLATFORMS.get(raw_platform, raw_platform)
    arch = _MACHINES.get(raw_machine, raw_machine)
    # Apple calls it arm64 and Linux calls it aarch64; the registry follows each OS's name.
    if plat == "osx" and arch == "aarch64":
        arch = "arm64"
    if plat in ("linux", "windows") and arch == "arm64":
        arch = "aarch64"
    return plat, arch
