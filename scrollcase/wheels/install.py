"""Installing checked wheels into a box's environment: one pass per member, wheels in parallel threads.

pypa/installer lays the files out (schemes, ``.data`` folders, console scripts, the new ``RECORD`` and
``INSTALLER``), so the tree is exactly what ``installer.install`` writes.  What changes is how each
member gets there:

* **One pass.** A member is inflated once; the bytes are hashed as they are written, and at the member's
  end the hash and size are compared with the wheel's ``RECORD`` (:class:`CheckedMember`).  A mismatch
  is an :class:`~scrollcase.errors.IntegrityError` naming the wheel and the member, and the bad file is
  removed.  The same digest is the installed ``RECORD``'s entry, so nothing is hashed twice.  Names are
  checked up front (``validate_record(validate_contents=False)``: every member listed, with a hash and
  a size); members installer skips (``__pycache__``) are still read and checked.
* **Never an overwrite.** Files are created with ``O_EXCL``: a file that is already there (a conda
  package's, another wheel's) is a clash, whichever thread gets there first.  The one exception is a
  file two wheels both ship with the same ``RECORD`` sha256 and size (the CUDA library wheels all
  ship the same empty namespace ``__init__.py``): it is written once, each wheel's copy is still checked,
  and it appears in both ``RECORD`` files, as pip and uv leave it.
* **Threads.** zlib, hashing and file writes release the GIL, so independent wheels install side by
  side, biggest first.  The first failure cancels the others at their next read.  The umask is read
  once beforehand: installer's ``make_file_executable`` flips it process-wide, which is a race with
  threads.
"""

from __future__ import annotations

import errno
import functools
import io
import itertools
import os
import shutil
import threading
import zipfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal, Protocol, TypeVar

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.records import Hash, RecordEntry
from installer.scripts import Script
from installer.utils import Scheme, copyfileobj_with_hashing

from scrollcase.errors import BuildError, IntegrityError, Problem, ScrollcaseError
from scrollcase.format.layout import BoxLayout
from scrollcase.io.digest import sha256_text
from scrollcase.io.proc import usable_cores
from scrollcase.wheels.checked import (
    CHUNK,
    CancelledInstallError,
    CheckedMember,
    CheckedWheel,
    LinkedMember,
    MemberMismatchError,
)
from scrollcase.wheels.source import LauncherKind, plain_shebang, scheme_for, script_kind

if TYPE_CHECKING:
    from installer.scripts import ScriptSection


T = TypeVar("T")
INSTALLER_METADATA = {"INSTALLER": b"scrollcase\n"}


class ClashError(Exception):
    """Two writers for one path, or a path that already exists."""

    def __init__(self, target: str, other_wheel: str | None) -> None:
        super().__init__(f"File already exists: {target}")
        self.target, self.other_wheel = target, other_wheel


# Where a hard link cannot be made: another file system, FAT/exFAT, no permission, too many links
_NO_LINK = frozenset(
    {errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL}
)


@dataclass
class Linker:
    """Places cached files: hard links (uv's default on Linux and Windows), or copies from the first
    file that cannot be linked on."""

    mode: Literal["hardlink", "copy"] = "hardlink"

    def place(self, source: str, target: str) -> None:
        if self.mode == "hardlink":
            try:
                os.link(source, target)  # FileExistsError when anything is there: a clash
                return
            except OSError as exc:
                if isinstance(exc, FileExistsError) or exc.errno not in _NO_LINK:
                    raise
                self.mode = "copy"
        open(target, "xb").close()  # noqa: PTH123 - claimed exclusively, as every other write here
        shutil.copyfile(source, target)  # the kernel's copy (sendfile, fcopyfile, CopyFile2)
        shutil.copymode(source, target)


@dataclass
class Claims:
    """Which wheel writes which path, shared by the install threads."""

    owners: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, target: str, wheel: str, identity: str | None) -> bool:
        """True: write it.  False: another wheel writes these very bytes.  Else :class:`ClashError`."""
        with self.lock:
            owner = self.owners.get(target)
            if owner is None:
                self.owners[target] = (wheel, identity)
                return True
        if identity is not None and owner[1] == identity and owner[0] != wheel:
            return False
        raise ClashError(target, owner[0])

    def claim_all(self, wheel: str, wanted: Sequence[tuple[str, str | None]]) -> list[bool]:
        """:meth:`claim` for many (target, identity) pairs under one lock: a replayed wheel claims
        its 10,000s of files at once."""
        claimed = []
        with self.lock:
            for target, identity in wanted:
                owner = self.owners.get(target)
                if owner is None:
                    self.owners[target] = (wheel, identity)
                    claimed.append(True)
                elif identity is not None and owner[1] == identity and owner[0] != wheel:
                    claimed.append(False)
                else:
                    raise ClashError(target, owner[0])
        return claimed


