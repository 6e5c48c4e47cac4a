"""A cache of unpacked, checked wheels, so that a rebuild links files instead of inflating them again.

An entry is one wheel (keyed by the sha256 the lock pins for it) unpacked once: every member
inflated and checked against the wheel's ``RECORD`` exactly as a direct install checks it
(:class:`~scrollcase.wheels.checked.CheckedWheel`), stored under ``files/``, and described by
``entry.json`` — the members in the wheel's order with their ``RECORD`` rows, executable bits and
the size and mtime each file had when it was stored.  The entry appears by one rename of a
pid-named folder, so a killed fill leaves no half-entry, only a temp folder the next fill removes.

Using an entry checks every file's size and mtime against ``entry.json`` first (a stat, no reading).
A file changed in place — through a hard link in a box tree someone kept and edited — changes its
mtime, so the entry is thrown away and the wheel is fetched and unpacked again, never trusted.
pypa/installer still lays the files out from the entry (:class:`CachedWheel` is a ``WheelSource``),
so the installed tree, ``RECORD`` included, is the one a direct install writes, byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import zipfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple, TypeVar, cast

from installer import install
from installer.sources import WheelContentElement, WheelSource
from pydantic import BaseModel, ConfigDict, ValidationError

from scrollcase.io.cache import UNPACKED_CACHE
from scrollcase.io.files import creating_dir
from scrollcase.io.proc import usable_cores
from scrollcase.wheels import checked
from scrollcase.wheels import install as wheelinstall

ENTRY_FILE = "entry.json"
LAYOUT_FILE = "layout.json"
FILES = "files"
LAYOUTS = "layouts"
REPLAY_CHUNK = 2048  # links per thread task


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CachedMember(NamedTuple):
    """One member: its ``RECORD`` row, executable bit, and the file's size and mtime once stored.
    (Tuples, not models: an entry lists 10,000s of them, and a tuple validates 2.5x faster.)"""

    path: str
    hash: str
    recordSize: str
    executable: bool
    size: int
    mtimeNs: int

    @property
    def row(self) -> tuple[str, str, str]:
        return self.path, self.hash, self.recordSize


class CacheEntry(_Model):
    schemaVersion: Literal[1] = 1
    wheel: str
    sha256: str
    wheelSize: int
    distribution: str
    version: str
    distInfoDir: str
    dataDir: str
    members: tuple[CachedMember, ...]


class PlacedFile(NamedTuple):
    """One file of an install into a layout: target relative to the environment, source relative to
    the entry (a member under ``files/``, or a generated file under ``layouts/<key>/files/``)."""

    target: str
    source: str
    identity: str | None
    size: int
    mtimeNs: int


class InstallLayout(_Model):
    schemaVersion: Literal[1] = 1
    files: tuple[PlacedFile, ...]


class CachedWheel(WheelSource):
    """An entry as a wheel for pypa/installer: the same members, rows and order as the wheel."""

    def __init__(self, root: Path, entry: CacheEntry) -> None:
        super().__init__(entry.distribution, entry.version)
        self.root, self.entry = root, entry
        self.name, self.size = entry.wheel, entry.wheelSize

    def __str__(self) -> str:  # errors name the entry, as they name a wheel file
        return str(self.root)

    def install_into(self, job: wheelinstall.Job) -> None:
        """Replay the links of an earlier install into this layout, or install with pypa/installer
        (linking the members) and note what it placed for the next time."""
        layout = self._layout(job.layout_key)
        if layout is not None:
            self._replay(layout, job)
            return
        destination = wheelinstall.RecordingDestination(job, self.name)
        install(source=self, destination=destination, additional_metadata=wheelinstall.INSTALLER_METADATA)
        with contextlib.suppress(OSError):  # only a shortcut for next time: the install itself is complete
            self._save_layout(job, destination.placed)

    def _replay(self, layout: InstallLayout, job: wheelinstall.Job) -> None:
        """Claim every target, make the folders, then link, all in threads: ``mkdir`` and ``link``
        release the GIL, and one wheel (torch) holds most of a box's files and folders."""
        root, env = str(self.root), job.env
        targets = [os.path.join(env, _relative(placed.target)) for placed in layout.files]  # noqa: PTH118
        claimed = job.claims.claim_all(self.name, [(t, p.identity) for t, p in zip(targets, layout.files, strict=True)])
        links = [
            (os.path.join(root, placed.source), target)  # noqa: PTH118
            for placed, target, mine in zip(layout.files, targets, claimed, strict=True)
            if mine
        ]
        folders = {os.path.dirname(target) for _, target in links}  # noqa: PTH120
        chunks = [links[i : i + REPLAY_CHUNK] for i in range(0, len(links), REPLAY_CHUNK)]
        if len(chunks) <= 1:
            job.folders.make_all(folders, env, None)
            _place(job, links)
            return
        with ThreadPoolExecutor(max_workers=usable_cores(), thread_name_prefix="scrollcase-link") as pool:
            job.folders.make_all(folders, env, pool)
            for done in [pool.submit(_place, job, chunk) for chunk in chunks]:
                done.result()

    def _layout(self, key: str) -> InstallLayout | None:
        folder = self.root / LAYOUTS / key
        try:
            layout = _parsed(folder / LAYOUT_FILE, InstallLayout)
        except FileNotFoundError:
            return None
        root = str(self.root)
        if layout is None or any(
            _changed(os.path.join(root, f.source), f.size, f.mtimeNs)  # noqa: PTH118
            for f in layout.files
            if f.source.startswith(LAYOUTS)
        ):
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return layout

    def _save_layout(self, job: wheelinstall.Job, placed: Sequence[wheelinstall.Placed]) -> None:
        with creating_dir(self.root / LAYOUTS / job.layout_key, LAYOUT_FILE) as temp:
            files = [self._keep(job, item, temp, n) for n, item in enumerate(placed)]
            (temp / LAYOUT_FILE).write_text(InstallLayout(files=tuple(files)).model_dump_json(), encoding="utf-8")

    def _keep(self, job: wheelinstall.Job, item: wheelinstall.Placed, temp: Path, n: int) -> PlacedFile:
        """A placed file as the layout lists it; a generated one is copied into the entry."""
        if item.source is not None:
            source = self.root / Path(item.source).relative_to(self.root)
        else:
            source = temp / FILES / str(n)
            source.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(job.env) / item.target, source)
            shutil.copymode(Path(job.env) / item.target, source)
        st = source.stat()
        where = (
            source.relative_to(self.root) if item.source is not None else Path(LAYOUTS, job.layout_key, FILES, str(n))
        )
        return PlacedFile(
            target=item.target, source=where.as_posix(), identity=item.identity, size=st.st_size, mtimeNs=st.st_mtime_ns
        )

    @property
    def dist_info_dir(self) -> str:
        return self.entry.distInfoDir

    @property
    def data_dir(self) -> str:
        return self.entry.dataDir

    @property
    def dist_info_filenames(self) -> list[str]:
        prefix = self.dist_info_dir + "/"
        return [m.path[len(prefix) :] for m in self.entry.members if m.path.startswith(prefix)]

    def read_dist_info(self, filename: str) -> str:
        return self._file(f"{self.dist_info_dir}/{filename}").read_text(encoding="utf-8")

    def validate_record(self) -> None:
        """Checked when the entry was filled (every member against RECORD)."""

    def get_contents(self) -> Iterator[WheelContentElement]:
        files = str(self.root / FILES)
        for member in self.entry.members:
            path, digest, size = member.row
            name, _, value = digest.partition("=")
            if not value or not size:  # RECORD itself, signatures: no hash to link by
                with (self.root / FILES / path).open("rb") as raw:
                    yield member.row, raw, member.executable
                continue
            linked = checked.LinkedMember(os.path.join(files, path), name, value, int(size))  # noqa: PTH118
            try:
                yield member.row, cast(BinaryIO, linked), member.executable
            finally:
                linked.close()

    def _file(self, member: str) -> Path:
        return self.root / FILES / member

    def stale_member(self) -> str | None:
        """The first member whose stored file is missing or changed since it was stored, if any."""
        files = str(self.root / FILES)
        for member in self.entry.members:
            if _changed(os.path.join(files, member.path), member.size, member.mtimeNs):  # noqa: PTH118
                return member.path
        return None


