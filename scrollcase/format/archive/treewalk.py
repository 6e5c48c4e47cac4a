"""Walking a box tree in archive order (reads the tree, writes nothing).

Entries come sorted by name at every level, depth first, lazily.  Where the platform can open relative
to a directory descriptor, the walk does (:class:`FdTree`): no path lookup from the root for each of
the 700+ directories of an env, and a directory swapped for a symlink mid-walk is not followed.
Elsewhere (Windows has no ``dir_fd``) directories are handled by path (:class:`PathTree`).  Both yield
the same entries.  The packer, which reorders members into units, measures and opens each file later
by its member name (:class:`TreeFiles`).
"""

from __future__ import annotations

import operator
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

from scrollcase.errors import BuildError, describe_path
from scrollcase.format import paths

H = TypeVar("H", int, str)  # a directory handle: a descriptor (FdTree) or a path (PathTree)
T = TypeVar("T")

# O_NONBLOCK: a FIFO swapped in after the walk must not hang the open; O_NOFOLLOW: nor a symlink.
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_FD_WALK = (
    os.open in os.supports_dir_fd
    and os.scandir in os.supports_fd
    and os.readlink in os.supports_dir_fd
    and hasattr(os, "O_DIRECTORY")
)


class Entry(NamedTuple):
    """One member to write: its archive name, kind, and where it lies.

    ``dir_fd`` is the open descriptor of its directory (only valid while the walk is inside that
    directory) and ``path`` its base name, or ``dir_fd`` is None and ``path`` the full path.
    """

    name: str
    kind: str  # "dir" | "file" | "symlink"
    dir_fd: int | None
    path: str
    link: str = ""


class TreeFiles:
    """The files below a root, measured and opened by their member names once the walk is done.

    Relative to the root's descriptor where the platform has them: the kernel looks up the few components
    below the root, not the whole path from ``/`` (a third of an ``lstat``'s time, 33,000 times in an env);
    elsewhere by full path.  A file is opened ``O_NOFOLLOW | O_NONBLOCK``: a symlink swapped in since the
    walk saw it is not followed, a FIFO not waited on.  Close it (a context manager) when done.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self._fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if _FD_WALK else None

    def path(self, name: str) -> str:
        return paths.native_path(f"{self.root}{os.sep}", name)

    def lstat(self, name: str) -> os.stat_result:
        if self._fd is None:
            return os.lstat(self.path(name))
        return os.stat(name, dir_fd=self._fd, follow_symlinks=False)

    def open(self, name: str) -> int:
        if self._fd is None:
            return os.open(self.path(name), _FILE_FLAGS)
        return os.open(name, _FILE_FLAGS, dir_fd=self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TreeFiles:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class DirTree(ABC, Generic[H]):
    """How a walk opens, lists and closes directories; ``H`` is the kind of directory handle."""

    def __init__(self, root: str) -> None:
        self.root = root

    def shown(self, name: str) -> str:
        """A member's path on disk, for messages."""
        return f"{self.root}{os.sep}{name}"

    def read_error(self, name: str, exc: OSError) -> BuildError:
        where = self.shown(name) if name else describe_path(self.root)
        return BuildError(
            f"cannot read {where}: {exc.strerror}",
            fix="check permissions, and do not modify the box tree while packing it",
        )

    @abstractmethod
    def open_root(self) -> H: ...

    @abstractmethod
    def open_dir(self, where: H, base: str) -> H: ...

    @abstractmethod
    def close_dir(self, handle: H) -> None: ...

    @abstractmethod
    def scan(self, handle: H) -> list[os.DirEntry[str]]: ...

    @abstractmethod
    def readlink(self, where: H, base: str) -> str: ...

    @abstractmethod
    def locate(self, where: H, base: str) -> tuple[int | None, str]:
        """``(dir_fd, path)`` of an :class:`Entry` for member ``base`` of directory ``where``."""

    def entries(self) -> Generator[Entry, None, None]:
        """Every member below the root, in archive order."""
        handle = self.call("", self.open_root)
        try:
            yield from _walk(self, handle)
        finally:
            self.close_dir(handle)

    def call(self, name: str, call: Callable[..., T], *args: object) -> T:
        """``call(*args)``, with an OSError turned into a BuildError naming the member ``name``."""
        try:
            return call(*args)
        except OSError as exc:
            raise self.read_error(name, exc) from None


