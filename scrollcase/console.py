"""How a command talks to the person (or program) that ran it.

Commands never print directly: they hand text and machine-readable data to a :class:`Console`, which
prints one or the other depending on ``--json``.  Progress goes to stderr so ``--json`` stdout stays
parseable.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import IO, Any


@dataclass
class Console:
    json_mode: bool = False
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    quiet: bool = False

    def progress(self, text: str) -> None:
        """A line about what is happening now (stderr, never part of the result)."""
        if not self.quiet:
            print(text, file=self.stderr, flush=True)

    def result(self, data: Any, text: str | None = None) -> None:
        """The command's result: ``data`` as JSON with ``--json``, otherwise ``text``."""
        if self.json_mode:
            json.dump(data, self.stdout, indent=2, sort_keys=False, default=str)
            self.stdout.write("\n")
        elif text is not None:
            self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()
