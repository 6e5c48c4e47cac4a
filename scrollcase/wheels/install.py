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
  file two wheels both ship with the same ``RECORD`` sha256 and size (the nvidia-*-cu12 wheels all
  ship the same empty ``nvidia/__init__.py``): it is written once, each wheel's copy is still checked,
  and it appears in both ``RECORD`` files, as pip and uv leave it.
* **Threads.** zlib, hashing and file writes release the GIL, so independent wheels install side by
  side, biggest first.  The first failure cancels the others at their next read.  The umask is read
  once beforehand: installer's ``make_file_executable`` flips it process-wide, which is a race with
  threads.
"""

from __future__ import annotations

import base64
import errno
import functools
import io
import itertools
import os
import shutil
import stat
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal, Protocol, TypeVar, cast

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.records import Hash, RecordEntry, parse_record_file
from installer.scripts import Script
from installer.sources import WheelContentElement, WheelFile
from installer.utils import Scheme, copyfileobj_with_hashing

from scrollcase.errors import BuildError, IntegrityError, Problem, ScrollcaseError
from scrollcase.format.layout import BoxLayout
from scrollcase.io.digest import hash_file, new_hash, sha256_text
from scrollcase.io.proc import usable_cores
from scrollcase.wheels.source import LauncherKind, plain_shebang, scheme_for, script_kind
from scrollcase.wheels.zipread import MemberReader, member_ends

if TYPE_CHECKING:
    from installer.scripts import ScriptSection

    from scrollcase.io.digest import Hasher

T = TypeVar("T")
CHUNK = 1 << 18  # 256 KiB reads: few GIL round trips, and small enough to stay out of mmap
INSTALLER_METADATA = {"INSTALLER": b"scrollcase\n"}


class MemberMismatchError(Exception):
    """A member's bytes differ from what the wheel's RECORD says."""

    def __init__(self, member: str, detail: str) -> None:
        super().__init__(f"{member}: {detail}")
        self.member, self.detail = member, detail


class CancelledInstallError(Exception):
    """Another wheel failed: stop at the next read."""


class ClashError(Exception):
    """Two writers for one path, or a path that already exists."""

    def __init__(self, target: str, other_wheel: str | None) -> None:
        super().__init__(f"File already exists: {target}")
        self.target, self.other_wheel = target, other_wheel


class CheckedMember:
    """A member's stream that hashes what is read and checks RECORD's hash and size at its end.

    Supports what installer does with a stream: ``read``, ``readline`` and ``seek(0)`` (which starts
    the hash again, so the check always covers the whole member exactly once)."""

    def __init__(self, raw: BinaryIO, expected: RecordEntry, cancel: threading.Event) -> None:
        assert expected.hash_ is not None and expected.size is not None
        self._raw, self._expected, self._cancel = raw, expected, cancel
        self._hash_name, self._want, self._want_size = expected.hash_.name, expected.hash_.value, expected.size
        self._restart()

    def _restart(self) -> None:
        self._hasher = new_hash(self._hash_name)
        self._sha = self._hasher if self._hash_name == "sha256" else new_hash()  # installed RECORDs'
        self.size = 0
        self.sha256 = ""  # RECORD's form of the sha256 of the bytes, once they passed the check

    @property
    def identity(self) -> str:
        """What RECORD promises for these bytes: equal identities mean equal files."""
        return f"{self._hash_name}={self._want},{self._want_size}"

    @property
    def verified(self) -> bool:
        return bool(self.sha256)

    def read(self, n: int = -1) -> bytes:
        if self._cancel.is_set():
            raise CancelledInstallError
        data = self._raw.read(n)
        if data:
            self._update(data)
        elif n != 0:
            self._finish()
        return data

    def readline(self, limit: int = -1) -> bytes:
        data = self._raw.readline(limit)
        self._update(data)
        return data

    def _update(self, data: bytes) -> None:
        self._hasher.update(data)
        if self._sha is not self._hasher:
            self._sha.update(data)
        self.size += len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (offset, whence) != (0, io.SEEK_SET):
            raise io.UnsupportedOperation("a checked wheel member only rewinds to its start")
        self._raw.seek(0)
        self._restart()
        return 0

    def drain(self) -> None:
        """Read to the end, so the member is checked even when nobody wanted its bytes."""
        while not self.verified:
            self.read(CHUNK)

    def _finish(self) -> None:
        if self.verified:
            return
        got = _record_digest(self._hasher)
        if self.size != self._want_size:
            raise MemberMismatchError(self._expected.path, f"{self.size} bytes, RECORD says {self._want_size}")
        if got != self._want:
            raise MemberMismatchError(self._expected.path, f"{self._hash_name} {got}, RECORD says {self._want}")
        self.sha256 = got if self._sha is self._hasher else _record_digest(self._sha)


def _record_digest(hasher: Hasher) -> str:
    return base64.urlsafe_b64encode(hasher.digest()).decode("ascii").rstrip("=")


class CheckedWheel(WheelFile):
    """installer's WheelFile whose members check themselves against RECORD while they are read."""

    def __init__(self, f: zipfile.ZipFile, cancel: threading.Event) -> None:
        super().__init__(f)
        self._zip, self._cancel = f, cancel

    def get_contents(self) -> Iterator[WheelContentElement]:
        """As WheelFile.get_contents (same members, order and executable bits), with checked streams."""
        records = {row[0]: row for row in parse_record_file(self.read_dist_info("RECORD").splitlines())}
        infos = self._zip.infolist()
        with Path(str(self._zip.filename)).open("rb", buffering=0) as fp:
            ends = member_ends(infos, os.fstat(fp.fileno()).st_size)
            for item, end in zip(infos, ends, strict=True):
                if item.filename.endswith("/"):
                    continue
                row = records.pop(item.filename, (item.filename, "", ""))
                with closing(self._open(fp, item, end)) as raw:
                    yield from self._checked(row, raw, _is_executable(item))

    def _open(self, fp: BinaryIO, item: zipfile.ZipInfo, end: int) -> BinaryIO:
        if item.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return cast(BinaryIO, MemberReader(fp, item, end, CHUNK))
        return cast(BinaryIO, self._zip.open(item))  # bzip2, lzma: zipfile's own streams

    def _checked(self, row: tuple[str, str, str], raw: BinaryIO, executable: bool) -> Iterator[WheelContentElement]:
        entry = RecordEntry.from_elements(*row)
        if entry.hash_ is None or entry.size is None:  # RECORD itself, signatures: nothing to check
            yield row, raw, executable
            return
        member = CheckedMember(raw, entry, self._cancel)
        yield row, cast(BinaryIO, member), executable
        member.drain()  # installer skipped it (__pycache__): still checked


