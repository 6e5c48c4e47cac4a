"""The accelerators scrollcase knows, in one place: adding one is a module in targets/ and a line here.

The order is the vocabulary's order (error messages and ``SUPPORTED`` list them so).  Everything
derived from the registry reads it when asked, so a test may register an accelerator for its duration.
"""

from __future__ import annotations

from scrollcase.targets.base import Accelerator
from scrollcase.targets.cpu import CPU
from scrollcase.targets.cuda import CUDA
from scrollcase.targets.metal import METAL

ACCELERATORS: dict[str, Accelerator] = {
    CPU.name: CPU,
    CUDA.name: CUDA,
    METAL.name: METAL,
}


def accelerator(name: str) -> Accelerator:
    """The accelerator called ``name``; an unknown name (a document not validated) counts as cpu,
    which asks nothing of the host and forbids CUDA."""
    return ACCELERATORS.get(name, CPU)


def known(name: str) -> bool:
    return name in ACCELERATORS


def version_fields() -> dict[str, str]:
    """Each accelerator runtime-version field of a recipe's target -> the accelerator it belongs to."""
    return {a.version_field: a.name for a in ACCELERATORS.values() if a.version_field}


def device_aliases() -> dict[str, str]:
    """Every device name a parity script may be given (``gpu``, ``mps``) -> its accelerator."""
    out = {name: name for name in ACCELERATORS}
    for acc in ACCELERATORS.values():
        out.update(dict.fromkeys(acc.aliases, acc.name))
    return out


def ranks() -> dict[str, int]:
    """Install preference among releases that fit a machine: higher first."""
    return {name: acc.rank for name, acc in ACCELERATORS.items()}


def default_runners() -> dict[str, list[str]]:
    """The runs-on labels for a target ID glob, the best-ranked accelerator's first."""
    out: dict[str, list[str]] = {}
    for acc in sorted(ACCELERATORS.values(), key=lambda a: -a.rank):
        out.update({pattern: list(labels) for pattern, labels in acc.runners.items()})
    return out
