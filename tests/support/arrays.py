"""Output sets held in memory, for the comparison tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrollcase.parity.compare import ArrayInfo


@dataclass(frozen=True)
class MemoryOutputs:
    """Arrays already in memory, as an :class:`~scrollcase.parity.compare.OutputSet`."""

    arrays: Mapping[str, NDArray[np.generic]]
    label: str = "<memory>"

    def infos(self) -> Mapping[str, ArrayInfo]:
        return {name: ArrayInfo(tuple(a.shape), a.dtype) for name, a in self.arrays.items()}

    def chunks(self, name: str, size: int) -> Iterator[NDArray[np.generic]]:
        flat = np.ascontiguousarray(self.arrays[name]).reshape(-1)
        for start in range(0, flat.size, size):
            yield flat[start : start + size]