def _is_executable(item: zipfile.ZipInfo) -> bool:
    mode = item.external_attr >> 16  # as installer (and pip) read it
    return bool(mode and stat.S_ISREG(mode) and mode & 0o111)


class LinkedMember:
    """A member already unpacked and checked (:mod:`scrollcase.wheels.cache`), as installer's stream:
    the destination links ``path`` instead of copying bytes; installer itself only reads it for the
    scripts whose ``#!python`` shebang it rewrites."""

    def __init__(self, path: str, hash_name: str, hash_value: str, size: int) -> None:
        self.path, self.size = path, size
        self.identity = f"{hash_name}={hash_value},{size}"  # as CheckedMember's
        self._sha256 = hash_value if hash_name == "sha256" else None
        self._file: BinaryIO | None = None

    @property
    def sha256(self) -> str:
        """RECORD's form of the file's sha256 (hashed here only for a wheel that lists another hash)."""
        if self._sha256 is None:
            self._sha256 = _record_digest(hash_file(self.path))
        return self._sha256

    def _open(self) -> BinaryIO:
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: PTH123, SIM115 - closed by close()
        return self._file

    def read(self, n: int = -1) -> bytes:
        return self._open().read(n)

    def readline(self, limit: int = -1) -> bytes:
        return self._open().readline(limit)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._open().seek(offset, whence)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


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
