"""pack_tree: headers, determinism, normalisation, refusals.  Archives are read back by stdlib
tarfile and by GNU tar, so the format is checked by independent readers."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from scrollcase.errors import BuildError
from scrollcase.format.archive import pack as archive
from scrollcase.format.archive import packplan, tarbuffer, treewalk
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.units import Unit


def _read_tar(path: Path) -> list[tarfile.TarInfo]:
    data = zstandard.ZstdDecompressor().stream_reader(path.open("rb")).read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return tar.getmembers()


def _make_tree(root: Path) -> Path:
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "venv" / "lib" / "python3.11").mkdir(parents=True)
    (root / "venv" / "bin" / "python3.11").write_bytes(b"\x7fELF" + os.urandom(3000))
    (root / "venv" / "bin" / "python3.11").chmod(0o700)
    (root / "venv" / "bin" / "python").symlink_to("python3.11")
    (root / "venv" / "lib" / "python3.11" / "os.py").write_text("import sys\n" * 100)
    (root / "venv" / "lib" / "python3.11" / "os.py").chmod(0o600)
    (root / "model-cache").mkdir()
    (root / "model-cache" / ("w" * 120 + ".bin")).write_bytes(bytes(range(256)) * 40)
    (root / "ünïcode.txt").write_text("x")
    (root / "empty").mkdir()
    (root / "box.json").write_text("{}")
    return root


def test_pack_normalises_and_keeps_symlinks(tmp_path: Path) -> None:
    root = _make_tree(tmp_path / "tree")
    result = pack_tree(root, tmp_path / "out.tar.zst")
    members = {m.name: m for m in _read_tar(result.path)}
    names = list(members)
    dirs = [n for n in names if members[n].isdir()]
    assert names[: len(dirs)] == sorted(dirs) and names[len(dirs)] == "box.json"  # directories, then box.json
    assert names == [m.name for unit in archive.plan_pack(root).units for m in unit.members]
    assert members["venv/bin/python3.11"].mode == 0o755
    assert members["venv/lib/python3.11/os.py"].mode == 0o644
    assert members["empty"].isdir() and members["empty"].mode == 0o755
    assert members["venv/bin/python"].issym() and members["venv/bin/python"].linkname == "python3.11"
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" for m in members.values())
    assert result.files == 5
    assert result.entries == len(members)
    digest = hashlib.sha256(result.path.read_bytes()).hexdigest()
    assert (result.sha256, result.size) == (digest, result.path.stat().st_size)


def test_same_content_at_two_paths_and_two_runs_is_byte_identical(tmp_path: Path) -> None:
    a = _make_tree(tmp_path / "a")
    b = tmp_path / "elsewhere" / "deeper" / "b"
    shutil.copytree(a, b, symlinks=True)
    (b / "box.json").touch()  # a different mtime must not matter
    os.utime(b / "venv" / "lib" / "python3.11" / "os.py", (12345, 12345))
    first = pack_tree(a, tmp_path / "1.tar.zst")
    second = pack_tree(a, tmp_path / "2.tar.zst")
    third = pack_tree(b, tmp_path / "3.tar.zst", threads=1)
    assert first.sha256 == second.sha256 == third.sha256


def test_changed_content_changes_the_digest(tmp_path: Path) -> None:
    root = _make_tree(tmp_path / "a")
    first = pack_tree(root, tmp_path / "1.tar.zst")
    (root / "box.json").write_text("{ }")
    assert pack_tree(root, tmp_path / "2.tar.zst").sha256 != first.sha256


def test_files_larger_than_the_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tarbuffer, "CHUNK", 4096)
    root = tmp_path / "t"
    root.mkdir()
    payload = os.urandom(50_001)
    (root / "big").write_bytes(payload)
    (root / "small").write_bytes(b"s" * 700)
    result = pack_tree(root, tmp_path / "o.tar.zst")
    data = zstandard.ZstdDecompressor().stream_reader(result.path.open("rb")).read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        big = tar.extractfile("big")
        assert big is not None and big.read() == payload
    assert result.uncompressed_bytes == len(data)


@pytest.mark.skipif(shutil.which("tar") is None or shutil.which("zstd") is None, reason="needs GNU tar+zstd")
def test_gnu_tar_lists_the_archive(tmp_path: Path) -> None:
    root = _make_tree(tmp_path / "tree")
    result = pack_tree(root, tmp_path / "out.tar.zst")
    listing = subprocess.run(
        f"zstd -dc {result.path} | tar -tvf -", shell=True, check=True, capture_output=True, text=True
    ).stdout
    assert "venv/bin/python -> python3.11" in listing
    assert "w" * 120 + ".bin" in listing


def _tree_contents(root: Path) -> dict[str, object]:
    """Every entry below ``root``: a file's bytes and exec bit, a link's target, a folder."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[name] = ("link", os.readlink(path))
        elif path.is_dir():
            out[name] = "dir"
        else:
            out[name] = (path.read_bytes(), bool(path.stat().st_mode & 0o100))
    return out


