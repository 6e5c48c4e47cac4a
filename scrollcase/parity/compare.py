"""Comparing one accelerator's outputs with the reference's: pure arithmetic over array chunks.

The pass rule, per output: every element satisfies ``|cand - ref| <= absolute + relative * |ref|``
AND the cosine similarity of the flattened arrays is at least ``minimumCosine``.  Everything is
accumulated in float64, one chunk at a time, so memory stays bounded whatever the output size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scrollcase.errors import ParityError
from scrollcase.format.release import ParityOutcome
from scrollcase.recipe.model import Tolerances

# Elements per chunk: two float64 work buffers of 2 MiB each stay in cache and keep numpy's
# per-call overhead negligible.
CHUNK_ELEMENTS = 1 << 18
NUMERIC_KINDS = "biuf"  # bool, signed, unsigned, float: values that compare as real numbers


@dataclass(frozen=True)
class ArrayInfo:
    """What an ``.npy`` header says about one saved output."""

    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]
    fortran_order: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class OutputSet(Protocol):
    """Named arrays that can be read chunk by chunk (a saved ``outputs.npz``, a folder of ``.npy``)."""

    @property
    def label(self) -> str: ...

    def infos(self) -> Mapping[str, ArrayInfo]: ...

    def chunks(self, name: str, size: int) -> Iterator[NDArray[np.generic]]:
        """Flat chunks of ``size`` elements (the last may be shorter), in the file's memory order."""
        ...


# Four float64 buffers of one chunk each: reference, candidate, |difference|, scratch.
_Work = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


@dataclass
class _Running:
    """Float64 accumulators over the chunks seen so far."""

    elements: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst_ratio: float = -1.0  # |a-b| / (absolute + relative*|ref|): > 1 means the element fails
    worst_flat: int = 0
    worst_ref: float = 0.0
    worst_cand: float = 0.0
    violations: int = 0
    dot: float = 0.0
    ref_sq: float = 0.0
    cand_sq: float = 0.0
    nonfinite: str | None = None


