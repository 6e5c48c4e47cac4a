"""Progress of long byte work (downloads, installs, packs, unpacks of gigabytes): bytes, rate, time left.

A :class:`ByteMeter` is fed byte counts by the work itself and says how far it is, at most every
``interval`` seconds: on a terminal a live line (the console redraws it), on CI a line every few seconds.
:func:`meter_line` is pure; the meter only keeps the counts and the clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

LIVE_INTERVAL = 0.25
LOG_INTERVAL = 5.0

Emit = Callable[[str], None]
MeterFactory = Callable[[str, "int | None"], "ByteMeter"]


def human_bytes(n: float) -> str:
    """``1.2 GB``, ``340 MB``, ``12 KB``, ``512 B`` (decimal units, as download tools print them)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 100 * size else f"{n / size:.0f} {unit}"
    return f"{int(n)} B"


def human_seconds(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def meter_line(label: str, done: int, total: int | None, elapsed: float) -> str:
    """``label: 1.2 GB of 5.5 GB (22%), 180 MB/s, 24 s left`` (no total: bytes and rate only)."""
    rate = done / elapsed if elapsed > 0 else 0.0
    speed = f"{human_bytes(rate)}/s"
    if not total:
        return f"{label}: {human_bytes(done)}, {speed}"
    shown = min(done, total)
    left = f", {human_seconds((total - shown) / rate)} left" if rate > 0 and shown < total else ""
    return f"{label}: {human_bytes(shown)} of {human_bytes(total)} ({100 * shown // total}%), {speed}{left}"


@dataclass
class ByteMeter:
    """Counts bytes as they are done and emits a progress line at most every ``interval`` seconds."""

    label: str
    total: int | None
    emit: Emit
    interval: float = LOG_INTERVAL
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    start: float = field(init=False)
    last: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.start = self.last = self.clock()

    def __call__(self, n: int) -> None:
        with self._lock:  # wheels install in threads
            self.done += n
            now = self.clock()
            if now - self.last < self.interval:
                return
            self.last = now
        self.emit(meter_line(self.label, self.done, self.total, now - self.start))

    def finish(self) -> None:
        """A last line, only when the work took long enough to have shown progress at all."""
        now = self.clock()
        if now - self.start >= self.interval:
            self.emit(meter_line(self.label, self.done, self.total, now - self.start))


def silent_meter(label: str, total: int | None) -> ByteMeter:
    """A meter that shows nothing (library default when no console is given)."""
    return ByteMeter(label, total, lambda _: None, interval=float("inf"))


@contextmanager
def waiting(emit: Emit, what: str, *, every: float = LOG_INTERVAL) -> Iterator[None]:
    """While the block runs, say every ``every`` seconds how long it has waited for ``what``: a
    request to a silent server shows that it is waiting, and on what, until its timeout ends it."""
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            emit(f"still waiting for {what}: {human_seconds(time.monotonic() - start)}")

    ticker = threading.Thread(target=tick, name="scrollcase-waiting", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