class FdTree(DirTree[int]):
    """Opens relative to directory descriptors."""

    def open_root(self) -> int:
        # Followed if the root itself is a symlink (as before), unlike anything below it.
        return os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))

    def open_dir(self, where: int, base: str) -> int:
        return os.open(base, _DIR_FLAGS, dir_fd=where)

    def close_dir(self, handle: int) -> None:
        os.close(handle)

    def scan(self, handle: int) -> list[os.DirEntry[str]]:
        with os.scandir(handle) as it:
            return sorted(it, key=_by_name)

    def readlink(self, where: int, base: str) -> str:
        return os.readlink(base, dir_fd=where)

    def locate(self, where: int, base: str) -> tuple[int | None, str]:
        return where, base


class PathTree(DirTree[str]):
    """The portable fallback: directories are handled by path."""

    def open_root(self) -> str:
        return self.root

    def open_dir(self, where: str, base: str) -> str:
        return f"{where}{os.sep}{base}"

    def close_dir(self, handle: str) -> None:
        pass

    def scan(self, handle: str) -> list[os.DirEntry[str]]:
        with os.scandir(handle) as it:
            return sorted(it, key=_by_name)

    def readlink(self, where: str, base: str) -> str:
        return os.readlink(f"{where}{os.sep}{base}")  # noqa: PTH115 - str in, str out, 30,000 times

    def locate(self, where: str, base: str) -> tuple[int | None, str]:
        return None, f"{where}{os.sep}{base}"


_by_name = operator.attrgetter("name")  # a C-level sort key: 700 directories, 33,000 entries


def make_tree(root: Path) -> FdTree | PathTree:
    return FdTree(str(root)) if _FD_WALK else PathTree(str(root))


def iter_entries(root: Path, tree: FdTree | PathTree) -> Generator[Entry, None, None]:
    """The members of ``root`` (opened through ``tree``) in archive order, read lazily."""
    if not root.is_dir():
        raise BuildError(
            f"cannot pack {describe_path(root)}: not a directory", fix="pass the folder of the box tree to pack"
        )
    yield from tree.entries()


def check_links(root: Path, entries: Iterable[Entry]) -> None:
    """Refuse symlinks that escape the tree, also through chains of links."""
    links = {e.name: e.link for e in entries if e.kind == "symlink"}
    bad = paths.escaping_link(links)
    if bad is not None:
        raise BuildError(
            f"cannot pack {describe_path(root)}: symlink {bad[0]} -> {links[bad[0]]}: {bad[1]}",
            fix="make the link relative and pointing inside the box, or remove it",
        )


def _walk(tree: DirTree[H], root: H) -> Iterator[Entry]:
    """Depth first, sorted by name at every level.  A stack instead of recursion: nested generators
    would pass each of the 30,000+ entries up through every level of the tree."""
    stack = [(root, iter(tree.call("", tree.scan, root)), "")]
    locate = tree.locate
    try:
        while stack:
            handle, children, prefix = stack[-1]
            for child in children:  # left for a subdirectory, resumed when it is done
                name = prefix + child.name
                if child.is_file(follow_symlinks=False):  # most members: one check
                    yield Entry(name, "file", *locate(handle, child.name))
                elif child.is_dir(follow_symlinks=False):
                    yield Entry(name, "dir", *locate(handle, child.name))
                    sub = tree.call(name, tree.open_dir, handle, child.name)
                    stack.append((sub, iter(_scan_or_close(tree, name, sub)), name + "/"))
                    break
                elif child.is_symlink():
                    target = tree.call(name, tree.readlink, handle, child.name)
                    yield _symlink_entry(tree, name, locate(handle, child.name), target)
                else:
                    raise BuildError(
                        f"cannot pack {tree.shown(name)}: not a regular file, directory or "
                        "symlink (device, FIFO or socket)",
                        fix="remove it from the box tree",
                    )
            else:
                stack.pop()
                if stack:  # the caller opened the root and closes it
                    tree.close_dir(handle)
    finally:
        for handle, _, _ in stack[1:]:
            tree.close_dir(handle)


def _scan_or_close(tree: DirTree[H], name: str, handle: H) -> list[os.DirEntry[str]]:
    try:
        return tree.call(name, tree.scan, handle)
    except BuildError:
        tree.close_dir(handle)
        raise


def _symlink_entry(tree: DirTree[H], name: str, where: tuple[int | None, str], target: str) -> Entry:
    target = target.replace(os.sep, "/") if os.sep != "/" else target
    try:
        paths.check_link_target(target)
    except paths.UnsafePath as exc:
        raise BuildError(
            f"cannot pack symlink {tree.shown(name)} -> {target}: {exc.rule}",
            fix="make the link relative and pointing inside the box, or remove it",
        ) from None
    return Entry(name, "symlink", *where, target)
