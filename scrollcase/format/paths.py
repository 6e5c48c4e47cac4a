"""Pure rules for paths inside a box archive: member names and symlink targets.

Shared by the packer (refuse to write what the unpacker would refuse) and the unpacker (refuse
hostile archives).  Everything here works on names in memory, never on the disk: the archive's own
view of which names are symlinks is the only thing a symlink can be resolved through, so the checks
cost a dictionary lookup instead of a ``realpath`` per member.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

# A Windows drive ("C:", "c:foo") or a UNC/device prefix makes a name absolute on some platform.
_DRIVE = re.compile(r"^[A-Za-z]:")
# Hops allowed while following symlinks inside the archive (Linux's own limit is 40).
MAX_LINK_HOPS = 40


class UnsafePath(ValueError):  # noqa: N818 - a rule violation, turned into IntegrityError by callers
    """A name breaks one rule; ``rule`` is the short human name of that rule."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def normalise_member(name: str) -> str:
    """The canonical relative POSIX form of an archive member name, or :class:`UnsafePath`.

    ``./a//b/`` becomes ``a/b``.  Absolute names, ``..`` components, backslashes, drive letters
    and NUL bytes are refused rather than "fixed": an archive that contains them was not made by
    scrollcase and is not trusted.
    """
    if not name or "\x00" in name:
        raise UnsafePath("empty name or NUL byte in the name")
    if "\\" in name:
        raise UnsafePath("backslash in the name (a Windows path separator)")
    if name.startswith("/"):
        raise UnsafePath("absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if parts and _DRIVE.match(parts[0]):  # the first real component: "./c:x" is "c:x"
        raise UnsafePath("drive letter in the name")
    if ".." in parts:
        raise UnsafePath("'..' component (path traversal)")
    if not parts:
        raise UnsafePath("name refers to the archive root itself")
    return "/".join(parts)


def parent_of(name: str) -> str:
    """``a/b/c`` -> ``a/b``; a top-level name -> ``""`` (the root)."""
    cut = name.rfind("/")
    return name[:cut] if cut >= 0 else ""


def check_link_target(target: str) -> None:
    """Refuse symlink targets that are absolute on any platform (POSIX, drive letter, UNC)."""
    if not target or "\x00" in target:
        raise UnsafePath("empty symlink target or NUL byte in it")
    if target.startswith(("/", "\\")) or _DRIVE.match(target):
        raise UnsafePath("symlink target is an absolute path")
    if "\\" in target:
        raise UnsafePath("backslash in the symlink target")


def resolve_link(link: str, links: Mapping[str, str]) -> str:
    """Where symlink ``link`` points, as a root-relative name, following the archive's own links.

    ``links`` maps every symlink member name to its target.  Raises :class:`UnsafePath` when the
    walk leaves the root at any step (even if a later ``..`` would come back) or loops.
    """
    todo = _split(links[link])
    done = _split(parent_of(link))
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            if not done:
                raise UnsafePath("symlink points outside the archive root")
            done.pop()
            continue
        done.append(part)
        here = "/".join(done)
        if here in links:
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise UnsafePath("symlink loop (more than 40 hops)")
            check_link_target(links[here])
            done.pop()
            todo = _split(links[here]) + todo
    return "/".join(done)


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def escaping_link(links: Mapping[str, str]) -> tuple[str, str] | None:
    """The first symlink (sorted) that does not resolve inside the root, with the rule it breaks."""
    for link in sorted(links):
        try:
            resolve_link(link, links)
        except UnsafePath as exc:
            return link, exc.rule
    return None


_WINDOWS_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"] + [f"{d}{i}" for d in ("COM", "LPT") for i in range(10)]
)
_WINDOWS_BAD_CHARS = re.compile(r'[<>:"|?*\x00-\x1f]')


def check_windows_name(name: str) -> None:
    """Refuse names Windows cannot store or maps to devices (``aux.py``, ``con``, ``a:b``, ``x.``)."""
    for part in name.split("/"):
        if part.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_DEVICES:
            raise UnsafePath(f"{part!r} is a reserved device name on Windows")
        if _WINDOWS_BAD_CHARS.search(part):
            raise UnsafePath(f"{part!r} contains a character Windows does not allow in names")
        if part.endswith((".", " ")):
            raise UnsafePath(f"{part!r} ends with a dot or space, which Windows drops")


def native_path(base: str, name: str, sep: str | None = None) -> str:
    """``base`` (ending in ``sep``, the platform's ``os.sep`` unless given) joined with the POSIX member
    ``name`` in the platform's form."""
    sep = os.sep if sep is None else sep  # looked up per call, not frozen when the module loads
    return base + (name if sep == "/" else name.replace("/", sep))


def case_insensitive_default(platform: str = sys.platform) -> bool:
    """Windows and macOS filesystems ignore case by default: two names differing only in case collide."""
    return platform in ("win32", "darwin")


def casefold_key(name: str) -> str:
    """The key under which two names collide on a case-insensitive filesystem (Windows, macOS)."""
    return name.casefold()