@dataclass(frozen=True)
class Job:
    """What every wheel's install shares."""

    scheme: dict[str, str]
    interpreter: str
    kind: LauncherKind
    umask: int
    claims: Claims = field(default_factory=Claims)
    cancel: threading.Event = field(default_factory=threading.Event)
    on_bytes: Callable[[int], None] | None = None  # told each wheel's file size once it is installed
    linker: Linker = field(default_factory=Linker)
    folders: Folders = field(default_factory=lambda: Folders())

    @property
    def env(self) -> str:
        """The environment's absolute path: every target is compared (claims) and recorded absolute."""
        return os.path.abspath(self.scheme["data"])  # noqa: PTH100

    @functools.cached_property
    def layout_key(self) -> str:
        """What installer's output depends on besides the wheel: the scheme (relative to the
        environment; on Windows installer writes absolute paths into RECORD, so absolute there),
        the interpreter and the launcher kind."""
        env = Path(self.env)
        scheme = {k: Path(os.path.abspath(v)).relative_to(env).as_posix() for k, v in sorted(self.scheme.items())}  # noqa: PTH100
        absolute = sorted(self.scheme.items()) if os.name == "nt" else None
        text = repr((scheme, absolute, self.interpreter, self.kind))
        return sha256_text(text)[:32]


class UnpackedWheel(Protocol):
    """A wheel already unpacked and checked (:class:`scrollcase.wheels.cache.CachedWheel`)."""

    name: str
    size: int

    def install_into(self, job: Job) -> None: ...


@dataclass(frozen=True)
class Placed:
    """One file an install put into the environment: where (relative to it, POSIX), and from where —
    a cached member's file, or ``None`` for what installer generated (scripts, RECORD, INSTALLER)."""

    target: str
    source: str | None
    identity: str | None


Installable = Path | UnpackedWheel


class BoxDestination(SchemeDictionaryDestination):
    """installer's destination for one wheel: exclusive creates, one hash per member, plain shebangs."""

    def __init__(self, job: Job, wheel: str) -> None:
        super().__init__(
            scheme_dict=job.scheme, interpreter=job.interpreter, script_kind=job.kind, bytecode_optimization_levels=()
        )  # no .pyc here: the bytecode stage compiles
        self.job, self.wheel = job, wheel

    def write_script(self, name: str, module: str, attr: str, section: ScriptSection) -> RecordEntry:
        if self.script_kind != "posix":
            return super().write_script(name, module, attr, section)
        script_name, data = Script(name, module, attr, section).generate(self.interpreter, self.script_kind)
        with io.BytesIO(plain_shebang(data, self.interpreter)) as stream:
            return self.write_to_fs(Scheme("scripts"), script_name, stream, is_executable=True)

    def write_to_fs(self, scheme: Scheme, path: str, stream: BinaryIO, is_executable: bool) -> RecordEntry:
        where = inside_str(self.scheme_dict[scheme], path)
        if isinstance(stream, LinkedMember):
            return self._link(where, path, stream)
        member = stream if isinstance(stream, CheckedMember) else None
        if not self.job.claims.claim(where, self.wheel, member.identity if member else None):
            assert member is not None
            member.drain()  # the same bytes are another wheel's to write; this copy is still checked
            return RecordEntry(path, Hash("sha256", member.sha256), member.size)
        target = Path(where)
        self.job.folders.make(os.path.dirname(where))  # noqa: PTH120
        out = target.open("xb")  # O_EXCL: FileExistsError when anything is there, even a dangling link
        try:
            with out:
                digest, size = _copy(stream, member, out)
        except BaseException:
            target.unlink(missing_ok=True)  # never leave a file that failed its check
            raise
        if is_executable:
            target.chmod(0o777 & ~self.job.umask | 0o111)  # what installer's make_file_executable sets
        return RecordEntry(path, Hash("sha256", digest), size)

    def _link(self, target: str, path: str, member: LinkedMember) -> RecordEntry:
        """A cached file, linked (its executable bit was set when it was cached) or copied."""
        if self.job.claims.claim(target, self.wheel, member.identity):
            self.job.folders.make(os.path.dirname(target))  # noqa: PTH120
            self.job.linker.place(member.path, target)
        return RecordEntry(path, Hash("sha256", member.sha256), member.size)


