"""Reproducible bytecode: which sources are compiled, in which chunks (pure), and the compile itself with
this machine's interpreter standing in for a box's."""

from __future__ import annotations

import marshal
import os
import sys
import time
from pathlib import Path

import pytest

from scrollcase.build.bytecode import (
    BytecodePlan,
    add_bytecode,
    compile_bytecode,
    find_carriers,
    find_sources,
    plan_bytecode,
)
from scrollcase.errors import BuildError
from scrollcase.format.layout import box_layout

LINUX = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
WINDOWS = box_layout("venv/python.exe", "windows", "3.12", "model-cache/m")
PLACEHOLDER = "/opt/scrollcase/" + "_placehold" * 18
STD = "venv/lib/python3.11"


def test_plan_takes_the_stdlib_and_site_packages_sources_in_fixed_sorted_chunks() -> None:
    sources = [f"{STD}/site-packages/pkg/m{i:02d}.py" for i in range(7)] + [
        f"{STD}/os.py",
        f"{STD}/json/__init__.py",
        "venv/bin/tool.py",
        "venv/share/x.py",
        "model-cache/m/weights.py",  # not importable from the box
        f"{STD}/pkg/__pycache__/odd.py",
        f"{STD}/data.txt",
        f"{STD}/a.pyi",
    ]
    plan = plan_bytecode(LINUX, list(reversed(sources)), chunk_files=3)
    files = [f for chunk in plan.chunks for f in chunk]
    assert files == sorted([*sources[:7], f"{STD}/os.py", f"{STD}/json/__init__.py"])
    assert [len(c) for c in plan.chunks] == [3, 3, 3]
    assert plan.python.as_posix() == "venv/bin/python" and plan.files == 9 and plan.skipped is None
    assert plan_bytecode(LINUX, sources, chunk_files=3) == plan  # nothing about the machine goes in


def test_pruned_paths_and_placeholder_carriers_are_not_compiled() -> None:
    sources = [
        f"{STD}/site-packages/big/tests/t.py",
        f"{STD}/site-packages/big/core.py",
        f"{STD}/site-packages/big/tests_not.py",
        f"{STD}/_sysconfigdata__linux_x86_64-linux-gnu.py",
        f"{STD}/gone.py",
        f"{STD}/ spaced.py",
        f"{STD}/new\nline.py",
    ]
    plan = plan_bytecode(
        LINUX,
        sources,
        prune=[f"{STD}/site-packages/big/tests/", f"{STD}/gone.py"],
        carriers={f"{STD}/_sysconfigdata__linux_x86_64-linux-gnu.py"},
    )
    assert plan.chunks == (
        (f"{STD}/ spaced.py", f"{STD}/site-packages/big/core.py", f"{STD}/site-packages/big/tests_not.py"),
    )  # a newline cannot go in compileall's -i list
    assert plan.left_out == (f"{STD}/_sysconfigdata__linux_x86_64-linux-gnu.py",)


def test_windows_boxes_compile_under_lib_and_old_pythons_are_skipped() -> None:
    plan = plan_bytecode(WINDOWS, ["venv/Lib/os.py", "venv/Lib/site-packages/a.py", "venv/Scripts/x.py"])
    assert plan.chunks == (("venv/Lib/os.py", "venv/Lib/site-packages/a.py"),)
    assert plan.python.as_posix() == "venv/python.exe"
    old = plan_bytecode(box_layout("venv/bin/python", "linux", "3.10", "m"), ["venv/lib/python3.10/os.py"])
    assert old.chunks == () and old.skipped and "3.11" in old.skipped


# ------------------------------------------------------------------------------ executor, for real


needs_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake box claims Python 3.11")


def fake_box(root: Path) -> Path:
    """A box whose interpreter is this machine's (same magic number as the tests' own)."""
    site = root / "venv/lib/python3.11/site-packages"
    (site / "pkg").mkdir(parents=True)
    (root / "venv/bin").mkdir(parents=True)
    (root / "venv/bin/python").symlink_to(sys.executable)
    (site / "pkg/__init__.py").write_text("NAMES = {'b', 'a', 'c', 'd'}\n\ndef f(x):\n    return x in NAMES\n")
    (site / "pkg/broken.py").write_text("print 'python 2'\n")
    (site / "pkg/where.py").write_text(f"PREFIX = {PLACEHOLDER + '/venv'!r}\n")
    for i in range(5):
        (site / f"pkg/m{i}.py").write_text(f"VALUE = {i}\nTEXT = 'x' * {i}\n")
    return root


