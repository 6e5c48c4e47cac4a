"""Extracting a tar stream into a folder, every member checked before it touches the disk.

The rules (see :mod:`scrollcase.format.paths`): no absolute names, ``..``, backslashes or drive letters,
no devices/FIFOs, no duplicates, no case-insensitive collisions (Windows, macOS), hardlinks only to
earlier regular files, nothing written through a symlink, and :class:`Limits` on member count, total
bytes and compression ratio checked against the *declared* size before the data is written.  A broken
rule is a :class:`Reject` naming the member; :mod:`scrollcase.format.archive.unpack` turns it into an
IntegrityError and removes the half-made folder.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field

from scrollcase.errors import BuildError
from scrollcase.format import paths
from scrollcase.format.archive.tar import (
    BLOCK,
    META_KINDS,
    ChunkReader,
    Header,
    TarFormatError,
    parse_header,
    read_meta,
)

_MAX_TRAILER = 1 << 20  # after the end-of-archive marker: record padding (GNU tar: < 10 KiB)


def create_flags(platform: object = os) -> int:
    """How a member's file is opened.  O_EXCL: never reuse or follow an existing path (a duplicate or a
    planted symlink fails loudly); O_BINARY (Windows) and O_NOFOLLOW where ``platform``'s os module has them."""
    extra: int = getattr(platform, "O_BINARY", 0) | getattr(platform, "O_NOFOLLOW", 0)
    return os.O_WRONLY | os.O_CREAT | os.O_EXCL | extra


def windows_names_default(platform: str = sys.platform) -> bool:
    """Windows' own name rules (device names, illegal characters) hold where the box is unpacked on Windows."""
    return platform == "win32"


_CREATE_FLAGS = create_flags()


@dataclass(frozen=True)
class Limits:
    """What an archive may unpack to; beyond any of these it is treated as a decompression bomb."""

    max_total_bytes: int = 512 << 30
    max_members: int = 1_000_000  # CUDA + torch environments have ~100k; each name costs memory
    max_ratio: float = 200.0  # uncompressed / compressed; conda environments are ~3-6
    ratio_floor: int = 64 << 20  # small archives may exceed the ratio (headers of empty files)
    case_insensitive: bool = paths.case_insensitive_default()
    windows_names: bool = windows_names_default()  # reserved device names, illegal characters


DEFAULT_LIMITS = Limits()


class Reject(Exception):  # noqa: N818 - internal signal, becomes IntegrityError
    def __init__(self, member: str, rule: str) -> None:
        super().__init__(rule)
        self.member = member
        self.rule = rule


