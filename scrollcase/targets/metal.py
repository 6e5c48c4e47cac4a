"""The metal accelerator: Apple silicon's GPU through torch's MPS backend, on osx-arm64 only.

A metal box holds the same CPU builds as a cpu box (torch's macOS arm64 wheels drive the GPU), so it
keeps the CPU lock rules; it ranks above cpu when a host chooses a release.  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scrollcase.targets.cpu import Cpu


@dataclass(frozen=True)
class Metal(Cpu):
    name: str = "metal"
    title: str = "Metal"
    aliases: tuple[str, ...] = ("mps",)
    platforms: tuple[tuple[str, str], ...] = (("osx", "arm64"),)
    rank: int = 1
    runners: dict[str, list[str]] = field(default_factory=dict)  # cpu's "osx-arm64-*" covers it


METAL = Metal()