def _dot(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """Sum of products, single-threaded: BLAS ``np.dot`` spins its worker threads, which on a
    busy 2-core CI machine made it 8x slower than this (measured: 48 vs 6 CPU-seconds per GiB)."""
    return float(np.einsum("i,i->", x, y))


def _first_nonfinite(values: NDArray[np.float64]) -> int | None:
    bad = np.flatnonzero(~np.isfinite(values))
    return int(bad[0]) if bad.size else None


def _check_finite(
    run: _Running, ref: NDArray[np.float64], cand: NDArray[np.float64], ref_sq: float, cand_sq: float
) -> bool:
    """Cheap test via the sums of squares (NaN/Inf propagate); locate the culprit only when needed."""
    if math.isfinite(ref_sq) and math.isfinite(cand_sq):
        return True
    for side, values in (("reference", ref), ("candidate", cand)):
        index = _first_nonfinite(values)
        if index is not None:
            run.nonfinite = f"{side} has {values[index]} at flat index {run.elements + index}"
            run.worst_flat = run.elements + index
            return False
    run.nonfinite = "values too large to compare in float64 (a sum of squares overflowed)"
    return False


def _feed(
    run: _Running, ref_raw: NDArray[np.generic], cand_raw: NDArray[np.generic], tol: Tolerances, work: _Work
) -> bool:
    """Fold one chunk into ``run``; False once a non-finite value stops the comparison."""
    n = ref_raw.size
    ref, cand, diff, scratch = (buffer[:n] for buffer in work)
    np.copyto(ref, ref_raw, casting="unsafe")
    np.copyto(cand, cand_raw, casting="unsafe")
    with np.errstate(over="ignore", invalid="ignore"):  # NaN/Inf/overflow are checked just below
        ref_sq, cand_sq = _dot(ref, ref), _dot(cand, cand)
    if not _check_finite(run, ref, cand, ref_sq, cand_sq):
        return False
    run.dot += _dot(ref, cand)
    run.ref_sq += ref_sq
    run.cand_sq += cand_sq
    np.subtract(cand, ref, out=diff)
    np.abs(diff, out=diff)
    run.max_abs = max(run.max_abs, float(diff.max()))
    np.abs(ref, out=ref)
    _fold_relative(run, diff, ref, scratch)
    np.multiply(ref, tol.relative, out=scratch)
    scratch += tol.absolute
    np.divide(diff, scratch, out=scratch)
    worst = int(scratch.argmax())
    if scratch[worst] > run.worst_ratio:
        run.worst_ratio = float(scratch[worst])
        run.worst_flat = run.elements + worst
        run.worst_ref = float(ref_raw[worst])
        run.worst_cand = float(cand_raw[worst])
    if scratch[worst] > 1.0:
        run.violations += int(np.count_nonzero(scratch > 1.0))
    run.elements += n
    return True


def _fold_relative(
    run: _Running, diff: NDArray[np.float64], abs_ref: NDArray[np.float64], scratch: NDArray[np.float64]
) -> None:
    """max |a-b|/|ref| over elements whose reference is not exactly zero (those have no scale)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a tiny reference: inf, reported as such
        np.divide(diff, abs_ref, out=scratch)  # a masked divide (where=) is ~20x slower
    if np.count_nonzero(abs_ref) != abs_ref.size:
        scratch[abs_ref == 0] = 0.0
    run.max_rel = max(run.max_rel, float(scratch.max()))


def _mismatch(ref: ArrayInfo, cand: ArrayInfo) -> str | None:
    """Why two outputs cannot be compared element by element, or None."""
    for side, info in (("reference", ref), ("candidate", cand)):
        if info.dtype.kind not in NUMERIC_KINDS:
            return (
                f"{side} dtype {info.dtype} is not a real numeric type "
                "(save bool/int/float arrays; split complex values into real and imaginary outputs)"
            )
    if (ref.dtype.kind, ref.dtype.itemsize) != (cand.dtype.kind, cand.dtype.itemsize):
        return f"dtype mismatch: reference {ref.dtype.name}, candidate {cand.dtype.name}"
    if ref.shape != cand.shape:
        return f"shape mismatch: reference {list(ref.shape)}, candidate {list(cand.shape)}"
    if ref.fortran_order != cand.fortran_order:
        return "memory order mismatch: one side was saved Fortran-ordered (save both with np.ascontiguousarray)"
    if ref.size == 0:
        return "output is empty (0 elements): nothing to compare"
    return None


def _index(flat: int, info: ArrayInfo) -> list[int]:
    if not info.shape:
        return []
    return [int(i) for i in np.unravel_index(flat, info.shape, order="F" if info.fortran_order else "C")]


def compare_output(
    name: str, accelerator: str, ref: OutputSet, cand: OutputSet, tol: Tolerances, chunk: int = CHUNK_ELEMENTS
) -> ParityOutcome:
    """Compare one named output of ``cand`` with the same output of ``ref``."""
    ref_info, cand_info = ref.infos()[name], cand.infos()[name]
    problem = _mismatch(ref_info, cand_info)
    if problem:
        return _failed(accelerator, name, problem)
    run = _Running()
    size = min(chunk, ref_info.size)
    work = (np.empty(size), np.empty(size), np.empty(size), np.empty(size))
    try:
        for ref_chunk, cand_chunk in zip(ref.chunks(name, chunk), cand.chunks(name, chunk), strict=True):
            if not _feed(run, ref_chunk, cand_chunk, tol, work):
                break
    except ParityError as exc:
        return _failed(accelerator, name, exc.message)
    return _outcome(name, accelerator, run, ref_info, tol)


def _outcome(name: str, accelerator: str, run: _Running, info: ArrayInfo, tol: Tolerances) -> ParityOutcome:
    if run.nonfinite:
        index = _index(run.worst_flat, info)
        return ParityOutcome(
            accelerator=accelerator,
            output=name,
            passed=False,
            elements=info.size,
            worstIndex=index,
            message=f"non-finite value: {run.nonfinite} (index {index})",
        )
    cosine = _cosine(run)
    worst_index = _index(run.worst_flat, info)
    failures = []
    if run.violations:
        failures.append(
            f"{run.violations} of {run.elements} element(s) exceed |a-b| <= {tol.absolute:g} + "
            f"{tol.relative:g}*|ref|; worst at {worst_index}: reference {run.worst_ref:.9g}, "
            f"candidate {run.worst_cand:.9g}, |a-b| {abs(run.worst_cand - run.worst_ref):.6g}"
        )
    if cosine is None:
        side = "reference" if run.ref_sq == 0 else "candidate"
        failures.append(f"{side} is an all-zero vector: cosine similarity is undefined")
    elif cosine < tol.minimumCosine:
        failures.append(f"cosine similarity {cosine:.10f} < minimumCosine {tol.minimumCosine}")
    message = "; ".join(failures) or (f"max abs {run.max_abs:.3g}, max rel {run.max_rel:.3g}, cosine {cosine:.10f}")
    return ParityOutcome(
        accelerator=accelerator,
        output=name,
        passed=not failures,
        message=message,
        maxAbsoluteError=run.max_abs,
        maxRelativeError=run.max_rel,
        cosine=cosine,
        worstIndex=worst_index,
        referenceValue=run.worst_ref,
        candidateValue=run.worst_cand,
        elements=run.elements,
        violations=run.violations,
    )


def _cosine(run: _Running) -> float | None:
    if run.ref_sq == 0 or run.cand_sq == 0:
        return None
    value = run.dot / (math.sqrt(run.ref_sq) * math.sqrt(run.cand_sq))
    return min(1.0, max(-1.0, value))  # rounding can step just past +-1


def compare_sets(
    ref: OutputSet, cand: OutputSet, accelerator: str, tol: Tolerances, chunk: int = CHUNK_ELEMENTS
) -> list[ParityOutcome]:
    """Every reference output compared; missing and extra outputs each fail on their own."""
    ref_names, cand_names = list(ref.infos()), list(cand.infos())
    if not ref_names:
        return [_failed(accelerator, "<outputs>", f"the reference ({ref.label}) saved no outputs")]
    results = []
    for name in ref_names:
        if name in cand_names:
            results.append(compare_output(name, accelerator, ref, cand, tol, chunk))
        else:
            results.append(_failed(accelerator, name, f"missing output: {cand.label} has no {name!r}"))
    extra = (name for name in cand_names if name not in ref_names)
    results.extend(
        _failed(accelerator, name, f"extra output: {name!r} is not in the reference ({ref.label})") for name in extra
    )
    return results


def _failed(accelerator: str, output: str, message: str) -> ParityOutcome:
    return ParityOutcome(accelerator=accelerator, output=output, passed=False, message=message)