class RecordingDestination(BoxDestination):
    """:class:`BoxDestination` that also notes every file it places, so that the next install of
    this wheel into the same layout can replay the links without running installer again."""

    def __init__(self, job: Job, wheel: str) -> None:
        super().__init__(job, wheel)
        self.placed: list[Placed] = []

    def write_to_fs(self, scheme: Scheme, path: str, stream: BinaryIO, is_executable: bool) -> RecordEntry:
        entry = super().write_to_fs(scheme, path, stream, is_executable)
        target = Path(inside_str(self.scheme_dict[scheme], path)).relative_to(self.job.env).as_posix()
        linked = stream if isinstance(stream, LinkedMember) else None
        self.placed.append(Placed(target, linked.path if linked else None, linked.identity if linked else None))
        return entry


def inside(root: str, path: str) -> Path:
    """``root/path``, refused (ValueError, as installer does) when it leads outside ``root``."""
    return Path(inside_str(root, path))


def inside_str(root: str, path: str) -> str:
    """:func:`inside` as a string: it runs once per file, and pathlib costs more than the link itself."""
    base, prefix = _base(root)
    target = os.path.abspath(os.path.join(base, path))  # noqa: PTH100, PTH118 - normalise "..", never resolve links
    if os.path.normcase(target) != os.path.normcase(base) and not os.path.normcase(target).startswith(prefix):
        raise ValueError(f"Attempting to write {path} outside of the target directory")
    return target


@functools.lru_cache(maxsize=64)
def _base(root: str) -> tuple[str, str]:
    base = os.path.abspath(root)  # noqa: PTH100
    return base, os.path.normcase(os.path.join(base, ""))  # noqa: PTH118 - with the trailing separator


@dataclass
class Folders:
    """Folders already made by this install: one ``mkdir`` per folder, not one per file."""

    made: set[str] = field(default_factory=set)

    def make(self, folder: str) -> None:
        if folder not in self.made:
            os.makedirs(folder, exist_ok=True)  # noqa: PTH103
            self.made.add(folder)

    def make_all(self, folders: Iterable[str], root: str, pool: Executor | None) -> None:
        """Every folder and its parents below ``root``, a depth at a time, each depth's folders side by side
        on ``pool``: a ``mkdir`` costs far more than a link (journal, directory blocks)."""
        self.make(root)
        wanted: set[str] = set()
        for folder in folders:
            while folder not in wanted and folder not in self.made and len(folder) > len(root):
                wanted.add(folder)
                folder = os.path.dirname(folder)  # noqa: PTH120
        for _, level in itertools.groupby(sorted(wanted, key=_depth), key=_depth):
            batch = list(level)
            if pool is None or len(batch) < _PARALLEL_FOLDERS:
                for folder in batch:
                    self._mkdir(folder)
            else:
                for _ in pool.map(self._mkdir, batch):
                    pass

    def _mkdir(self, folder: str) -> None:
        try:
            os.mkdir(folder)  # noqa: PTH102 - its parent was made a depth before
        except FileExistsError:
            if not os.path.isdir(folder):  # noqa: PTH112 - a file where a folder goes: a clash
                raise
        self.made.add(folder)  # or another wheel's thread made it just now


_PARALLEL_FOLDERS = 8  # folders of one depth worth handing to threads


def _depth(folder: str) -> int:
    """How deep a folder lies; a target joined on Windows mixes ``\\`` and ``/``, and both separate."""
    return folder.count(os.sep) + (folder.count(os.altsep) if os.altsep else 0)


def _copy(stream: BinaryIO, member: CheckedMember | None, out: BinaryIO) -> tuple[str, int]:
    """Write ``stream`` to ``out``: (RECORD-form sha256, size), hashing each byte once."""
    if member is None:
        return copyfileobj_with_hashing(stream, out, "sha256")
    while chunk := member.read(CHUNK):
        out.write(chunk)
    return member.sha256, member.size


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _name(item: Installable) -> str:
    return item.name


def _size(item: Installable) -> int:
    return item.stat().st_size if isinstance(item, Path) else item.size


def install_one(wheel: Installable, job: Job) -> None:
    """One wheel, every member checked against its RECORD; failures become scrollcase errors (and
    cancel the other wheels), a cancelled install raises :class:`CancelledInstallError`."""
    if job.cancel.is_set():
        raise CancelledInstallError
    try:
        if isinstance(wheel, Path):
            _install(wheel, job)
        else:
            wheel.install_into(job)
        if job.on_bytes is not None:
            job.on_bytes(_size(wheel))
    except CancelledInstallError:
        raise
    except BaseException as exc:
        job.cancel.set()  # the other wheels stop at their next read
        raise wheel_error(wheel, exc) from None


