"""Progress lines for long byte work: bytes, rate, time left; live on a terminal, every few seconds on CI."""

from __future__ import annotations

import io

from scrollcase.console import Console
from scrollcase.progress import ByteMeter, human_bytes, meter_line


def test_meter_line_says_bytes_rate_and_time_left() -> None:
    assert meter_line("downloading", 1_200_000_000, 5_500_000_000, 10.0) == (
        "downloading: 1.2 GB of 5.5 GB (21%), 120 MB/s, 36 s left"
    )
    assert meter_line("packing", 300_000_000, None, 2.0) == "packing: 300 MB, 150 MB/s"
    assert meter_line("x", 10, 10, 1.0) == "x: 10 B of 10 B (100%), 10 B/s"
    assert meter_line("x", 0, 100, 0.0) == "x: 0 B of 100 B (0%), 0 B/s"
    assert "2 min 05 s left" in meter_line("x", 1_000_000, 126_000_000, 1.0)
    assert human_bytes(2_500) == "2.5 KB" and human_bytes(250e9) == "250 GB"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_meter_emits_at_most_every_interval() -> None:
    clock, lines = Clock(), []
    meter = ByteMeter("unpacking", 100, lines.append, interval=5.0, clock=clock)
    for _ in range(10):
        clock.now += 1.0
        meter(10)
    assert lines == ["unpacking: 50 B of 100 B (50%), 10 B/s, 5 s left", "unpacking: 100 B of 100 B (100%), 10 B/s"]
    meter.finish()
    assert len(lines) == 3
    quick = ByteMeter("q", 1, lines.append, interval=5.0, clock=clock)
    quick(1)
    quick.finish()
    assert len(lines) == 3  # work shorter than one interval shows nothing


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_redraws_a_live_line_on_a_terminal_and_prints_lines_in_a_log() -> None:
    tty = Tty()
    console = Console(stderr=tty)
    console.status("a: 1 B")
    console.status("a: 2 B")
    console.progress("done")
    assert tty.getvalue() == "\r\x1b[Ka: 1 B\r\x1b[Ka: 2 B\ndone\n"
    log = io.StringIO()
    plain = Console(stderr=log)
    plain.status("a: 1 B")
    assert log.getvalue() == "a: 1 B\n" and plain.meter("x", 1).interval == 5.0
    assert console.meter("x", 1).interval == 0.25
    assert Console(stderr=Tty(), quiet=True).interactive is False


def test_waiting_says_how_long_it_has_waited_until_the_block_ends() -> None:
    import time

    from scrollcase.progress import waiting

    said: list[str] = []
    with waiting(said.append, "s3://bucket", every=0.05):
        time.sleep(0.18)
    count = len(said)
    time.sleep(0.12)
    assert count >= 2 and len(said) == count  # it stops with the block
    assert said[0] == "still waiting for s3://bucket: 0 s"


def test_waiting_is_silent_for_a_quick_block() -> None:
    from scrollcase.progress import waiting

    said: list[str] = []
    with waiting(said.append, "x", every=5):
        pass
    assert said == []
