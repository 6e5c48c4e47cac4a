"""The parity comparison on in-memory arrays: every pass/fail rule, each tolerance from both sides."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pytest
from numpy.typing import NDArray

from scrollcase.errors import ParityError
from scrollcase.format.release import ParityOutcome
from scrollcase.parity.compare import ArrayInfo, compare_output, compare_sets
from scrollcase.recipe.model import Tolerances
from tests.support.arrays import MemoryOutputs

TOL = Tolerances(absolute=1e-4, relative=1e-3, minimumCosine=0.9999)


def one(ref: np.ndarray, cand: np.ndarray, tol: Tolerances = TOL, chunk: int = 1 << 18) -> ParityOutcome:
    results = compare_sets(MemoryOutputs({"y": ref}), MemoryOutputs({"y": cand}), "cuda", tol, chunk)
    assert len(results) == 1
    return results[0]


def base(n: int = 100) -> np.ndarray:
    return np.linspace(1.0, 2.0, n)


def test_identical_outputs_pass_with_zero_error() -> None:
    ref = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    out = one(ref, ref.copy())
    assert out.passed, out.message
    assert out.maxAbsoluteError == 0.0 and out.maxRelativeError == 0.0
    assert out.cosine == pytest.approx(1.0, abs=1e-15)
    assert out.elements == 128 and out.violations == 0
    assert out.kind == "compare" and out.output == "y" and out.accelerator == "cuda"


@pytest.mark.parametrize(("factor", "passes"), [(0.99, True), (1.01, False)])
def test_absolute_tolerance_just_below_and_above(factor: float, passes: bool) -> None:
    ref = base()
    ref[10] = 0.0  # |ref| = 0: the bound there is the absolute tolerance alone
    cand = ref.copy()
    cand[10] = factor * TOL.absolute
    out = one(ref, cand)
    assert out.passed is passes, out.message
    assert out.worstIndex == [10]
    assert out.maxAbsoluteError == pytest.approx(factor * TOL.absolute)
    if not passes:
        assert out.violations == 1
        assert "1 of 100 element(s) exceed |a-b| <= 0.0001 + 0.001*|ref|" in out.message
        assert out.referenceValue == 0.0 and out.candidateValue == pytest.approx(1.01e-4)


def test_zero_reference_elements_do_not_make_the_relative_error_infinite() -> None:
    """maxRelativeError is max |a-b|/|ref| over elements whose reference is not 0 (those have no
    scale): a difference at ref == 0 is judged by the absolute tolerance alone, never inf."""
    ref = base()
    ref[10] = 0.0
    cand = ref.copy()
    cand[10] = 0.5 * TOL.absolute
    cand[20] += 1e-5 * ref[20]
    out = one(ref, cand)
    assert out.passed, out.message
    assert out.maxRelativeError == pytest.approx(1e-5)
    assert out.maxAbsoluteError == pytest.approx(0.5 * TOL.absolute)


@pytest.mark.parametrize(("factor", "passes"), [(0.99, True), (1.01, False)])
def test_relative_tolerance_just_below_and_above(factor: float, passes: bool) -> None:
    ref = base(1000) * 1000.0  # large values: the relative term dominates the bound
    bound = TOL.absolute + TOL.relative * abs(ref[500])
    cand = ref.copy()
    cand[500] -= factor * bound
    out = one(ref, cand)
    assert out.passed is passes, out.message
    assert out.worstIndex == [500]
    assert out.maxRelativeError == pytest.approx(factor * bound / ref[500])


@pytest.mark.parametrize(("delta", "passes"), [(1e-6, True), (-1e-6, False)])
def test_minimum_cosine_just_above_and_below(delta: float, passes: bool) -> None:
    loose = Tolerances(absolute=10.0, relative=10.0, minimumCosine=0.99)
    angle = math.acos(0.99 + delta)
    ref = np.array([1.0, 0.0])
    cand = np.array([math.cos(angle), math.sin(angle)])
    out = one(ref, cand, loose)
    assert out.passed is passes, out.message
    assert out.cosine == pytest.approx(0.99 + delta, abs=1e-12)
    if not passes:
        assert "cosine similarity 0.9899990000 < minimumCosine 0.99" in out.message


def test_chunking_does_not_change_any_metric() -> None:
    rng = np.random.default_rng(7)
    ref = rng.standard_normal((13, 17, 5)).astype(np.float32)
    cand = ref + rng.standard_normal(ref.shape).astype(np.float32) * 1e-3
    whole, chunked = one(ref, cand), one(ref, cand, chunk=7)
    for field in ("maxAbsoluteError", "maxRelativeError", "cosine", "referenceValue", "candidateValue"):
        assert getattr(chunked, field) == pytest.approx(getattr(whole, field), rel=1e-12), field
    assert chunked.worstIndex == whole.worstIndex and len(whole.worstIndex or []) == 3
    assert chunked.violations == whole.violations > 0
    i = tuple(whole.worstIndex or [])
    assert whole.referenceValue == float(ref[i]) and whole.candidateValue == float(cand[i])


@pytest.mark.parametrize(
    ("side", "value", "word"),
    [
        ("candidate", np.nan, "nan"),
        ("candidate", np.inf, "inf"),
        ("reference", -np.inf, "-inf"),
        ("reference", np.nan, "nan"),
    ],
)
def test_non_finite_values_fail_naming_the_side_and_index(side: str, value: float, word: str) -> None:
    ref = base(50).reshape(5, 10)
    cand = ref.copy()
    (cand if side == "candidate" else ref)[3, 4] = value
    out = one(ref, cand, chunk=8)
    assert not out.passed
    assert f"non-finite value: {side} has {word} at flat index 34" in out.message
    assert "[3, 4]" in out.message


def test_float64_overflow_is_reported_not_hidden() -> None:
    ref = np.full(4, 1e200)
    out = one(ref, ref.copy())
    assert not out.passed and "too large to compare" in out.message


def test_shape_mismatch() -> None:
    out = one(np.ones((2, 3)), np.ones((3, 2)))
    assert not out.passed and out.message == "shape mismatch: reference [2, 3], candidate [3, 2]"


def test_dtype_mismatch() -> None:
    out = one(np.ones(4, np.float32), np.ones(4, np.float64))
    assert not out.passed and out.message == "dtype mismatch: reference float32, candidate float64"


def test_byte_order_alone_is_not_a_dtype_mismatch() -> None:
    ref = base(10).astype("<f4")
    assert one(ref, ref.astype(">f4")).passed


@pytest.mark.parametrize("dtype", [np.complex64, np.dtype("U3")])
def test_non_real_dtypes_are_refused(dtype: np.dtype) -> None:
    arr = np.zeros(3, dtype=dtype)
    out = one(arr, arr.copy())
    assert not out.passed and "is not a real numeric type" in out.message


def test_integer_and_bool_outputs_compare_as_numbers() -> None:
    assert one(np.arange(1, 10), np.arange(1, 10)).passed
    assert not one(np.arange(1, 10), np.arange(2, 11)).passed
    assert one(np.array([True, False, True]), np.array([True, False, True])).passed


@pytest.mark.parametrize(("zero_side", "text"), [("cand", "candidate"), ("ref", "reference")])
def test_all_zero_vector_fails_because_cosine_is_undefined(zero_side: str, text: str) -> None:
    ref, cand = np.full(6, 1e-6), np.full(6, 1e-6)  # within absolute tolerance of zero
    (cand if zero_side == "cand" else ref)[...] = 0
    out = one(ref, cand)
    assert not out.passed and out.cosine is None
    assert out.message == f"{text} is an all-zero vector: cosine similarity is undefined"


def test_empty_output_fails() -> None:
    out = one(np.zeros((0, 3)), np.zeros((0, 3)))
    assert not out.passed and "0 elements" in out.message


def test_scalar_output() -> None:
    out = one(np.array(2.5), np.array(2.5))
    assert out.passed and out.worstIndex == []


def test_missing_and_extra_outputs_each_fail() -> None:
    ref = MemoryOutputs({"a": base(), "b": base()}, label="ref.npz")
    cand = MemoryOutputs({"a": base(), "c": base()}, label="cand.npz")
    results = {r.output: r for r in compare_sets(ref, cand, "cuda", TOL)}
    assert results["a"].passed
    assert results["b"].message == "missing output: cand.npz has no 'b'"
    assert results["c"].message == "extra output: 'c' is not in the reference (ref.npz)"
    assert not results["b"].passed and not results["c"].passed


def test_a_reference_without_outputs_fails() -> None:
    results = compare_sets(MemoryOutputs({}, "ref"), MemoryOutputs({"a": base()}), "cuda", TOL)
    assert [r.passed for r in results] == [False] and "saved no outputs" in results[0].message


def test_compare_output_by_name() -> None:
    sets = MemoryOutputs({"x": base(), "z": base() * 2})
    assert compare_output("z", "metal", sets, sets, TOL).accelerator == "metal"


# --- found by mutation testing (benchmarks/mutation.py on parity/compare.py) --------------------------


def test_worst_element_in_a_later_chunk_is_located_by_its_flat_index() -> None:
    """The chunk offset is added (30 + 4), not or-ed or xor-ed: with chunks of 10, index 34."""
    ref = base(50).reshape(5, 10)
    cand = ref.copy()
    cand[1, 2] += 0.5 * TOL.absolute  # within the bound: the worst must still be the later one
    cand[3, 4] += 3 * (TOL.absolute + TOL.relative * ref[3, 4])
    out = one(ref, cand, chunk=10)
    assert not out.passed and out.worstIndex == [3, 4] and out.violations == 1
    assert out.referenceValue == ref[3, 4] and out.candidateValue == cand[3, 4]
    assert out.message.endswith(f"|a-b| {abs(cand[3, 4] - ref[3, 4]):.6g}")


def test_the_first_of_equally_bad_elements_is_the_worst() -> None:
    ref = base(40)
    cand = ref.copy()
    cand[[5, 25]] += 1.0  # same deviation, same reference scale: ratio ties are won by the first
    ref[25] = ref[5]
    cand[25] = cand[5]
    out = one(ref, cand, chunk=10)
    assert out.worstIndex == [5] and out.violations == 2


def test_non_finite_value_in_a_later_chunk_stops_at_the_first() -> None:
    ref = base(50).reshape(5, 10)
    cand = ref.copy()
    cand[3, 4] = np.nan
    cand[3, 6] = np.inf  # same chunk, later
    cand[4, 9] = np.nan  # a later chunk: the comparison has stopped by then
    out = one(ref, cand, chunk=10)
    assert not out.passed and out.worstIndex == [3, 4]
    assert out.message == "non-finite value: candidate has nan at flat index 34 (index [3, 4])"


def test_only_elements_beyond_the_bound_are_violations() -> None:
    ref = base(100)
    cand = ref.copy()
    cand[:10] += 0.5 * (TOL.absolute + TOL.relative * ref[:10])  # inside: ratio 0.5
    cand[50:53] += 2 * (TOL.absolute + TOL.relative * ref[50:53])  # outside: ratio 2
    bound = TOL.absolute + TOL.relative * ref[60]
    cand[60] += bound  # exactly on the bound passes (|a-b| <= bound)
    out = one(ref, cand, chunk=16)
    assert out.violations == 3 and out.worstIndex in ([50], [51], [52])


@pytest.mark.parametrize(("scale", "expected"), [(-3.0, -1.0), (2.0, 1.0)])
def test_cosine_of_scaled_vectors_is_exactly_plus_or_minus_one(scale: float, expected: float) -> None:
    """Cosine ignores the norms (dot over the product of both norms) and stays in [-1, 1]."""
    loose = Tolerances(absolute=100.0, relative=100.0, minimumCosine=0.001)
    ref = np.array([3.0, 4.0])
    out = one(ref, scale * ref, loose)
    assert out.cosine == pytest.approx(expected, abs=1e-15) and -1.0 <= (out.cosine or 0) <= 1.0


def test_cosine_of_unequal_norms() -> None:
    loose = Tolerances(absolute=100.0, relative=100.0, minimumCosine=0.001)
    out = one(np.array([3.0, 0.0]), np.array([2.0, 2.0]), loose)
    assert out.cosine == pytest.approx(math.sqrt(0.5), rel=1e-15)


def test_cosine_equal_to_the_minimum_passes() -> None:
    exact = Tolerances(absolute=1e-4, relative=1e-3, minimumCosine=1.0)
    ref = np.array([1.0, 0.0, 0.0])
    out = one(ref, ref.copy(), exact)
    assert out.cosine == 1.0 and out.passed, out.message


def test_identical_outputs_report_the_first_element_as_the_worst() -> None:
    ref = base(20).reshape(4, 5)
    out = one(ref, ref.copy(), chunk=8)
    assert out.worstIndex == [0, 0] and out.referenceValue == ref[0, 0] == out.candidateValue


def test_an_all_zero_reference_has_zero_relative_error() -> None:
    ref = np.zeros(10)
    cand = np.full(10, 0.5 * TOL.absolute)
    out = one(ref, cand)
    assert out.maxRelativeError == 0.0 and out.maxAbsoluteError == pytest.approx(0.5 * TOL.absolute)


@pytest.mark.parametrize("swap", [False, True])
def test_shape_and_dtype_mismatches_either_way_round(swap: bool) -> None:
    pairs = [(np.ones(3), np.ones(2)), (np.ones(2, np.float64), np.ones(2, np.float32))]
    for ref, cand in pairs:
        a, b = (cand, ref) if swap else (ref, cand)
        out = one(a, b)
        assert not out.passed and "mismatch" in out.message, out.message


@dataclass(frozen=True)
class _Saved(MemoryOutputs):
    """Outputs as read from .npy headers, which may say Fortran order."""

    fortran: bool = False

    def infos(self) -> Mapping[str, ArrayInfo]:
        return {n: replace(i, fortran_order=self.fortran) for n, i in super().infos().items()}


@pytest.mark.parametrize(("ref_fortran", "cand_fortran"), [(True, False), (False, True)])
def test_memory_order_mismatch_either_way_round(ref_fortran: bool, cand_fortran: bool) -> None:
    ref, cand = (
        _Saved({"y": np.ones((2, 3))}, fortran=ref_fortran),
        _Saved({"y": np.ones((2, 3))}, fortran=cand_fortran),
    )
    out = compare_output("y", "cuda", ref, cand, TOL)
    assert not out.passed and out.message.startswith("memory order mismatch")


@dataclass(frozen=True)
class _Truncated(MemoryOutputs):
    """Outputs whose file breaks after the first chunk, as a truncated .npy does."""

    def chunks(self, name: str, size: int) -> Iterator[NDArray[np.generic]]:
        yield from itertools.islice(super().chunks(name, size), 1)
        raise ParityError(f"{self.label}: {name} is truncated")


def test_an_output_that_breaks_while_read_fails_with_its_message() -> None:
    ref = base(40)
    out = compare_output("y", "cuda", MemoryOutputs({"y": ref}), _Truncated({"y": ref.copy()}), TOL, 10)
    assert not out.passed and out.message == "<memory>: y is truncated"


def test_an_overflow_stops_the_comparison_before_later_chunks() -> None:
    ref = base(40)
    ref[:10] = 1e200  # chunk 1: a sum of squares overflows float64
    cand = ref.copy()
    cand[25] = np.nan  # chunk 3 is never read
    out = one(ref, cand, chunk=10)
    assert not out.passed and "too large to compare" in out.message


def test_an_element_exactly_on_the_bound_is_not_a_violation() -> None:
    """|a-b| <= absolute + relative*|ref| passes: at ref == 0 the bound is exactly `absolute`."""
    ref = base(10)
    ref[3] = 0.0
    cand = ref.copy()
    cand[3] = TOL.absolute  # ratio exactly 1.0
    cand[7] += 2 * (TOL.absolute + TOL.relative * ref[7])  # one real violation beside it
    out = one(ref, cand)
    assert out.violations == 1 and out.worstIndex == [7]