def _install(wheel: Path, job: Job) -> None:
    with zipfile.ZipFile(wheel) as archive:
        source = CheckedWheel(archive, job.cancel)
        source.validate_record(validate_contents=False)  # names; a hash and a size listed for each member
        install(source=source, destination=BoxDestination(job, wheel.name), additional_metadata=INSTALLER_METADATA)


def wheel_error(wheel: Installable, exc: BaseException) -> BaseException:
    if isinstance(exc, ScrollcaseError) or not isinstance(exc, Exception):
        return exc  # KeyboardInterrupt and the like stay what they are
    if isinstance(exc, MemberMismatchError):
        return IntegrityError(
            f"wheel {wheel.name} does not match its own RECORD",
            problems=[
                Problem(
                    message=exc.detail,
                    file=str(wheel),
                    key=exc.member,
                    fix="the wheel is damaged or was changed after it was built: rebuild or re-download it, "
                    "and re-lock",
                )
            ],
        )
    if isinstance(exc, ClashError | FileExistsError):
        return _clash_error(wheel, exc)
    # installer raises InvalidWheelSource, ValueError... for a bad wheel, zipfile BadZipFile
    return BuildError(
        f"wheel {wheel.name} cannot be installed",
        problems=[
            Problem(
                message=f"{type(exc).__name__}: {exc}",
                value=str(wheel),
                fix="rebuild or re-download the wheel, and re-lock",
            )
        ],
    )


def _clash_error(wheel: Installable, exc: ClashError | FileExistsError) -> BuildError:
    if isinstance(exc, ClashError) and exc.other_wheel not in (None, wheel.name):
        return BuildError(
            f"wheels {wheel.name} and {exc.other_wheel} clash",
            problems=[
                Problem(
                    message=f"both install {exc.target}, and their RECORDs do not give it the same sha256 and size",
                    value=wheel.name,
                    fix="the lock holds two PyPI packages that ship the same file: keep only one of them",
                )
            ],
        )
    return BuildError(
        f"wheel {wheel.name} clashes with a file already in the environment",
        problems=[
            Problem(
                message=str(exc) if isinstance(exc, ClashError) else f"File already exists: {exc.filename}",
                value=wheel.name,
                fix="the lock holds the same files from a conda package and a "
                "PyPI wheel: keep only one of them in pixi.toml",
            )
        ],
    )


def install_all(wheels: Sequence[Installable], job: Job, workers: int) -> None:
    """Install every wheel, ``workers`` at a time, biggest first; raise the first failure in
    ``wheels`` order (cancelled ones are not failures)."""
    run_all(wheels, lambda wheel: install_one(wheel, job), _size, job.cancel, workers)


def run_all(
    items: Sequence[T], work: Callable[[T], None], size: Callable[[T], int], cancel: threading.Event, workers: int
) -> None:
    """``work`` on every item, ``workers`` threads, biggest first; the first failure in ``items``
    order is raised (``work`` sets ``job.cancel`` when it fails, so the others stop early)."""
    order = sorted(items, key=lambda w: -size(w))
    failures: dict[int, BaseException] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="scrollcase-wheel") as pool:
        futures = [(wheel, pool.submit(work, wheel)) for wheel in order]
        try:
            for wheel, future in futures:
                error = future.exception()  # install_one has already cancelled the others
                if error is not None:
                    failures[id(wheel)] = error
        except BaseException:  # Ctrl-C here: the threads stop at their next read, then the pool joins them
            cancel.set()
            raise
    for wheel in items:
        error = failures.get(id(wheel))
        if error is not None and not isinstance(error, CancelledInstallError):
            raise error


def install_wheels(
    wheels: Sequence[Installable],
    layout: BoxLayout,
    env: Path,
    *,
    placeholder: str,
    arch: str,
    workers: int | None = None,
    on_bytes: Callable[[int], None] | None = None,
    link: Literal["hardlink", "copy"] = "hardlink",
) -> None:
    """Install the wheels with pypa/installer, side by side in ``workers`` threads (default: one per
    usable core): every member checked against its wheel's RECORD as it is written, and a file that
    already exists is a clash, never overwritten (:mod:`scrollcase.wheels.install`).  Wheels from
    the unpacked-wheel cache are hard-linked from it (``link="copy"``, or another file system: copied)."""
    interpreter = f"{placeholder}/python.exe" if layout.windows else f"{placeholder}/bin/python{layout.python_version}"
    job = Job(
        scheme=scheme_for(layout, env),
        interpreter=interpreter,
        kind=script_kind(layout, arch),
        umask=current_umask(),
        on_bytes=on_bytes,
        linker=Linker(link),
    )
    install_all(wheels, job, workers or usable_cores())