@dataclass
class Extractor:
    """Writes members under ``base`` after checking each one; knows every name written so far."""

    base: str
    limits: Limits
    budget: int  # most uncompressed bytes allowed (limits + ratio)
    kinds: dict[str, str] = field(default_factory=dict)  # name -> dir|implicit|file|symlink
    folded: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    files: int = 0
    entries: int = 0
    declared: int = 0

    def disk(self, name: str) -> str:
        return paths.native_path(self.base, name)

    def admit(self, header: Header, name: str) -> str:
        """Checks that do not depend on the member's type; returns the normalised name."""
        try:
            norm = paths.normalise_member(name)
            if self.limits.windows_names:
                paths.check_windows_name(norm)
        except paths.UnsafePath as exc:
            raise Reject(name, exc.rule) from None
        self.entries += 1
        if self.entries > self.limits.max_members:
            raise Reject(norm, f"more than {self.limits.max_members} members (limit)")
        self.declared += header.size + BLOCK
        if self.declared > self.budget:
            raise Reject(
                norm,
                f"unpacked size would exceed {self.budget} bytes "
                "(total-size or compression-ratio limit: a decompression bomb?)",
            )
        previous = self.kinds.get(norm)
        if previous is not None and not (previous == "implicit" and header.kind == "dir"):
            raise Reject(norm, "duplicate member (the same name appears twice)")
        self._case_unique(norm, norm)
        self._parent_ready(norm, paths.parent_of(norm))
        return norm

    def _case_unique(self, member: str, name: str) -> None:
        """Where case is ignored, ``name`` (the member or a folder it implies) must not fold onto another name."""
        if self.limits.case_insensitive:
            other = self.folded.setdefault(paths.casefold_key(name), name)
            if other != name:
                raise Reject(member, f"collides with {other} on a case-insensitive filesystem")

    def _parent_ready(self, member: str, parent: str) -> None:
        if not parent:
            return
        kind = self.kinds.get(parent)
        if kind in ("dir", "implicit"):
            return
        if kind is not None:
            raise Reject(member, f"path goes through {parent}, which is a {kind}, not a directory")
        self._parent_ready(member, paths.parent_of(parent))
        self._case_unique(member, parent)
        os.mkdir(self.disk(parent), 0o755)  # noqa: PTH102 - hot path: str paths, no Path per member
        self.kinds[parent] = "implicit"

    def directory(self, name: str) -> None:
        if self.kinds.get(name) != "implicit":
            os.mkdir(self.disk(name), 0o755)  # noqa: PTH102
        self.kinds[name] = "dir"

    def regular(self, name: str, header: Header, reader: ChunkReader) -> None:
        mode = 0o755 if header.mode & 0o111 else 0o644
        fd = os.open(self.disk(name), _CREATE_FLAGS, mode)
        try:
            for piece in reader.slices(header.size):
                while piece:
                    piece = piece[os.write(fd, piece) :]
        finally:
            os.close(fd)
        self.kinds[name] = "file"
        self.files += 1

    def symlink(self, name: str, target: str) -> None:
        try:
            paths.check_link_target(target)
        except paths.UnsafePath as exc:
            raise Reject(name, exc.rule) from None
        self.links[name] = target
        try:
            os.symlink(target, self.disk(name))  # noqa: PTH211
        except OSError as exc:  # Windows without the symlink privilege
            raise BuildError(
                f"cannot create symlink {name}: {exc.strerror}",
                fix="on Windows enable Developer Mode (symlink privilege)",
            ) from None
        self.kinds[name] = "symlink"

    def hardlink(self, name: str, target: str) -> None:
        try:
            source = paths.normalise_member(target)
        except paths.UnsafePath as exc:
            raise Reject(name, f"hardlink target: {exc.rule}") from None
        if self.kinds.get(source) != "file":
            raise Reject(name, f"hardlink target {target} is not an earlier regular file of the archive")
        try:
            os.link(self.disk(source), self.disk(name))
        except OSError:
            shutil.copyfile(self.disk(source), self.disk(name))
            shutil.copymode(self.disk(source), self.disk(name))
        self.kinds[name] = "file"
        self.files += 1


def extract_all(reader: ChunkReader, ex: Extractor) -> None:
    """Parse the tar stream and extract every member; stops at the end-of-archive blocks."""
    pending: dict[str, str] = {}
    while True:
        block = reader.read_header_block()
        if block is None:
            reader.drain(_MAX_TRAILER)  # the second zero block and the record padding
            return
        if reader.consumed > ex.budget:  # counts extended headers too, not only member data
            raise Reject(
                pending.get("path", "?"),
                f"unpacked size exceeds {ex.budget} bytes (total-size or compression-ratio limit)",
            )
        header = parse_header(block)
        if header.kind in META_KINDS:
            read_meta(header, reader, pending)
            continue
        _member(_apply(header, pending), reader, ex)
        pending = {}


def _apply(header: Header, pending: dict[str, str]) -> Header:
    if not pending:
        return header
    size = header.size
    if "size" in pending:
        try:
            size = int(pending["size"])
        except ValueError:
            raise TarFormatError("bad pax size record") from None
    return Header(
        pending.get("path", header.name), header.kind, header.mode, size, pending.get("linkpath", header.link)
    )


def _member(header: Header, reader: ChunkReader, ex: Extractor) -> None:
    if header.kind in ("device", "fifo") or header.kind.startswith("other"):
        raise Reject(
            header.name, f"member type {header.kind} is not allowed (only files, directories, symlinks and hardlinks)"
        )
    name = ex.admit(header, header.name)
    if header.kind == "file":
        ex.regular(name, header, reader)
        reader.skip(-header.size % BLOCK)
        return
    if header.size and header.kind != "dir":
        raise Reject(name, f"{header.kind} member carries data")
    reader.skip(header.size + (-header.size % BLOCK))
    if header.kind == "dir":
        ex.directory(name)
    elif header.kind == "symlink":
        ex.symlink(name, header.link)
    else:
        ex.hardlink(name, header.link)
