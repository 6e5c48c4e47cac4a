"""``scrollcase upgrade --store STORE DEST [--version V]``: move an installed box to another release,
downloading only the frames that changed (:mod:`scrollcase.client.upgrade`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from scrollcase.client.trusted import trusted_root_option
from scrollcase.client.upgrade import upgrade_box
from scrollcase.commands import (
    ReleaseArgs,
    SubParsers,
    add_command,
    add_trust_options,
    handler,
    report_gpu,
    store_location,
)
from scrollcase.console import Console
from scrollcase.host.facts import HostProbes

NAME = "upgrade"
HELP = "upgrade an installed box, downloading only what changed"

DESCRIPTION = """\
Move the box installed in DEST to the newest release of the same box and target in STORE (or to
--version V, older ones too: that is how a host rolls back).  Only the archive frames missing from the
frame cache ($SCROLLCASE_CACHE_DIR/frames, filled by install and upgrade) are downloaded, each checked
against the release manifest's frame table; the archive the frames make is unpacked beside DEST, its
sha256 checked as it is read from the frame cache, and swapped in.  DEST stays the old, working install
until the new one is complete.
"""


@dataclass(frozen=True)
class UpgradeArgs(ReleaseArgs):
    dest: Path
    keep_previous: bool
    no_share: bool


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION, raw=True)
    p.add_argument("dest", metavar="DEST", type=Path, help="the installed box's folder")
    p.add_argument("--store", metavar="STORE", default=None, help="directory, s3:// or http(s):// ($SCROLLCASE_STORE)")
    p.add_argument("--version", metavar="V", default=None, help="this version (older too: a rollback)")
    p.add_argument("--pre", action="store_true", help="consider pre-releases too")
    p.add_argument("--endpoint-url", default=None, help="S3-compatible endpoint (default: AWS)")
    p.add_argument("--skip-gpu-check", action="store_true", help="do not probe the host's GPUs (prints a warning)")
    p.add_argument(
        "--keep-previous", action="store_true", help="keep the old tree as .DEST.previous and its frames (rollback)"
    )
    p.add_argument(
        "--no-share",
        action="store_true",
        help="keep every file of the box its own: no links to the copies other installed boxes share",
    )
    add_trust_options(p)
    p.set_defaults(handler=handler(UpgradeArgs, run))


def run(args: UpgradeArgs, console: Console, probes: HostProbes | None = None) -> int:
    upgraded = upgrade_box(
        store_location(args.store),
        args.dest,
        version=args.version,
        pre=args.pre,
        skip_gpu_check=args.skip_gpu_check,
        keep_previous=args.keep_previous,
        share=not args.no_share,
        endpoint_url=args.endpoint_url,
        probes=probes,
        progress=console.progress,
        meter=console.meter,
        on_gpu_check=lambda check: report_gpu(console, check),
        trusted_root=trusted_root_option(args.trusted_root),
        trust_state=args.trust_state,
    )
    data = upgraded.to_json()
    if not upgraded.upgraded:
        nothing = (
            f"{upgraded.box_id} in {upgraded.dest} is at {upgraded.from_version}: nothing newer in {upgraded.store}"
        )
        console.result(data, nothing)
        return 0
    console.result(data, _render(data))
    return 0


def _render(data: dict[str, object]) -> str:
    return (
        f"upgraded {data['boxId']} in {data['dest']} from {data['from']} to {data['to']} in {data['seconds']}s: "
        f"downloaded {data['bytesDownloaded']} of {data['size']} bytes ({data['framesFetched']} of "
        f"{data['frames']} frames); sha256 {data['sha256']} verified"
        + (f"; the old tree is kept in {data['previous']}" if data["previous"] else "")
    )
