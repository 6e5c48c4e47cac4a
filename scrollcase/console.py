"""How a command talks to the person (or program) that ran it.

Commands never print directly: they hand text and machine-readable data to a :class:`Console`, which
prints one or the other depending on ``--json``.  Progress goes to stderr so ``--json`` stdout stays
parseable.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from scrollcase.progress import LIVE_INTERVAL, LOG_INTERVAL, ByteMeter


@dataclass
class Console:
    json_mode: bool = False
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    quiet: bool = False

    _live: bool = field(default=False, init=False)  # a status line is on screen, waiting to be ended

    @property
    def interactive(self) -> bool:
        """Progress goes to a terminal (live lines) rather than to a CI log (a line every few seconds)."""
        return not self.quiet and self.stderr.isatty()

    def progress(self, text: str) -> None:
        """A line about what is happening now (stderr, never part of the result)."""
        if not self.quiet:
            self.end_status()
            print(text, file=self.stderr, flush=True)

    def status(self, text: str) -> None:
        """A transient line (bytes, rate, time left): redrawn in place on a terminal, a plain line elsewhere."""
        if not self.interactive:
            self.progress(text)
            return
        self.stderr.write("\r\x1b[K" + text)
        self.stderr.flush()
        self._live = True

    def meter(self, label: str, total: int | None) -> ByteMeter:
        """A byte meter that reports through :meth:`status`."""
        return ByteMeter(label, total, self.status, interval=LIVE_INTERVAL if self.interactive else LOG_INTERVAL)

    def end_status(self) -> None:
        """End a live status line on screen (the next output starts on a fresh line)."""
        if self._live:
            self.stderr.write("\n")
            self._live = False

    def result(self, data: Any, text: str | None = None) -> None:
        """The command's result: ``data`` as JSON with ``--json``, otherwise ``text``."""
        self.end_status()
        if self.json_mode:
            json.dump(data, self.stdout, indent=2, sort_keys=False, default=str)
            self.stdout.write("\n")
        elif text is not None:
            self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()


def invocation(argv0: str, executable: str, which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """How to run the scrollcase that runs now, as a shell would find it.

    A venv's ``scrollcase`` that is not on PATH (README's ``.venv/bin/scrollcase demo``) is named by the
    path it was run by; ``python -m scrollcase`` by its interpreter; plain ``scrollcase`` only when PATH
    finds this very program."""
    name = argv0.replace("\\", "/").rsplit("/", 1)[-1]  # a Windows path's name on any OS
    if name.lower() in ("scrollcase", "scrollcase.exe"):
        found = which("scrollcase")
        if found and Path(found).resolve() == Path(argv0).resolve():
            return ["scrollcase"]
        return [argv0]
    return [executable, "-m", "scrollcase"]


def command_line(*args: str) -> str:
    """``scrollcase ARGS`` quoted for this platform's shell and runnable as printed (see :func:`invocation`)."""
    words = [*invocation(sys.argv[0], sys.executable, shutil.which), *args]
    if os.name == "nt":
        return subprocess.list2cmdline(words)  # cmd.exe's quoting; nothing is run here (io/proc runs processes)
    return shlex.join(words)
