"""``scrollcase install --store STORE --box BOXID DEST``: choose, download and unpack a published release.

Reads the box index, picks the release that fits this machine (:mod:`scrollcase.client.select`),
checks the GPU against the release manifest before a byte of the archive is fetched, downloads it
resumably into the cache with size and sha256 checked as it arrives (:mod:`scrollcase.client.download`),
then unpacks it exactly as ``scrollcase unpack`` does.  ``--list`` shows what the store offers and why
each release does or does not fit.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from scrollcase.client.install import Listing, install_box, list_releases
from scrollcase.client.receive import Figures
from scrollcase.client.select import HostView
from scrollcase.client.trusted import trusted_root_option
from scrollcase.commands import (
    STORE_ENV,
    ReleaseArgs,
    SubParsers,
    add_command,
    add_trust_options,
    handler,
    report_gpu,
    store_location,
)
from scrollcase.console import Console
from scrollcase.errors import Problem, UsageError
from scrollcase.host.facts import HostProbes
from scrollcase.recipe.fields import Identifier

NAME = "install"
HELP = "install the release of a box that fits this machine from a store"

DESCRIPTION = """\
Install the release of BOXID that fits this machine from STORE into DEST (which must not
exist, or be an empty folder).  STORE is a directory, s3://bucket/prefix (with --endpoint-url
for MinIO, R2, SeaweedFS…) or an http(s):// URL of the same layout served by any static file
server or CDN.  The newest release whose platform, arch and accelerator fit is chosen (a CUDA
box only when the host's GPU driver is >= its minNvidiaDriverVersion and a GPU its archList
runs on; CUDA before metal before cpu; no pre-releases unless --pre or --version).  The archive
is downloaded into the user cache ($SCROLLCASE_CACHE_DIR), resuming an interrupted download,
with its size and sha256 checked before anything appears at DEST; then it is unpacked and
relocated as `scrollcase unpack` does.  The archive's frames are kept in the frame cache, so a later
`scrollcase upgrade` downloads only the frames that changed (frames no installed box uses any more
are pruned), and a box sharing packages with a box already installed downloads only the frames this
machine lacks (by ranged reads; the whole archive's sha256 is still checked before DEST appears).
--list shows every release and why it fits or not, and what installing the chosen one would download
and add to the disk.  With --trusted-root (the store's root.json from `scrollcase trust init`, shipped
with the host app) the index, the manifest and the archive's size and sha256 are checked against the
store's signed TUF metadata before the archive is downloaded: unsigned, rolled-back, expired, repacked
or mixed objects are refused (exit 13), and what this host saw is kept per store in the user cache
(--trust-state).  Without it one warning says the store's objects are not verified against signed
metadata.
"""


@dataclass(frozen=True)
class InstallArgs(ReleaseArgs):
    dest: Path | None
    box: str
    target: str | None
    list: bool
    keep_download: bool
    no_share: bool


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION, raw=True)
    p.add_argument("dest", metavar="DEST", type=Path, nargs="?", help="folder to create (not with --list)")
    p.add_argument(
        "--store", metavar="STORE", default=None, help=f"directory, s3:// or http(s):// (default: ${STORE_ENV})"
    )
    p.add_argument("--box", metavar="BOXID", required=True, help="the box to install")
    p.add_argument("--version", metavar="V", default=None, help="this version (a pre-release too), not the newest")
    p.add_argument("--target", metavar="TARGET_ID", default=None, help="this target, whatever this machine is")
    p.add_argument("--pre", action="store_true", help="consider pre-releases (1.1.0-rc.1) too")
    p.add_argument("--list", action="store_true", help="list every release and whether it fits; install nothing")
    p.add_argument(
        "--endpoint-url", default=None, help="S3-compatible endpoint (default: AWS, or $AWS_ENDPOINT_URL_S3)"
    )
    p.add_argument(
        "--skip-gpu-check",
        action="store_true",
        help="treat GPU boxes as fitting without probing the host's GPUs (prints a warning)",
    )
    p.add_argument("--keep-download", action="store_true", help="keep the checked archive in the download cache")
    p.add_argument(
        "--no-share",
        action="store_true",
        help="keep every file of the box its own: no links to the copies other installed boxes share",
    )
    add_trust_options(p)
    p.set_defaults(handler=handler(InstallArgs, run))


def run(args: InstallArgs, console: Console, probes: HostProbes | None = None) -> int:
    box_id = checked_box_id(args.box)
    dest = checked_dest(args)
    if dest is None:  # --list
        listing = list_releases(
            store_location(args.store),
            box_id,
            version=args.version,
            target=args.target,
            pre=args.pre,
            skip_gpu_check=args.skip_gpu_check,
            endpoint_url=args.endpoint_url,
            probes=probes,
            progress=console.progress,
            share=not args.no_share,
            trusted_root=trusted_root_option(args.trusted_root),
            trust_state=args.trust_state,
        )
        console.result(list_json(listing), render_list(listing))
        return 0
    installed = install_box(
        store_location(args.store),
        box_id,
        dest,
        version=args.version,
        target=args.target,
        pre=args.pre,
        skip_gpu_check=args.skip_gpu_check,
        keep_download=args.keep_download,
        share=not args.no_share,
        endpoint_url=args.endpoint_url,
        probes=probes,
        progress=console.progress,
        meter=console.meter,
        on_gpu_check=lambda check: report_gpu(console, check),
        trusted_root=trusted_root_option(args.trusted_root),
        trust_state=args.trust_state,
    )
    data = installed.to_json()
    console.result(data, render_install(data))
    return 0


_BOX_ID = TypeAdapter(Identifier)


def checked_box_id(value: str) -> str:
    """--box by the recipe's boxId rule (recipe/fields.py, the one rule), before the store is asked: the id
    becomes the store key ``boxes/<boxId>/index.json``, so ``../../etc`` would name a file outside it."""
    try:
        return _BOX_ID.validate_python(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        rule, fix = error["msg"], (error.get("ctx") or {}).get("fix", "")
        raise UsageError(
            f"--box {value!r} is not a box id: {rule}",
            problems=(Problem(message=rule, key="--box", value=value),),
            fix=f"{fix}: --box takes the boxId of the box's recipe.json, the folder boxes/<boxId>/ of the store",
        ) from None


def checked_dest(args: InstallArgs) -> Path | None:
    """DEST as the command line gives it; None with --list (which takes no DEST)."""
    if args.list:
        if args.dest is not None:
            raise UsageError("--list installs nothing: drop DEST", fix="scrollcase install --list --store S --box B")
        return None
    if args.dest is None:
        raise UsageError("install needs DEST (the folder to install into)", fix="pass DEST, or --list")
    return args.dest


def render_install(data: dict[str, Any]) -> str:
    fetched = "taken from the download cache" if data["fromCache"] else f"downloaded {data['bytesDownloaded']} bytes"
    if data.get("framesFetched") is not None:
        plan = data["plan"]
        fetched += (
            f" ({data['framesFetched']} of {plan['frames']} frames; {plan['reusedBytes']} bytes of frames this "
            "machine held reused)"
        )
    resumed = f" (resumed at {data['resumedFrom']})" if data["resumedFrom"] else ""
    return (
        f"installed {data['boxId']} {data['version']} ({data['targetId']}) into {data['dest']} in "
        f"{data['seconds']:.1f}s: {fetched}{resumed}; sha256 {data['sha256']} verified; {data['files']} files, "
        f"{data['relocatedFiles']} relocated"
    )


def host_json(host: HostView) -> dict[str, object]:
    return {
        "platform": host.platform,
        "arch": host.arch,
        "gpus": [gpu.to_json() for gpu in host.gpus.gpus],
        "gpuError": host.gpus.error,
    }


def list_json(listing: Listing) -> dict[str, object]:
    chosen = listing.selection.chosen
    return {
        "boxId": listing.box_id,
        "store": listing.store,
        "host": host_json(listing.host),
        "selected": {"version": chosen.version, "targetId": chosen.target_id} if chosen else None,
        "plan": listing.plan.to_json() if listing.plan else None,
        "releases": [c.to_json() for c in listing.selection.candidates],
    }


def render_list(listing: Listing) -> str:
    host, selection = listing.host, listing.selection
    gpus = "; ".join(g.label() for g in host.gpus.gpus) or host.gpus.error or "GPUs not asked"
    lines = [f"{listing.box_id} in {listing.store} (this machine: {host.platform}-{host.arch}; {gpus})"]
    for c in selection.candidates:
        mark = "*" if c is selection.chosen else " "
        verdict = "fits" if c.fits else "does not fit: " + "; ".join(c.reasons)
        lines.append(f"{mark} {c.version:<14} {c.target_id:<26} {verdict}")
    if not selection.candidates:
        lines.append("  (no releases)")
    lines.append(
        f"install would choose {selection.chosen.version} {selection.chosen.target_id}"
        if selection.chosen
        else "no release fits this machine"
    )
    if listing.plan is not None:
        lines.append(render_plan(listing.plan))
    return "\n".join(lines)


def render_plan(plan: Figures) -> str:
    """What installing the chosen release would download and add to the disk."""
    disk = f"{plan.disk_bytes} bytes" if plan.disk_bytes is not None else "an unknown size (no frame table)"
    reused = f", {plan.reused_bytes} bytes this machine holds reused" if plan.reused_bytes else ""
    frames = f" ({plan.frames_missing} of {plan.frames} frames{reused})" if plan.how == "frames" else reused
    return (
        f"it would download {plan.download_bytes} bytes{frames} and add {disk} to the disk "
        f"(and {plan.frame_cache_bytes} bytes to the frame cache)"
    )