def pycs(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.pyc"))}


@needs_311
def test_compiles_unchecked_hash_bytecode_with_box_relative_names(tmp_path: Path) -> None:
    box = fake_box(tmp_path / "box")
    notes = add_bytecode(box, LINUX, prune=[], placeholder=PLACEHOLDER, scratch=tmp_path / "scratch", workers=2)
    got = pycs(box)
    tag = sys.implementation.cache_tag
    assert sorted(got) == sorted(
        f"{STD}/site-packages/pkg/__pycache__/{n}.{tag}.pyc" for n in ["__init__", "m0", "m1", "m2", "m3", "m4"]
    )
    assert notes[0].startswith("6 modules compiled") and "where.py" in notes[1] and "broken.py" in notes[2]
    for data in got.values():
        assert int.from_bytes(data[4:8], "little") == 0b01  # PEP 552: hash-based, unchecked
        assert str(tmp_path).encode() not in data and PLACEHOLDER.encode() not in data
    code = marshal.loads(got[f"{STD}/site-packages/pkg/__pycache__/m1.{tag}.pyc"][16:])
    assert code.co_filename == f"{STD}/site-packages/pkg/m1.py"


@needs_311
def test_same_bytes_whatever_the_workers_and_chunks(tmp_path: Path) -> None:
    results = []
    for workers, chunk_files in [(1, 200), (3, 1), (2, 2)]:
        box = fake_box(tmp_path / f"box-{workers}-{chunk_files}")
        sources = find_sources(box, LINUX)
        plan = plan_bytecode(LINUX, sources, carriers=find_carriers(box, sources, PLACEHOLDER), chunk_files=chunk_files)
        result = compile_bytecode(box, plan, scratch=tmp_path / f"scratch-{workers}", workers=workers)
        assert result.compiled == 6 and [Path(f).name for f in result.failed] == ["broken.py"]
        results.append(
            {name.split("/", 1)[1]: data for name, data in pycs(tmp_path).items() if name.startswith(box.name + "/")}
        )
    assert results[0] == results[1] == results[2] and len(results[0]) == 6


def test_an_interpreter_that_fails_is_a_build_error(tmp_path: Path) -> None:
    box = tmp_path / "box"
    (box / "venv/bin").mkdir(parents=True)
    python = box / "venv/bin/python"
    python.write_text("#!/bin/sh\necho 'cannot load libpython3.11.so' >&2\nexit 3\n")
    os.chmod(python, 0o755)
    plan = BytecodePlan(LINUX.entry_point, ((f"{STD}/os.py",),))
    with pytest.raises(BuildError, match="exited with 3") as caught:
        compile_bytecode(box, plan, scratch=tmp_path / "scratch", workers=1)
    assert "libpython3.11" in caught.value.problems[0].message


@needs_311
def test_a_rebuild_links_the_cached_bytecode_of_unchanged_modules_and_compiles_the_rest(tmp_path: Path) -> None:
    def build(name: str) -> tuple[Path, list[str]]:
        box = fake_box(tmp_path / name)
        if name == "changed":
            (box / STD / "site-packages/pkg/m3.py").write_text("VALUE = 'new'\n")
        scratch = tmp_path / f"s-{name}"
        notes = add_bytecode(
            box, LINUX, prune=[], placeholder=PLACEHOLDER, scratch=scratch, pyc_cache=tmp_path / "cache" / "pyc"
        )
        return box, notes

    first, notes = build("first")
    assert notes[0].startswith("6 modules compiled (0 from the bytecode cache")
    again, notes = build("again")
    assert notes[0].startswith("6 modules compiled (6 from the bytecode cache, 1 chunks")  # broken.py: again
    assert pycs(again) == pycs(first)
    assert all(os.stat(again / name).st_nlink >= 2 for name in pycs(again))  # the pack cache knows them by inode
    changed, notes = build("changed")
    assert notes[0].startswith("6 modules compiled (5 from the bytecode cache, 1 chunks")
    fresh = fake_box(tmp_path / "fresh")
    (fresh / STD / "site-packages/pkg/m3.py").write_text("VALUE = 'new'\n")
    add_bytecode(fresh, LINUX, prune=[], placeholder=PLACEHOLDER, scratch=tmp_path / "s-fresh")
    assert pycs(changed) == pycs(fresh)  # the same bytes as a build without the cache
    entries = [p for p in (tmp_path / "cache" / "pyc").glob("??/*") if not p.name.startswith(".")]
    assert len(entries) == 7  # 6 modules, and m3 once more for its new source: broken.py and where.py never


@needs_311
def test_the_bytecode_cache_key_holds_the_interpreter_the_box_path_and_the_source(tmp_path: Path) -> None:
    from scrollcase.build.pyccache import PycCache

    cache = PycCache(tmp_path, "3.11.7\0a70d0d0a\0cpython-311", "cpython-311")
    key = cache.key(f"{STD}/m.py", "0" * 64)
    assert (
        len(
            {
                key,
                cache.key(f"{STD}/n.py", "0" * 64),
                cache.key(f"{STD}/m.py", "1" * 64),
                PycCache(tmp_path, "3.11.8\0a70d0d0a\0cpython-311", "cpython-311").key(f"{STD}/m.py", "0" * 64),
            }
        )
        == 4
    )
    assert cache.pyc_for(f"{STD}/a.b.py") == f"{STD}/__pycache__/a.b.cpython-311.pyc"


@needs_311
def test_bytecode_cache_entries_older_than_the_max_age_are_pruned(tmp_path: Path) -> None:
    """A module is compiled again at most once per MAX_AGE_DAYS: entries are not touched when used (the box's
    link shares their mtime, which the pack cache's inode key holds)."""
    from scrollcase.build import pyccache

    first = fake_box(tmp_path / "first")
    cache = tmp_path / "c" / "pyc"
    add_bytecode(first, LINUX, prune=[], placeholder=PLACEHOLDER, scratch=tmp_path / "s1", pyc_cache=cache)
    entries = sorted((tmp_path / "c" / "pyc").glob("??/*"))
    old = time.time() - (pyccache.MAX_AGE_DAYS + 1) * 86400
    os.utime(entries[0], (old, old))
    mtimes = {p: p.stat().st_mtime for p in entries[1:]}
    again = fake_box(tmp_path / "again")
    notes = add_bytecode(again, LINUX, prune=[], placeholder=PLACEHOLDER, scratch=tmp_path / "s2", pyc_cache=cache)
    assert notes[0].startswith("6 modules compiled (6 from the bytecode cache")  # linked, then found too old
    assert sorted((tmp_path / "c" / "pyc").glob("??/*")) == entries[1:]
    assert {p: p.stat().st_mtime for p in entries[1:]} == mtimes  # used, not touched
    assert pycs(again) == pycs(first)


@needs_311
@pytest.mark.parametrize("cached", [False, True])
def test_bytecode_that_folds_the_prefix_from_pieces_is_removed_and_never_cached(tmp_path: Path, cached: bool) -> None:
    pieces = f"FOLDED = {'/opt/scrollcase/'!r} + {'_placehold'!r} * 18\n"  # the compiler folds it into PLACEHOLDER
    cache = tmp_path / "cache" / "pyc" if cached else None
    tag = sys.implementation.cache_tag
    for build in ("first", "again"):
        box = fake_box(tmp_path / build)
        (box / STD / "site-packages/pkg/folded.py").write_text(pieces)
        notes = add_bytecode(
            box, LINUX, prune=[], placeholder=PLACEHOLDER, scratch=tmp_path / f"s-{build}", pyc_cache=cache
        )
        folded = f"{STD}/site-packages/pkg/__pycache__/folded.{tag}.pyc"
        assert f"{folded} embeds the box prefix: removed" in notes
        assert folded not in pycs(box) and len(pycs(box)) == 6
        assert all(PLACEHOLDER.encode() not in data for data in pycs(box).values())
    if cache is not None:
        assert notes[0].startswith("7 modules compiled (6 from the bytecode cache")  # folded.py compiled again
        assert len([p for p in cache.glob("??/*") if not p.name.startswith(".")]) == 6
