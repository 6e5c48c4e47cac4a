"""Property tests of the parity comparison (issue #19): over generated arrays, tolerances and chunk
sizes, every number compare_sets reports equals a plain whole-array numpy computation of the rule
in docs (``|cand - ref| <= absolute + relative * |ref|`` per element, and the cosine similarity)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scrollcase.format.release import ParityOutcome
from scrollcase.parity.compare import compare_sets
from scrollcase.recipe.model import Tolerances
from tests.support.arrays import MemoryOutputs

VALUES = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False, width=64)
# a few exact zeros, exact copies and tiny or large differences: where the rule's edges are
NOISE = st.one_of(st.just(0.0), st.floats(-1e-3, 1e-3), st.floats(-10.0, 10.0), st.sampled_from([1e-4, -1e-4]))
TOLERANCES = st.builds(
    Tolerances,
    absolute=st.sampled_from([1e-12, 1e-6, 1e-4, 1e-2]),
    relative=st.sampled_from([1e-12, 1e-5, 1e-3, 1e-1]),
    minimumCosine=st.sampled_from([1e-9, 0.9, 0.9999, 0.999999]),
)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7))
    ref = draw(hnp.arrays(np.float64, shape, elements=VALUES | st.just(0.0)))
    cand = ref + draw(hnp.arrays(np.float64, shape, elements=NOISE))
    return ref, cand


def plain_numpy(ref: np.ndarray, cand: np.ndarray, tol: Tolerances) -> dict[str, object]:
    """The documented rule over the whole arrays at once, written the obvious way."""
    diff = np.abs(cand - ref)
    bound = tol.absolute + tol.relative * np.abs(ref)
    scaled = ref != 0
    ratio = diff / bound  # tolerances are > 0, so every bound is
    norms = float(np.linalg.norm(ref)) * float(np.linalg.norm(cand))
    cosine = None if norms == 0 else float(np.dot(ref.ravel(), cand.ravel())) / norms
    violations = int(np.count_nonzero(diff > bound))
    with np.errstate(over="ignore"):  # a subnormal reference: the relative error is inf, as compare reports it
        relative = float((diff[scaled] / np.abs(ref[scaled])).max()) if scaled.any() else 0.0
    return {
        "maxAbsoluteError": float(diff.max()),
        "maxRelativeError": relative,
        "violations": violations,
        "cosine": cosine,
        "worst": [int(i) for i in np.unravel_index(int(ratio.argmax()), ref.shape)],
        "passed": violations == 0 and cosine is not None and cosine >= tol.minimumCosine,
    }


def compare(ref: np.ndarray, cand: np.ndarray, tol: Tolerances, chunk: int) -> ParityOutcome:
    [out] = compare_sets(MemoryOutputs({"y": ref}), MemoryOutputs({"y": cand}), "cuda", tol, chunk)
    return out


@settings(max_examples=150, deadline=None)
@given(pairs(), TOLERANCES, st.integers(min_value=1, max_value=64))
def test_every_reported_number_matches_a_plain_numpy_computation(
    pair: tuple[np.ndarray, np.ndarray], tol: Tolerances, chunk: int
) -> None:
    ref, cand = pair
    want = plain_numpy(ref, cand, tol)
    out = compare(ref, cand, tol, chunk)
    assert out.elements == ref.size
    assert out.maxAbsoluteError == want["maxAbsoluteError"]
    assert out.maxRelativeError == pytest.approx(want["maxRelativeError"], rel=1e-12)
    assert out.violations == want["violations"]
    if want["cosine"] is None:
        assert out.cosine is None
    else:
        assert out.cosine == pytest.approx(want["cosine"], abs=1e-9)
    if want["violations"]:
        assert out.worstIndex == want["worst"]
        assert out.referenceValue == ref[tuple(want["worst"])]
        assert out.candidateValue == cand[tuple(want["worst"])]
    # near the cosine threshold float rounding may decide; everywhere else the verdict must agree
    if want["cosine"] is None or abs(float(want["cosine"]) - tol.minimumCosine) > 1e-9:  # type: ignore[arg-type]
        assert out.passed is want["passed"], out.message


@settings(max_examples=100, deadline=None)
@given(pairs(), st.integers(min_value=1, max_value=64))
def test_the_cosine_never_leaves_minus_one_to_one(pair: tuple[np.ndarray, np.ndarray], chunk: int) -> None:
    ref, cand = pair
    tol = Tolerances(absolute=1e-4, relative=1e-3, minimumCosine=1e-9)
    for other in (cand, ref, -ref):
        out = compare(ref, other, tol, chunk)
        assert out.cosine is None or -1.0 <= out.cosine <= 1.0


@pytest.mark.parametrize(("sign", "cosine"), [(1.0, 1.0), (-1.0, -1.0)])
def test_the_cosine_of_parallel_outputs_is_exactly_plus_or_minus_one(sign: float, cosine: float) -> None:
    """For [1, 1, 1] float64 gives dot / (|a| |b|) = 3 / (sqrt(3) * sqrt(3)) = 1.0000000000000002: the
    clamp keeps the reported cosine a cosine (a similarity above 1 would pass any minimumCosine)."""
    ref = np.ones(3)
    out = compare(ref, sign * ref, Tolerances(absolute=10.0, relative=1e-3, minimumCosine=1e-9), 64)
    assert out.cosine == cosine
