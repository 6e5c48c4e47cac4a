"""py-rattler's failures, told apart from scrollcase's own bugs and turned into scrollcase errors.

py-rattler's exception classes (``rattler.exceptions``: SolverError, InvalidMatchSpecError,
ParseCondaLockError, LinkError, ...) share no base class below ``Exception``, and some failures of
its Rust core and Python wrappers surface as plain built-in exceptions (OSError, ValueError,
RuntimeError).  ``TypeError``, ``AttributeError`` and ``NameError`` are never translated: they are
mistakes in the calling code and must surface as an internal error with a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from scrollcase.errors import ScrollcaseError

# What rattler raises besides its own classes; the bug classes (TypeError, ...) are left out on purpose.
_BUILTIN_FAILURES: tuple[type[Exception], ...] = (
    OSError,
    ValueError,
    RuntimeError,
    LookupError,
    ArithmeticError,
    BufferError,
    EOFError,
)


@functools.cache
def rattler_exceptions() -> tuple[type[Exception], ...]:
    """Every exception class that means "rattler failed" (for ``except rattler_exceptions():``)."""
    import rattler.exceptions as module  # imported on first use: rattler is heavy

    own = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Exception) and not issubclass(value, Warning)
    ]
    return (*own, *_BUILTIN_FAILURES)


def is_rattler_error(exc: BaseException) -> bool:
    return isinstance(exc, rattler_exceptions()) and not isinstance(exc, ScrollcaseError)


@contextmanager
def rattler_errors(translate: Callable[[Exception], ScrollcaseError]) -> Iterator[None]:
    """Run a block of rattler calls; a rattler failure ``exc`` is raised as ``translate(exc)``."""
    try:
        yield
    except Exception as exc:
        if not is_rattler_error(exc):
            raise
        raise translate(exc) from None
