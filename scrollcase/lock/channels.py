"""Channel names and URLs as a lock records them, and the overrides that point a channel at a mirror.

``NAME=URL`` overrides come from ``SCROLLCASE_CHANNEL_OVERRIDES`` (comma separated) and then the command line,
which wins; a lock made through a mirror still records the URL the lock-check compares.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from scrollcase.errors import UsageError

OVERRIDES_ENV = "SCROLLCASE_CHANNEL_OVERRIDES"
CONDA_FORGE_BASE = "https://conda.anaconda.org/"


def channel_url(channel: str) -> str:
    """A channel name or URL as the URL a lock records (always with a trailing slash)."""
    url = channel if "://" in channel else CONDA_FORGE_BASE + channel.strip("/")
    return url.rstrip("/") + "/"


def parse_overrides(items: Sequence[str], env_value: str | None = None) -> dict[str, str]:
    """``NAME=URL`` pairs from the environment (comma separated) then the command line (which wins)."""
    pairs = [p for p in (env_value or "").split(",") if p.strip()] + list(items)
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, url = pair.strip().partition("=")
        if not sep or not name.strip() or not url.strip():
            raise UsageError(
                f"bad channel override {pair!r}",
                fix="write NAME=URL, e.g. conda-forge=file:///srv/mirror/conda-forge "
                f"(several: comma separated in {OVERRIDES_ENV})",
            )
        out[name.strip()] = url.strip()
    return out


def overrides_from_env(items: Sequence[str] = ()) -> dict[str, str]:
    return parse_overrides(items, os.environ.get(OVERRIDES_ENV))


def apply_overrides(channels: Sequence[str], overrides: Mapping[str, str] | None) -> tuple[str, ...]:
    """Channel URLs with each channel named (by name or URL) in ``overrides`` replaced by its mirror."""
    table = {channel_url(k): v for k, v in (overrides or {}).items()}
    return tuple(channel_url(table.get(channel_url(c), c)) for c in channels)