def _extract_with(reader: str, archive_path: Path, dest: Path) -> None:
    dest.mkdir()
    if reader == "tarfile":
        data = zstandard.ZstdDecompressor().stream_reader(archive_path.open("rb")).read()
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            tar.extractall(dest, filter="tar")
    elif reader == "zstd -dc | tar -x":
        zstd = subprocess.Popen(["zstd", "-dc", str(archive_path)], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-xf", "-", "-C", str(dest)], stdin=zstd.stdout, check=True)
        assert zstd.wait() == 0
    elif reader == "libarchive":
        _extract_with_libarchive(archive_path, dest)
    else:
        subprocess.run([reader, "-xf", str(archive_path), "-C", str(dest)], check=True)


def _libarchive_missing() -> str | None:
    try:
        import libarchive  # noqa: F401 - libarchive-c loads the system's libarchive through ctypes
    except (ImportError, OSError) as exc:
        return f"no libarchive here: {exc}"
    return None


def _extract_with_libarchive(archive_path: Path, dest: Path) -> None:
    """What bsdtar does with ``-xpf``: libarchive itself reads the archive (its own zstd reader and tar parser)."""
    import libarchive.extract

    here = Path.cwd()
    os.chdir(dest)  # libarchive extracts into the working directory
    try:
        libarchive.extract_file(str(archive_path), flags=libarchive.extract.EXTRACT_PERM)
    finally:
        os.chdir(here)


READERS = [
    pytest.param("tarfile", id="python-tarfile"),
    pytest.param(
        "zstd -dc | tar -x",
        id="zstd-gnu-tar",
        marks=pytest.mark.skipif(shutil.which("tar") is None or shutil.which("zstd") is None, reason="no tar/zstd"),
    ),
    pytest.param(
        "bsdtar", id="bsdtar", marks=pytest.mark.skipif(shutil.which("bsdtar") is None, reason="no bsdtar here")
    ),
    pytest.param(  # bsdtar's own library, where the bsdtar command is not installed (this project's CI)
        "libarchive",
        id="libarchive",
        marks=pytest.mark.skipif(_libarchive_missing() is not None, reason=str(_libarchive_missing())),
    ),
]


@pytest.mark.parametrize("reader", READERS)
def test_independent_readers_extract_exactly_the_packed_tree(tmp_path: Path, reader: str) -> None:
    """docs/archive.md, Format: "GNU tar, bsdtar, Python's `tarfile` and `zstd -dc | tar -x` all read
    it" -- read meaning: extract the very tree that was packed (bytes, exec bits, links, names)."""
    root = _make_tree(tmp_path / "tree")
    (root / ("d" * 90) / ("n" * 90)).parent.mkdir()
    (root / ("d" * 90) / ("n" * 90)).write_bytes(b"a name over ustar's 100 bytes: pax\n")
    result = pack_tree(root, tmp_path / "out.tar.zst")
    _extract_with(reader, result.path, tmp_path / "out")
    assert _tree_contents(tmp_path / "out") == _tree_contents(root)


@pytest.mark.parametrize("target", ["../../outside", "/etc/passwd"])
def test_refuses_symlinks_leaving_the_root(tmp_path: Path, target: str) -> None:
    root = tmp_path / "t"
    (root / "d").mkdir(parents=True)
    (root / "d" / "link").symlink_to(target)
    with pytest.raises(BuildError, match="symlink") as info:
        pack_tree(root, tmp_path / "o.tar.zst")
    assert "d/link" in str(info.value)
    assert not list(tmp_path.glob("*.tar.zst*")) and not list(tmp_path.glob(".o.tar.zst*"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_refuses_fifos(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(BuildError, match="FIFO"):
        pack_tree(root, tmp_path / "o.tar.zst")


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="not a directory"):
        pack_tree(tmp_path / "missing", tmp_path / "o.tar.zst")


def test_failed_pack_leaves_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _make_tree(tmp_path / "t")
    (tmp_path / "o.tar.zst").write_bytes(b"previous")

    def boom(*_: object) -> int:
        raise BuildError("simulated")

    monkeypatch.setattr(archive._Writer, "unit", boom)
    with pytest.raises(BuildError):
        pack_tree(root, tmp_path / "o.tar.zst")
    assert (tmp_path / "o.tar.zst").read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.tar.zst", "t"]


@pytest.mark.parametrize(
    ("kind", "st_mode", "mode"),
    [
        ("dir", 0o700, 0o755),
        ("file", 0o700, 0o755),
        ("file", 0o100, 0o755),
        ("file", 0o666, 0o644),
        ("symlink", 0o777, 0o777),
    ],
)
def test_normalised_mode(kind: str, st_mode: int, mode: int) -> None:
    assert archive.normalised_mode(kind, st_mode) == mode


def test_windows_read_fallback_gives_the_same_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _make_tree(tmp_path / "t")
    native = pack_tree(root, tmp_path / "a.tar.zst")
    monkeypatch.setattr(tarbuffer, "_read_into", tarbuffer._read_into_copy)
    assert pack_tree(root, tmp_path / "b.tar.zst").sha256 == native.sha256


def test_worker_count_does_not_change_the_bytes_across_many_zstd_jobs(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    block = os.urandom(1 << 20)
    for i in range(24):  # 24 MiB: several multi-threaded zstd jobs at level 3
        (root / f"f{i:02d}").write_bytes(block[: (i + 1) * 40_000] + bytes(1 << 20) + block)
    digests = {pack_tree(root, tmp_path / f"{t}.tar.zst", threads=t).sha256 for t in (1, 2, 3)}
    assert len(digests) == 1


def test_every_level_uses_zstds_stock_tables(tmp_path: Path) -> None:
    default = archive.compression_parameters(archive.DEFAULT_LEVEL, 2)
    level3 = zstandard.ZstdCompressionParameters.from_level(3, threads=2)
    assert (default.compression_level, default.hash_log, default.chain_log) == (3, level3.hash_log, level3.chain_log)
    assert default.threads == 2 and default.write_checksum == 0
    stock = zstandard.ZstdCompressionParameters.from_level(19, threads=1)
    other = archive.compression_parameters(19, 0)  # single-threaded mode maps to one worker
    assert (other.hash_log, other.chain_log, other.threads) == (stock.hash_log, stock.chain_log, 1)
    # A plain zstd frame without zstd's content checksum (the manifest's sha256 covers the bytes).
    root = _make_tree(tmp_path / "t")
    packed = pack_tree(root, tmp_path / "o.tar.zst")
    assert not zstandard.get_frame_parameters(packed.path.read_bytes()[:18]).has_checksum


def test_path_walk_fallback_gives_the_same_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no dir_fd: the path-based walk must write the same bytes."""
    root = _make_tree(tmp_path / "t")
    native = pack_tree(root, tmp_path / "a.tar.zst")
    assert isinstance(treewalk.make_tree(root), treewalk.FdTree)
    monkeypatch.setattr(treewalk, "_FD_WALK", False)
    assert type(treewalk.make_tree(root)) is treewalk.PathTree
    assert pack_tree(root, tmp_path / "b.tar.zst").sha256 == native.sha256


def _pack_swapping(
    root: Path, name: str, swap: Callable[[Path], object], monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """Pack ``root``, replacing member ``name`` on disk right after the walk listed it (``moment`` "walk")
    or right after its unit was measured, before its files are opened ("measure")."""

    def swap_it() -> None:
        (root / name).unlink()
        swap(root / name)

    if moment == "walk":
        real_plan = archive.plan_pack

        def plan(tree_root: Path) -> archive.Plan:
            planned = real_plan(tree_root)
            swap_it()
            return planned

        monkeypatch.setattr(archive, "plan_pack", plan)
    else:
        real_measure = archive.measure_unit

        def measure(unit: Unit, *args: Any) -> tuple[Unit, dict[str, os.stat_result]]:
            measured = real_measure(unit, *args)
            if any(m.name == name for m in unit.members):
                swap_it()
            return measured

        monkeypatch.setattr(archive, "measure_unit", measure)
    pack_tree(root, root.parent / "swapped.tar.zst")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
@pytest.mark.parametrize("moment", ["walk", "measure"])
def test_file_swapped_for_a_fifo_mid_pack_fails_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    root = _make_tree(tmp_path / "t")
    with pytest.raises(BuildError, match="stopped being a regular file") as info:
        _pack_swapping(root, "box.json", os.mkfifo, monkeypatch, moment)
    assert str(root / "box.json") in str(info.value)


@pytest.mark.parametrize(
    ("moment", "refusal"),
    [("walk", "stopped being a regular file"), ("measure", "cannot read")],  # lstat sees it, or O_NOFOLLOW
)
def test_file_swapped_for_a_symlink_mid_pack_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str, refusal: str
) -> None:
    root = _make_tree(tmp_path / "t")
    secret = tmp_path / "secret"
    secret.write_text("outside the tree")
    with pytest.raises(BuildError, match=refusal) as info:
        _pack_swapping(root, "box.json", lambda p: p.symlink_to(secret), monkeypatch, moment)
    assert "box.json" in str(info.value)


def test_root_given_through_a_symlink_is_followed(tmp_path: Path) -> None:
    root = _make_tree(tmp_path / "t")
    (tmp_path / "alias").symlink_to(root)
    assert (
        pack_tree(tmp_path / "alias", tmp_path / "a.tar.zst").sha256 == pack_tree(root, tmp_path / "b.tar.zst").sha256
    )


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open descriptors through /proc")
def test_unreadable_directory_fails_naming_it_and_leaks_no_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _make_tree(tmp_path / "t")
    walker = type(treewalk.make_tree(root))  # the plan walks by directory descriptors where there are some
    real_scan = walker.scan
    scanned: list[int | str] = []

    def scan(self: treewalk.FdTree, handle: int) -> list[os.DirEntry[str]]:
        scanned.append(handle)
        if len(scanned) == 3:  # the root, then "empty", then "model-cache"
            raise PermissionError(13, "Permission denied")
        return real_scan(self, handle)

    monkeypatch.setattr(walker, "scan", scan)
    before = len(list(Path("/proc/self/fd").iterdir()))
    with pytest.raises(BuildError, match=r"cannot read .*model-cache: Permission denied"):
        pack_tree(root, tmp_path / "o.tar.zst")
    assert len(list(Path("/proc/self/fd").iterdir())) == before
    assert not (tmp_path / "o.tar.zst").exists()


def test_tree_files_find_members_by_name_with_and_without_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the walk the packer measures and opens files by member name: through the root's descriptor, or
    (Windows: no dir_fd) by a full path in the platform's own separators."""
    root = _make_tree(tmp_path / "t")
    with treewalk.TreeFiles(str(root)) as files:
        assert files.lstat("venv/bin/python3.11").st_size == (root / "venv/bin/python3.11").stat().st_size
        fd = files.open("venv/bin/python3.11")
        os.close(fd)
    monkeypatch.setattr(treewalk, "_FD_WALK", False)
    with treewalk.TreeFiles(str(root)) as files:
        assert files.path("venv/bin/python3.11") == str(root / "venv" / "bin" / "python3.11")
        assert files.lstat("venv/bin/python3.11").st_size == (root / "venv/bin/python3.11").stat().st_size
    monkeypatch.setattr(os, "sep", "\\")
    assert treewalk.TreeFiles("C:\\boxes\\b").path("venv/Lib/site.py") == "C:\\boxes\\b\\venv\\Lib\\site.py"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open descriptors through /proc")
def test_a_pack_that_fails_mid_way_leaks_no_descriptors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _make_tree(tmp_path / "t")
    before = len(list(Path("/proc/self/fd").iterdir()))
    with pytest.raises(BuildError, match="stopped being a regular file"):
        _pack_swapping(root, "venv/lib/python3.11/os.py", lambda p: p.symlink_to("x"), monkeypatch, "walk")
    assert len(list(Path("/proc/self/fd").iterdir())) == before


def test_a_finished_pack_leaves_nothing_for_the_cyclic_collector(tmp_path: Path) -> None:
    """The packer's compressors and buffers (~120 MiB on a torch box) are freed when pack_tree returns:
    a pool future's callback once closed over the writer, a cycle that kept them until a collection: the
    build carried them into its self-test stage, whose peak was 382 MiB on a torch runtime box."""
    import gc

    def packers() -> dict[int, str]:
        kinds = (archive._Writer, archive.FrameSink)
        return {id(o): type(o).__name__ for o in gc.get_objects() if isinstance(o, kinds)}

    root = _make_tree(tmp_path / "t")
    gc.collect()
    gc.disable()
    try:
        before = packers()  # an earlier test's failed pack may still be held, by the exception it raised
        pack_tree(root, tmp_path / "out.tar.zst")
        left = [name for key, name in packers().items() if key not in before]
    finally:
        gc.enable()
    assert left == []


@pytest.mark.parametrize("enabled", [True, False], ids=["collector-on", "collector-off"])
def test_the_walk_pauses_the_cyclic_collector_and_restores_it_even_on_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    import gc

    root = _make_tree(tmp_path / "t")
    seen: list[bool] = []
    real = packplan.group_units

    def grouping(*args: Any) -> list[Unit]:
        seen.append(gc.isenabled())
        if len(seen) == 2:
            raise BuildError("the second walk fails", fix="-")
        return real(*args)

    monkeypatch.setattr(packplan, "group_units", grouping)
    (gc.enable if enabled else gc.disable)()
    try:
        assert packplan.plan_pack(root).units
        after = gc.isenabled()
        with pytest.raises(BuildError):
            packplan.plan_pack(root)
        after_error = gc.isenabled()
    finally:
        gc.enable()
    assert seen == [False, False]
    assert (after, after_error) == (enabled, enabled)
