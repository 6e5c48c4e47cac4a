"""py-rattler failures become the caller's ScrollcaseError; our own bugs are never translated."""

from __future__ import annotations

import pytest
from rattler import VersionSpec

from scrollcase.errors import LockError, SolveError
from scrollcase.lock.rattler_errors import is_rattler_error, rattler_errors, rattler_exceptions


def _rattler_failure() -> Exception:
    try:
        VersionSpec(">>>1")
    except Exception as exc:  # whatever rattler raises is what this test is about
        return exc
    raise AssertionError("rattler accepted an invalid version spec")


def test_rattlers_own_exception_classes_are_recognised() -> None:
    failure = _rattler_failure()
    assert type(failure).__name__ == "InvalidVersionSpecError" and is_rattler_error(failure)
    assert isinstance(failure, rattler_exceptions())


@pytest.mark.parametrize("bug", [TypeError("x"), AttributeError("x"), NameError("x")])
def test_programming_errors_are_not_rattler_failures(bug: Exception) -> None:
    assert not is_rattler_error(bug)
    with pytest.raises(type(bug)), rattler_errors(lambda exc: LockError("never")):
        raise bug


def test_a_scrollcase_error_passes_through_untranslated() -> None:
    with pytest.raises(SolveError), rattler_errors(lambda exc: LockError("never")):
        raise SolveError("ours")


def test_a_rattler_failure_becomes_the_callers_error() -> None:
    with (
        pytest.raises(LockError) as caught,
        rattler_errors(lambda exc: LockError(f"cannot read: {type(exc).__name__}")),
    ):
        VersionSpec(">>>1")
    assert caught.value.message == "cannot read: InvalidVersionSpecError"
    assert caught.value.__cause__ is None


def test_builtin_failures_from_rattlers_core_are_translated() -> None:
    with pytest.raises(LockError), rattler_errors(lambda exc: LockError(str(exc))):
        raise OSError("disk full")
