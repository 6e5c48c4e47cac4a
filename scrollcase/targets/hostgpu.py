"""The host's NVIDIA GPUs as nvidia-smi lists them: driver, compute capability, name.

Probing is injected (``run`` and ``which``, as host/facts.py's ``HostProbes`` carries them), so the parsing and
the fallbacks are tested without a GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scrollcase.io import proc


class CommandProbes(Protocol):
    """What gathering GPU facts needs from the host: run a command, find a binary."""

    @property
    def run(self) -> Callable[[Sequence[str]], proc.RunResult]: ...

    @property
    def which(self) -> Callable[[str], str | None]: ...


NVIDIA_SMI_QUERY = ("nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader")
# Drivers before 510 do not know compute_cap (nvidia-smi refuses the whole query): ask for the driver alone.
NVIDIA_SMI_DRIVER_QUERY = ("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
_UNKNOWN = ("", "[n/a]", "n/a", "[not supported]")


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi lists it; ``compute_cap`` ("8.6") is None when the driver cannot say."""

    index: int
    driver_version: str
    compute_cap: str | None = None
    name: str = ""

    def label(self) -> str:
        cap = f"compute capability {self.compute_cap}" if self.compute_cap else "compute capability unknown"
        return f"GPU {self.index} ({self.name or 'NVIDIA GPU'}, {cap})"

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "computeCapability": self.compute_cap,
            "driverVersion": self.driver_version,
        }


@dataclass(frozen=True)
class GpuFacts:
    """The host's NVIDIA GPUs; ``error`` says why there are none (no nvidia-smi, it failed, no GPU)."""

    gpus: tuple[Gpu, ...] = ()
    error: str | None = None


def parse_gpus(stdout: str) -> tuple[Gpu, ...]:
    """nvidia-smi's CSV lines (``550.54.14, 8.6, NVIDIA GeForce RTX 3090`` or just ``550.54.14``) as GPUs."""
    gpus: list[Gpu] = []
    for line in (raw.strip() for raw in stdout.splitlines()):
        if not line:
            continue
        driver, _, rest = (part.strip() for part in line.partition(","))
        cap, _, name = (part.strip() for part in rest.partition(","))
        known = cap if cap.lower() not in _UNKNOWN else None
        gpus.append(Gpu(len(gpus), driver, known, name if name.lower() not in _UNKNOWN else ""))
    return tuple(gpus)


def _smi_failure(result: proc.RunResult) -> str:
    detail = (result.stderr or result.stdout).strip().splitlines()
    return f"nvidia-smi failed: {detail[0] if detail else f'exit {result.returncode}'}"


def gather_gpus(probes: CommandProbes) -> GpuFacts:
    """Ask nvidia-smi for every GPU's driver, compute capability and name (the driver alone as a fallback)."""
    smi = probes.which("nvidia-smi")
    if smi is None:
        return GpuFacts(error="nvidia-smi is not on PATH (no NVIDIA driver installed?)")
    first = probes.run([smi, *NVIDIA_SMI_QUERY[1:]])
    result = first if first.ok else probes.run([smi, *NVIDIA_SMI_DRIVER_QUERY[1:]])
    if not result.ok:
        return GpuFacts(error=_smi_failure(first))  # the full query's own complaint
    gpus = parse_gpus(result.stdout)
    return GpuFacts(gpus) if gpus else GpuFacts(error="nvidia-smi listed no GPU")


def dotted_key(version: str) -> tuple[int, ...]:
    """``"550.54.14"`` -> (550, 54, 14); non-numeric parts count as 0 so odd strings still compare."""
    return tuple(int(part) if part.isdigit() else 0 for part in re.split(r"[.\-]", version.strip()))
