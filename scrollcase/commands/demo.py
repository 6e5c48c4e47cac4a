"""``scrollcase demo``: the offline end-to-end demo (channel, lock, build, verify)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console, command_line
from scrollcase.io.pathcheck import require_folder_path

NAME = "demo"
HELP = "run the whole lifecycle offline on an example recipe"
DESCRIPTION = (
    "Make a local conda channel from this machine's CPython and numpy, "
    "write an example recipe for this host's CPU target, lock it, build "
    "the box, verify it and publish it to a local store.  Needs no network.  "
    "The release is left under WORKDIR/.scrollcase/dist, the store under "
    "WORKDIR/.scrollcase/store."
)


@dataclass(frozen=True)
class DemoArgs(CommandArgs):
    workdir: Path


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("scrollcase-demo"),
        help="folder for the demo's recipe, channel and outputs (default: %(default)s)",
    )
    p.set_defaults(handler=handler(DemoArgs, run))


def run(args: DemoArgs, console: Console) -> int:
    from scrollcase.demo.run import run_demo

    require_folder_path(args.workdir, "--workdir")
    result = run_demo(args.workdir, progress=console.progress)
    total = sum(result.timings.values())
    steps = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in result.timings.items())
    data = {
        "release": str(result.release),
        "archive": str(result.archive),
        "sha256": result.sha256,
        "size": result.size,
        "timings": result.timings,
        "store": str(result.store),
        "published": list(result.published),
    }
    publish_note = (
        f"published {len(result.published)} object(s) to {result.store}"
        if result.published
        else f"already published, identical bytes: nothing uploaded to {result.store}"
    )
    console.result(
        data,
        f"demo ok in {total:.1f}s ({steps})\n"
        f"release: {result.release}\narchive: {result.archive} "
        f"({result.size / 1e6:.1f} MB, sha256 {result.sha256})\n{publish_note}\n"
        f"next: {command_line('verify', str(result.release), '--self-test')}",
    )
    return 0
