"""Reproducible bytecode for the box's own modules, compiled by the box's own interpreter.

A box without ``.pyc`` files compiles every module it imports on every start (``import torch``: about
2.8 s instead of 1.2 s) and cannot cache the result in a read-only install.  So the build compiles
the standard library and site-packages once, in a way that gives the same bytes on every build:

* **The box's interpreter**, so the magic number and the cache tag are the ones it will look for;
  run isolated (``-I``), without ``site`` (``-S``) and without writing bytecode for the modules
  ``compileall`` itself imports (``-B``).
* **``--invalidation-mode unchecked-hash``** (PEP 552): the header holds a hash of the source, not its
  mtime, and Python never re-reads the source to check it.  A box is immutable, its mtimes are
  normalised by packing, and a checked mode would read every source on every import.
* **Relative names**: compiled from the box root with box-relative paths, so the file name recorded
  in each code object is ``venv/lib/python3.11/...``, never the build folder (the import system
  replaces it with the real path when it loads the module).
* **Not the prefix carriers**: a source that embeds the relocation placeholder is rewritten on
  unpack; bytecode compiled from it would keep the placeholder (and, being unchecked, would win over
  the rewritten source), so such files are left to compile at run time.
* **One process per fixed chunk of files**, the chunks run side by side.  ``compileall -j`` is not
  reproducible against a serial run: its worker processes hold other objects than a plain
  interpreter, and marshal's back-references depend on reference counts (measured: 1 file of
  5,172 in the torch box differed).  A plain interpreter compiling a fixed list gives the same bytes
  whatever the chunking and whatever ran before in that process (measured, chunks of 37 to 10,000).
* **Python 3.11 or newer**: ``-I`` makes the interpreter ignore ``PYTHONHASHSEED``, and only since
  3.11 does marshal write sets in a fixed order (bpo-37596); older boxes ship without bytecode.

:func:`plan_bytecode` is pure (which files, in which chunks); :func:`compile_bytecode` runs it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from scrollcase.build import pyccache
from scrollcase.errors import BuildError, Problem
from scrollcase.format import paths
from scrollcase.format.layout import BoxLayout
from scrollcase.io import proc
from scrollcase.io.digest import sha256_bytes

CHUNK_FILES = 200  # fixed, so the chunks (and the processes) never depend on the machine
MIN_PYTHON = (3, 11)
COMPILEALL = ("-B", "-S", "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash")
ERROR_LINE = "*** Error compiling "
TIMEOUT = 600.0
SEED = {"PYTHONHASHSEED": "0"}  # what reproducible builds set; -I makes Python ignore it, and 3.11+ needs none


@dataclass(frozen=True)
class BytecodePlan:
    python: PurePosixPath  # the box's interpreter, relative to the box root
    chunks: tuple[tuple[str, ...], ...]  # box-relative POSIX paths of the sources, sorted
    left_out: tuple[str, ...] = ()  # sources that embed the placeholder: compiled at run time
    skipped: str | None = None  # why nothing is compiled at all

    @property
    def files(self) -> int:
        return sum(len(c) for c in self.chunks)


@dataclass(frozen=True)
class BytecodeResult:
    compiled: int
    failed: tuple[str, ...]  # sources the interpreter could not compile (Python 2 test data...)
    chunks: int


def plan_bytecode(
    layout: BoxLayout,
    sources: Sequence[str],
    *,
    prune: Sequence[str] = (),
    carriers: Collection[str] = (),
    chunk_files: int = CHUNK_FILES,
) -> BytecodePlan:
    """What to compile: the ``.py`` files under the box's standard library folder (site-packages
    included), not under a prune path, not a placeholder carrier, in fixed-size chunks."""
    python = layout.entry_point
    if tuple(int(p) for p in layout.python_version.split(".")[:2]) < MIN_PYTHON:
        return BytecodePlan(
            python,
            (),
            skipped=f"Python {layout.python_version} marshals sets in a "
            "hash-seeded order: no reproducible bytecode before 3.11",
        )
    wanted = sorted({s for s in sources if _compilable(s, layout.stdlib_dir.as_posix(), prune)})
    kept = [s for s in wanted if s not in carriers]
    return BytecodePlan(python, _chunked(kept, chunk_files), left_out=tuple(s for s in wanted if s in carriers))


def _chunked(files: Sequence[str], size: int) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(files[i : i + size]) for i in range(0, len(files), size))


def _compilable(rel: str, stdlib: str, prune: Sequence[str]) -> bool:
    path = PurePosixPath(rel)
    if path.suffix != ".py" or "__pycache__" in path.parts or not rel.startswith(stdlib + "/"):
        return False
    if rel != rel.strip() or "\n" in rel or "\r" in rel:  # compileall's -i list is stripped lines
        return False
    return not any(rel == p.rstrip("/") or rel.startswith(p.rstrip("/") + "/") for p in prune)


# ------------------------------------------------------------------------------------------ executor


def find_sources(box_root: Path, layout: BoxLayout) -> list[str]:
    """Box-relative POSIX paths of the regular (not symlinked) ``.py`` files under the stdlib folder."""
    return [rel for rel, _ in _py_files(box_root, layout.stdlib_dir)]


def find_carriers(box_root: Path, sources: Sequence[str], placeholder: str) -> set[str]:
    """The sources that embed ``placeholder`` (relocation rewrites them on unpack)."""
    return scan_sources(box_root, sources, placeholder, digests=False)[0]


def scan_sources(
    box_root: Path, sources: Sequence[str], placeholder: str, *, digests: bool
) -> tuple[set[str], dict[str, str]]:
    """(the carriers of ``placeholder``, each source's sha256 when ``digests``) from one read per source:
    a rebuild reads ~11,000 sources, and reading them once for each costed 0.2 s."""
    needle = placeholder.encode("utf-8")
    base = f"{box_root}{os.sep}"
    carriers: set[str] = set()
    sha256s: dict[str, str] = {}
    for rel in sources:
        with open(paths.native_path(base, rel), "rb") as source:  # noqa: PTH123 - 11,000 files
            data = source.read()
        if needle in data:
            carriers.add(rel)
        if digests:
            sha256s[rel] = sha256_bytes(data)
    return carriers, sha256s


def _py_files(box_root: Path, under: PurePosixPath) -> Iterator[tuple[str, Path]]:
    for directory, dirs, files in os.walk(box_root / under):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            full = Path(directory) / name
            if name.endswith(".py") and not full.is_symlink():
                yield full.relative_to(box_root).as_posix(), full


def compile_bytecode(box_root: Path, plan: BytecodePlan, *, scratch: Path, workers: int) -> BytecodeResult:
    """Compile every chunk with the box's interpreter, ``workers`` processes at a time.  Sources that
    do not compile are reported, as pip and conda do; an interpreter that fails is a BuildError."""
    scratch.mkdir(parents=True, exist_ok=True)
    root = box_root.absolute()  # not resolved: bin/python may be a symlink
    python = root / plan.python

    def chunk(k: int) -> list[str]:
        return _compile_chunk(root, python, plan.chunks[k], scratch / f"chunk-{k:04d}.txt")

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="scrollcase-bytecode") as pool:
        failed = tuple(name for names in pool.map(chunk, range(len(plan.chunks))) for name in names)
    return BytecodeResult(plan.files - len(failed), failed, len(plan.chunks))


def _compile_chunk(root: Path, python: Path, chunk: Sequence[str], listing: Path) -> list[str]:
    """One ``compileall -i LIST`` run from the box root; the sources that failed to compile."""
    listing.write_text("".join(f"{rel}\n" for rel in chunk), encoding="utf-8")
    run = proc.run_python(python, [*COMPILEALL, "-i", str(listing.absolute())], cwd=root, timeout=TIMEOUT, env=SEED)
    failed = [
        line[len(ERROR_LINE) :].strip().rstrip(".")[1:-1]
        for line in run.stdout.splitlines()
        if line.startswith(ERROR_LINE)
    ]
    if run.ok or (run.returncode == 1 and failed):
        return failed
    what = "timed out" if run.timed_out else f"exited with {run.returncode}"
    raise BuildError(
        f"compiling the box's bytecode failed: {python.name} {what}",
        problems=[
            Problem(
                message=(run.stderr or run.stdout).strip()[-2000:] or "no output",
                value=str(python),
                fix="the box's interpreter must start from the build folder (relocatable, RUNPATH $ORIGIN/../lib)",
            )
        ],
    )


def stray_carriers(
    box_root: Path, layout: BoxLayout, placeholder: str, only: Collection[str] | None = None
) -> list[Path]:
    """Bytecode that embeds the placeholder after all (a constant folded from pieces): relocation
    would pad it with NULs inside a marshalled string, so it must not ship.  ``only``: the box-relative
    ``.pyc`` to look at (those compiled by this build; a cached one was looked at when it was cached)."""
    needle = placeholder.encode("utf-8")
    if only is not None:
        return sorted(box_root / rel for rel in only if _holds(box_root / rel, needle))
    stray = []
    for directory, _, files in os.walk(box_root / layout.stdlib_dir):
        if Path(directory).name == "__pycache__":
            stray += [Path(directory) / f for f in files if needle in (Path(directory) / f).read_bytes()]
    return sorted(stray)


def _holds(path: Path, needle: bytes) -> bool:
    try:
        return needle in path.read_bytes()
    except FileNotFoundError:  # a source that did not compile has no .pyc
        return False


def add_bytecode(
    box_root: Path,
    layout: BoxLayout,
    *,
    prune: Sequence[str],
    placeholder: str,
    scratch: Path,
    workers: int | None = None,
    pyc_cache: Path | None = None,
) -> list[str]:
    """The build's bytecode stage: plan, take what the bytecode cache ``pyc_cache`` holds
    (:mod:`~scrollcase.build.pyccache`), compile the rest, drop stray carriers; notes for the build log."""
    sources = find_sources(box_root, layout)
    carriers, sha256s = scan_sources(box_root, sources, placeholder, digests=pyc_cache is not None)
    plan = plan_bytecode(layout, sources, prune=prune, carriers=carriers)
    if plan.skipped:
        return [plan.skipped]
    cache = pyccache.open_pyc_cache(pyc_cache, box_root, plan.python) if pyc_cache is not None else None
    wanted = [rel for chunk in plan.chunks for rel in chunk]
    todo, keys = pyccache.link_cached(box_root, cache, wanted, sha256s) if cache is not None else (wanted, {})
    todo_plan = replace(plan, chunks=_chunked(todo, CHUNK_FILES))
    result = compile_bytecode(box_root, todo_plan, scratch=scratch, workers=workers or proc.usable_cores())
    reused = len(wanted) - len(todo)
    cached = f"{reused} from the bytecode cache, " if cache is not None else ""
    notes = [f"{result.compiled + reused} modules compiled ({cached}{result.chunks} chunks, unchecked-hash)"]
    if plan.left_out:
        notes.append(
            f"{len(plan.left_out)} modules embed the box prefix and compile at run time: {_some(plan.left_out)}"
        )
    if result.failed:
        notes.append(f"{len(result.failed)} sources do not compile (left as they are): {_some(result.failed)}")
    compiled_here = [cache.pyc_for(rel) for rel in todo] if cache is not None else None
    for pyc in stray_carriers(box_root, layout, placeholder, compiled_here):
        pyc.unlink()
        notes.append(f"{pyc.relative_to(box_root).as_posix()} embeds the box prefix: removed")
    if cache is not None:  # after the strays are gone: a cached .pyc is one the box ships
        failed = set(result.failed)
        done = [rel for rel in todo if rel not in failed and (box_root / cache.pyc_for(rel)).is_file()]
        pyccache.store_compiled(box_root, cache, keys, done)
        pyccache.prune(cache.root)
    return notes


def _some(names: Sequence[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (" ..." if len(names) > shown else "")
