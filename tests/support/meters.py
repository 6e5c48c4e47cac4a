"""A progress-meter factory for tests: it keeps every meter it made, to read their totals and counts."""

from __future__ import annotations

from scrollcase.progress import ByteMeter


class Meters:
    """A meter factory that keeps the meters it made, to read their totals and counts."""

    def __init__(self) -> None:
        self.made: list[ByteMeter] = []

    def __call__(self, label: str, total: int | None) -> ByteMeter:
        self.made.append(ByteMeter(label, total, lambda _: None, interval=float("inf")))
        return self.made[-1]
