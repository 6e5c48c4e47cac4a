"""``scrollcase cache dir|info|prune|clean [SECTION ...]``: the user cache, shown, pruned or emptied.

Builds and installs keep gigabytes there between runs (wheels, unpacked wheels, compressed frames,
bytecode, an installed release's frames).  Each cache is a :class:`~scrollcase.io.cache.ContentCache`
carrying its own rule for what stays; this command iterates :data:`~scrollcase.io.cache.CACHES` and asks
each to apply its rule now, or removes folders whole.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from scrollcase.client.framecache import FrameCache, Sharing, sharing
from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import UsageError
from scrollcase.io import cache as usercache
from scrollcase.io.cache import ContentCache, Freed, Usage
from scrollcase.io.files import user_cache_dir
from scrollcase.progress import human_bytes

NAME = "cache"
HELP = "show, prune or empty the user cache (wheels, unpacked wheels, frames, bytecode)"
ACTIONS = ("dir", "info", "prune", "clean")
DEFAULT_MAX_AGE_DAYS = 30.0
DESCRIPTION = (
    "dir: print the cache folder ($SCROLLCASE_CACHE_DIR, else the OS's user cache).  info: what each "
    "section holds (files, bytes, and the bytes also linked from boxes, which removing it does not free), and "
    "the frames installed boxes share (which boxes pin each: counts and bytes).  "
    "prune: remove what was not used for --older-than days (wheels, unpacked wheels, build frames, "
    "bytecode) and the frames no installed box uses.  clean: remove the named sections, or all of them; "
    "run it when no build or install is running.  Sections: "
    + ", ".join(f"{s.name} ({s.used_by}: {s.holds})" for s in usercache.CACHES)
)


@dataclass(frozen=True)
class CacheArgs(CommandArgs):
    action: str
    sections: tuple[str, ...]
    cache_dir: Path | None
    older_than: float


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("action", choices=ACTIONS, help="what to do")
    p.add_argument("sections", nargs="*", metavar="SECTION", help="the sections to act on (default: all)")
    p.add_argument("--cache-dir", type=Path, default=None, help="the cache folder (default: see `cache dir`)")
    p.add_argument(
        "--older-than",
        type=float,
        default=DEFAULT_MAX_AGE_DAYS,
        metavar="DAYS",
        help=f"prune: what was not used for this many days (default: {DEFAULT_MAX_AGE_DAYS:g})",
    )
    p.set_defaults(handler=handler(CacheArgs, run))


def chosen_sections(names: tuple[str, ...]) -> tuple[ContentCache, ...]:
    unknown = [name for name in names if name not in usercache.BY_NAME]
    if unknown:
        raise UsageError(
            f"no cache section named {', '.join(map(repr, unknown))}",
            fix=f"name sections among: {', '.join(usercache.BY_NAME)}",
        )
    return tuple(usercache.BY_NAME[name] for name in names) if names else usercache.CACHES


def run(args: CacheArgs, console: Console) -> int:
    root = args.cache_dir or user_cache_dir()
    sections = chosen_sections(args.sections)
    if args.action == "dir":
        console.result({"cacheDir": str(root)}, str(root))
    elif args.action == "info":
        used = usercache.usage(root, sections)
        data: dict[str, object] = {"cacheDir": str(root), "sections": [usage_json(u) for u in used]}
        text = render_usage(root, used)
        if usercache.FRAME_CACHE in sections:
            shared = sharing(FrameCache.default(root))
            data["frameSharing"] = sharing_json(shared)
            text += "\n" + render_sharing(shared)
        console.result(data, text)
    elif args.action == "prune":
        if args.older_than < 0:
            raise UsageError(f"--older-than must be 0 or more, not {args.older_than:g}", fix="pass --older-than 30")
        show_freed(console, root, "pruned", usercache.prune(root, sections, args.older_than))
    else:
        console.progress(f"removing {', '.join(s.name for s in sections)} from {root}")
        removed = usercache.clean(root, sections)
        show_freed(console, root, "removed", {u.section.name: Freed(u.files, u.freeable_bytes) for u in removed})
    return 0


def usage_json(u: Usage) -> dict[str, object]:
    return {
        "name": u.section.name,
        "usedBy": u.section.used_by,
        "holds": u.section.holds,
        "files": u.files,
        "bytes": u.bytes,
        "sharedBytes": u.shared_bytes,
    }


def render_usage(root: Path, used: list[Usage]) -> str:
    width = max(len(u.section.name) for u in used)
    lines = [f"{root}"]
    for u in used:
        shared = f", {human_bytes(u.shared_bytes)} also in boxes" if u.shared_bytes else ""
        lines.append(f"  {u.section.name:<{width}}  {human_bytes(u.bytes):>10}  {u.files} files{shared}")
    total = sum(u.bytes for u in used)
    freeable = sum(u.freeable_bytes for u in used)
    lines.append(f"  {'total':<{width}}  {human_bytes(total):>10}  ({human_bytes(freeable)} freed by `clean`)")
    return "\n".join(lines)


def sharing_json(shared: Sharing) -> dict[str, object]:
    """``cache info --json``'s ``frameSharing``: which installed boxes pin each shared frame."""
    return {
        "sharedFrames": len(shared.shared),
        "sharedBytes": sum(f.bytes for f in shared.shared),
        "savedBytes": shared.saved_bytes,
        "boxes": [
            {
                "dest": box.dest,
                "frames": box.frames,
                "bytes": box.bytes,
                "sharedFrames": box.shared_frames,
                "sharedBytes": box.shared_bytes,
            }
            for box in shared.boxes
        ],
        "frames": [{"sha256": f.sha256, "bytes": f.bytes, "boxes": list(f.dests)} for f in shared.shared],
    }


def render_sharing(shared: Sharing) -> str:
    if not shared.boxes:
        return "  frames shared by installed boxes: none (no installed box pins frames)"
    stored = human_bytes(sum(f.bytes for f in shared.shared))
    lines = [
        f"  frames shared by installed boxes: {len(shared.shared)} frames, {stored} stored once "
        f"({human_bytes(shared.saved_bytes)} not downloaded or stored again)"
    ]
    for box in shared.boxes:
        lines.append(
            f"    {box.dest}: {box.frames} frames, {human_bytes(box.bytes)}; {box.shared_frames} shared "
            f"({human_bytes(box.shared_bytes)})"
        )
    return "\n".join(lines)


def show_freed(console: Console, root: Path, verb: str, freed: dict[str, Freed]) -> None:
    data = {"cacheDir": str(root), verb: {name: {"entries": f.entries, "bytes": f.bytes} for name, f in freed.items()}}
    console.result(data, render_freed(root, verb, freed))


def render_freed(root: Path, verb: str, freed: dict[str, Freed]) -> str:
    lines = [f"{root}: {verb}"]
    lines += [f"  {name}: {f.entries} entries, {human_bytes(f.bytes)}" for name, f in freed.items()]
    total = sum(f.bytes for f in freed.values())
    lines.append(f"  total: {human_bytes(total)}")
    return "\n".join(lines)