class WheelCache:
    """Entries under ``root/<wheel sha256>/``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def load(self, sha256: str) -> CachedWheel | None:
        """The entry for this wheel if it is complete and unchanged; a damaged one is removed."""
        folder = UNPACKED_CACHE.entry(self.root, sha256)
        try:
            entry = _parsed(folder / ENTRY_FILE, CacheEntry)
        except FileNotFoundError:
            return None
        cached = CachedWheel(folder, entry) if entry is not None and entry.sha256 == sha256 else None
        if cached is None or cached.stale_member() is not None:
            shutil.rmtree(folder, ignore_errors=True)  # never trusted: unpacked again from the wheel
            return None
        UNPACKED_CACHE.touch(folder)  # used: an age prune (`scrollcase cache prune`) keeps it
        return cached

    def load_all(self, sha256s: Sequence[str], workers: int | None = None) -> dict[str, CachedWheel]:
        """:meth:`load` for many entries at once, in threads (checking an entry is 1,000s of ``stat`` calls,
        which release the GIL); the entries found, by sha256."""
        with ThreadPoolExecutor(max_workers=workers or usable_cores(), thread_name_prefix="scrollcase-cache") as pool:
            loaded = dict(zip(sha256s, pool.map(self.load, sha256s), strict=True))
        return {sha: cached for sha, cached in loaded.items() if cached is not None}

    def fill(self, wheel: Path, sha256: str, cancel: threading.Event, umask: int) -> CachedWheel:
        """Unpack ``wheel`` (already checked against the lock's ``sha256``) into a new entry."""
        with creating_dir(UNPACKED_CACHE.entry(self.root, sha256), ENTRY_FILE) as temp:
            entry = _unpack_checked(wheel, sha256, temp / FILES, cancel, umask)
            (temp / ENTRY_FILE).write_text(entry.model_dump_json(), encoding="utf-8")
        cached = self.load(sha256)
        if cached is None:
            raise OSError(f"the unpacked wheel cache entry {self.root / sha256} vanished while it was used")
        return cached


def _relative(target: str) -> str:
    """A layout's target, refused unless it stays inside the environment (a layout file is data:
    a damaged or planted one must not link outside).  Cheaper than normalising: a wheel's paths were
    normalised when the layout was recorded, so any ``..``, root, drive or backslash is foreign."""
    if target.startswith("/") or "\\" in target or ":" in target or ".." in target.split("/"):
        raise ValueError(f"Attempting to write {target} outside of the target directory")
    return target


def _place(job: wheelinstall.Job, links: Sequence[tuple[str, str]]) -> None:
    for source, target in links:
        if job.cancel.is_set():
            raise checked.CancelledInstallError
        job.linker.place(source, target)


def _changed(path: str, size: int, mtime_ns: int) -> bool:
    """A stored file missing, or edited since it was stored (through a hard link into some box)."""
    try:
        st = os.stat(path)  # noqa: PTH116 - 10,000s of files: no Path objects
    except OSError:
        return True
    return st.st_size != size or st.st_mtime_ns != mtime_ns


_Record = TypeVar("_Record", bound=BaseModel)


def _parsed(path: Path, model: type[_Record]) -> _Record | None:
    """The record in ``path``; None when it is damaged (never trusted); FileNotFoundError when absent."""
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise
    except (OSError, ValidationError, ValueError):
        return None


def _unpack_checked(wheel: Path, sha256: str, files: Path, cancel: threading.Event, umask: int) -> CacheEntry:
    members: list[CachedMember] = []
    with zipfile.ZipFile(wheel) as archive:
        source = checked.CheckedWheel(archive, cancel)
        source.validate_record(validate_contents=False)
        for row, stream, executable in source.get_contents():
            target = wheelinstall.inside(str(files), row[0])
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("xb") as out:
                while chunk := stream.read(checked.CHUNK):
                    out.write(chunk)
            if executable:
                target.chmod(0o777 & ~umask | 0o111)
            st = target.stat()
            members.append(CachedMember(*row, executable=executable, size=st.st_size, mtimeNs=st.st_mtime_ns))
        return CacheEntry(
            wheel=wheel.name,
            sha256=sha256,
            wheelSize=wheel.stat().st_size,
            distribution=source.distribution,
            version=source.version,
            distInfoDir=source.dist_info_dir,
            dataDir=source.data_dir,
            members=tuple(members),
        )


def fill_all(
    cache: WheelCache,
    wheels: Sequence[tuple[Path, str]],
    *,
    workers: int | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> dict[str, CachedWheel]:
    """Unpack the (wheel, sha256) pairs into ``cache`` side by side, biggest first (as installs run);
    the first failure cancels the others and is raised as the scrollcase error a direct install gives."""
    cancel, umask, filled = threading.Event(), wheelinstall.current_umask(), {}

    def fill_one(item: tuple[Path, str]) -> None:
        wheel, sha256 = item
        if cancel.is_set():
            raise checked.CancelledInstallError
        try:
            filled[sha256] = cache.fill(wheel, sha256, cancel, umask)
        except checked.CancelledInstallError:
            raise
        except BaseException as exc:
            cancel.set()
            raise wheelinstall.wheel_error(wheel, exc) from None
        if on_bytes is not None:
            on_bytes(wheel.stat().st_size)

    wheelinstall.run_all(wheels, fill_one, lambda item: item[0].stat().st_size, cancel, workers or usable_cores())
    return filled
