"""unpack_archive: round trips and every hostile archive we know of.

Hostile archives are crafted with stdlib tarfile + zstandard.  For each one we check the message
(archive, member, rule), that DEST does not exist, that no temp directory is left beside it and
that nothing appeared outside the work folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import os
import sys
import tarfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard

from scrollcase.errors import BuildError, IntegrityError, UsageError, describe_path
from scrollcase.format.archive.extract import _CREATE_FLAGS, DEFAULT_LIMITS, Limits, create_flags, windows_names_default
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.unpack import UnpackResult, absolute_as_given, prepare_dest, unpack_archive

Member = tuple[tarfile.TarInfo, bytes | None]


@dataclass
class Crafted:
    path: Path
    size: int
    sha256: str


def _info(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "", mode: int = 0o644
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname, info.mode = kind, size, link, mode
    return info


def _file(name: str, data: bytes, mode: int = 0o644) -> Member:
    return _info(name, size=len(data), mode=mode), data


def _tar_bytes(members: list[Member]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return raw.getvalue()


def _write(work: Path, compressed: bytes, name: str = "box.tar.zst") -> Crafted:
    path = work / name
    path.write_bytes(compressed)
    return Crafted(path, len(compressed), hashlib.sha256(compressed).hexdigest())


def craft(work: Path, members: list[Member]) -> Crafted:
    return _write(work, zstandard.ZstdCompressor(level=3).compress(_tar_bytes(members)))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def unpack(c: Crafted, dest: Path, limits: Limits | None = None) -> UnpackResult:
    return unpack_archive(c.path, dest, expected_size=c.size, expected_sha256=c.sha256, limits=limits or DEFAULT_LIMITS)


def assert_rejected(c: Crafted, work: Path, *fragments: str, limits: Limits | None = None) -> None:
    outside_before = sorted(p.name for p in work.parent.iterdir())
    with pytest.raises(IntegrityError) as info:
        unpack(c, work / "dest", limits)
    message = str(info.value)
    label = describe_path(c.path) or str(c.path)
    assert label in message, message
    rest = message.replace(label, "<archive>")  # pytest's folder names the test case ("..._fifo_0"): not evidence
    for fragment in fragments:
        assert fragment in rest, message
    assert sorted(p.name for p in work.iterdir()) == [c.path.name], "temp dir or DEST left behind"
    assert sorted(p.name for p in work.parent.iterdir()) == outside_before, "wrote outside"


# ---------------------------------------------------------------- round trips


def test_round_trip_of_a_packed_tree(tmp_path: Path, work: Path) -> None:
    src = tmp_path / "src"
    (src / "venv" / "bin").mkdir(parents=True)
    (src / "venv" / "bin" / "python3").write_bytes(b"\x7fELF" + os.urandom(100_000))
    (src / "venv" / "bin" / "python3").chmod(0o755)
    (src / "venv" / "bin" / "python").symlink_to("python3")
    (src / "venv" / "lib").mkdir()
    (src / "venv" / "lib" / "x.py").write_text("x = 1\n")
    (src / "empty").mkdir()
    packed = pack_tree(src, work / "b.tar.zst")
    result = unpack_archive(packed.path, work / "dest", expected_size=packed.size, expected_sha256=packed.sha256)
    dest = work / "dest"
    assert result.dest == dest.absolute()  # as given, not resolved
    assert (result.files, result.entries, result.sha256) == (2, packed.entries, packed.sha256)
    assert (dest / "venv" / "bin" / "python3").read_bytes() == (src / "venv" / "bin" / "python3").read_bytes()
    assert os.access(dest / "venv" / "bin" / "python3", os.X_OK)
    assert os.readlink(dest / "venv" / "bin" / "python") == "python3"
    assert (dest / "empty").is_dir()
    assert sorted(p.name for p in work.iterdir()) == ["b.tar.zst", "dest"]


def test_without_an_expected_digest_the_result_gives_it_and_every_other_check_still_runs(work: Path) -> None:
    """The build's self-test unpacks its archive before its sha256 is known (pack_tree_unhashed)."""
    c = craft(work, [_file("f", b"1")])
    result = unpack_archive(c.path, work / "dest", expected_size=c.size, expected_sha256=None)
    assert result.sha256 == c.sha256 == hashlib.sha256(c.path.read_bytes()).hexdigest()
    hostile = craft(work, [_file("../escape", b"x")])
    with pytest.raises(IntegrityError, match="escape"):
        unpack_archive(hostile.path, work / "dest2", expected_size=hostile.size, expected_sha256=None)
    assert not (work / "dest2").exists()


def test_foreign_tar_with_hardlinks_implicit_dirs_and_pax(work: Path) -> None:
    c = craft(
        work,
        [
            _file("a/b/c.txt", b"hello", 0o4755),  # parents implicit; setuid dropped
            (_info("a/b/hard", tarfile.LNKTYPE, link="a/b/c.txt"), None),
            _file("ü" * 120, b"long unicode name"),
            (_info("a", tarfile.DIRTYPE), None),  # explicit dir after its implicit creation
        ],
    )
    result = unpack(c, work / "dest")
    dest = work / "dest"
    assert (dest / "a" / "b" / "hard").read_bytes() == b"hello"
    assert (dest / ("ü" * 120)).read_bytes() == b"long unicode name"
    assert (dest / "a" / "b" / "c.txt").stat().st_mode & 0o7777 == 0o755
    assert result.files == 3


def test_dest_may_be_an_empty_folder(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    (work / "dest").mkdir()
    unpack(c, work / "dest")
    assert (work / "dest" / "f").read_bytes() == b"1"


def test_dest_that_is_not_empty_is_refused(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    (work / "dest").mkdir()
    (work / "dest" / "keep").write_text("mine")
    with pytest.raises(UsageError, match="not an empty folder"):
        unpack(c, work / "dest")
    assert (work / "dest" / "keep").read_text() == "mine"


# ---------------------------------------------------------------- digest and stream integrity


def test_wrong_size_is_refused_before_reading(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    with pytest.raises(IntegrityError, match=r"is \d+ bytes, expected 1"):
        unpack_archive(c.path, work / "dest", expected_size=1, expected_sha256=c.sha256)
    assert not (work / "dest").exists()


def test_wrong_sha256(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    assert_rejected(Crafted(c.path, c.size, "0" * 64), work, "sha256 is", "expected " + "0" * 64)


def test_flipped_byte_is_a_digest_mismatch(work: Path) -> None:
    c = craft(work, [_file(f"f{i}", os.urandom(5000)) for i in range(20)])
    data = bytearray(c.path.read_bytes())
    data[len(data) // 2] ^= 0x40
    c.path.write_bytes(bytes(data))
    assert_rejected(c, work, "sha256 is", c.sha256)


def test_truncated_archive_with_matching_digest(work: Path) -> None:
    full = zstandard.ZstdCompressor().compress(_tar_bytes([_file("f", os.urandom(20_000))]))
    assert_rejected(_write(work, full[: len(full) // 2]), work, "truncated")


def test_tar_without_end_marker(work: Path) -> None:
    tar = _tar_bytes([_file("f", b"x" * 10)])
    body = tar[:1024]  # header + one data block, no end-of-archive blocks
    assert_rejected(_write(work, zstandard.ZstdCompressor().compress(body)), work, "truncated")


def test_not_zstd(work: Path) -> None:
    assert_rejected(_write(work, b"this is not zstd at all" * 10), work, "zstd")


def test_data_after_the_zstd_frame(work: Path) -> None:
    good = zstandard.ZstdCompressor().compress(_tar_bytes([_file("f", b"1")]))
    assert_rejected(_write(work, good + b"junk"), work, "after the end of the zstd frame")


def test_corrupt_header_checksum(work: Path) -> None:
    tar = bytearray(_tar_bytes([_file("f", b"1")]))
    tar[0] = ord("g")
    assert_rejected(_write(work, zstandard.ZstdCompressor().compress(bytes(tar))), work, "checksum")


# ---------------------------------------------------------------- hostile members

HOSTILE: dict[str, tuple[Callable[[], list[Member]], str, str]] = {
    "absolute": (lambda: [_file("/tmp/evil", b"x")], "/tmp/evil", "absolute path"),
    "dotdot": (lambda: [_file("../evil", b"x")], "../evil", "'..'"),
    "dotdot-deep": (lambda: [_file("a/../../evil", b"x")], "a/../../evil", "'..'"),
    "backslash": (lambda: [_file("a\\..\\evil", b"x")], "evil", "backslash"),
    "drive": (lambda: [_file("C:/evil", b"x")], "C:/evil", "drive letter"),
    "symlink-absolute": (lambda: [(_info("l", tarfile.SYMTYPE, link="/etc"), None)], "'l'", "absolute"),
    "symlink-outside": (
        lambda: [(_info("a/l", tarfile.SYMTYPE, link="../../outside"), None)],
        "a/l",
        "outside the archive root",
    ),
    "symlink-chain": (
        lambda: [
            (_info("d", tarfile.DIRTYPE), None),
            (_info("d/l1", tarfile.SYMTYPE, link=".."), None),
            (_info("d/l2", tarfile.SYMTYPE, link="l1/../.."), None),
        ],
        "d/l2",
        "outside the archive root",
    ),
    "write-through-symlink": (
        lambda: [(_info("l", tarfile.SYMTYPE, link="."), None), _file("l/evil", b"x")],
        "l/evil",
        "which is a symlink",
    ),
    "hardlink-outside": (lambda: [(_info("h", tarfile.LNKTYPE, link="../outside"), None)], "'h'", "'..'"),
    "hardlink-absolute": (lambda: [(_info("h", tarfile.LNKTYPE, link="/etc/passwd"), None)], "'h'", "absolute"),
    "hardlink-to-symlink": (
        lambda: [(_info("l", tarfile.SYMTYPE, link="."), None), (_info("h", tarfile.LNKTYPE, link="l"), None)],
        "'h'",
        "not an earlier regular file",
    ),
    "chardev": (lambda: [(_info("dev", tarfile.CHRTYPE), None)], "'dev'", "device"),
    "blockdev": (lambda: [(_info("dev", tarfile.BLKTYPE), None)], "'dev'", "device"),
    "fifo": (lambda: [(_info("p", tarfile.FIFOTYPE), None)], "'p'", "fifo"),
    "duplicate": (lambda: [_file("f", b"1"), _file("f", b"2")], "'f'", "duplicate"),
    "duplicate-dir-file": (lambda: [(_info("d", tarfile.DIRTYPE), None), _file("d", b"2")], "'d'", "duplicate"),
    # "d" exists as an implicit directory (the parent of d/f): only a directory member may name it again
    "implicit-dir-then-file": (lambda: [_file("d/f", b"1"), _file("d", b"2")], "'d'", "duplicate"),
    "implicit-dir-then-symlink": (
        lambda: [_file("d/f", b"1"), (_info("d", tarfile.SYMTYPE, link="e"), None)],
        "'d'",
        "duplicate",
    ),
    "file-then-dir": (lambda: [_file("d", b"1"), (_info("d", tarfile.DIRTYPE), None)], "'d'", "duplicate"),
    "symlink-then-dir": (
        lambda: [(_info("d", tarfile.SYMTYPE, link="e"), None), (_info("d", tarfile.DIRTYPE), None)],
        "'d'",
        "duplicate",
    ),
    "hardlink-to-directory": (
        lambda: [(_info("d", tarfile.DIRTYPE), None), (_info("h", tarfile.LNKTYPE, link="d"), None)],
        "'h'",
        "not an earlier regular file",
    ),
    "file-as-parent": (lambda: [_file("f", b"1"), _file("f/g", b"2")], "f/g", "which is a file"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_member(work: Path, case: str) -> None:
    members, member, rule = HOSTILE[case]
    assert_rejected(craft(work, members()), work, member, rule)


def test_outside_symlink_followed_by_write_never_escapes(work: Path) -> None:
    target = work.parent / "escaped"
    c = craft(work, [(_info("l", tarfile.SYMTYPE, link="../escaped"), None), _file("l/x", b"pwned")])
    assert_rejected(c, work, "'l/x'")
    assert not target.exists()


def test_case_insensitive_collision(work: Path) -> None:
    c = craft(work, [_file("Lib/a.py", b"1"), _file("lib/A.py", b"2")])
    assert_rejected(c, work, "lib/A.py", "case-insensitive", limits=Limits(case_insensitive=True))
    unpack(c, work / "dest", Limits(case_insensitive=False))  # fine where names are case-sensitive


def test_bomb_by_compression_ratio(work: Path) -> None:
    c = craft(work, [_file("zeros", bytes(8 << 20))])
    assert_rejected(c, work, "'zeros'", "compression-ratio", limits=Limits(max_ratio=10, ratio_floor=1 << 20))


def test_bomb_by_total_size(work: Path) -> None:
    c = craft(work, [_file("a", os.urandom(4096)), _file("b", os.urandom(4096))])
    assert_rejected(c, work, "'b'", "total-size", limits=Limits(max_total_bytes=6000))


def test_bomb_by_member_count(work: Path) -> None:
    c = craft(work, [_file(f"f{i}", b"") for i in range(11)])
    assert_rejected(c, work, "'f10'", "more than 10 members", limits=Limits(max_members=10))


def test_digest_mismatch_outranks_a_hostile_member(work: Path) -> None:
    c = craft(work, [_file("../evil", b"x")])
    assert_rejected(Crafted(c.path, c.size, "1" * 64), work, "sha256 is")


def test_windows_reserved_names_when_enabled(work: Path) -> None:
    c = craft(work, [_file("venv/Lib/aux.py", b"1")])
    assert_rejected(c, work, "venv/Lib/aux.py", "reserved device name", limits=Limits(windows_names=True))


def test_zeros_after_the_end_marker_are_bounded(work: Path) -> None:
    # 64 MiB of zeros compress to a few KiB; a reader that drained them all would be a CPU bomb.
    tar = _tar_bytes([_file("f", b"1")]) + bytes(64 << 20)
    c = _write(work, zstandard.ZstdCompressor(level=3).compress(tar))
    assert_rejected(c, work, "after the end-of-archive marker")


def test_many_extended_headers_count_against_the_budget(work: Path) -> None:
    members = [_file("d" * 200 + f"/{i}", b"") for i in range(300)]  # each needs a pax/GNU long name
    assert_rejected(craft(work, members), work, "limit", limits=Limits(max_ratio=1, ratio_floor=100_000))


def test_a_full_disk_is_named_without_a_none_and_leaves_nothing(
    tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC arrives from os.write with no file name: the message must not end in "(None)"."""
    import errno

    from scrollcase.errors import ScrollcaseError
    from scrollcase.format.archive import unpack as unpack_mod

    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(10_000))
    packed = pack_tree(src, work / "b.tar.zst")

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(unpack_mod.os, "write", full)
    with pytest.raises(ScrollcaseError) as info:
        unpack_archive(packed.path, work / "dest", expected_size=packed.size, expected_sha256=packed.sha256)
    assert "No space left on device" in str(info.value) and "(None)" not in info.value.render()
    assert "[Errno" not in str(info.value)  # the reason as the OS words it, not the exception's repr-like text
    assert sorted(p.name for p in work.iterdir()) == ["b.tar.zst"]


# ---------------------------------------------------------------- DEST's path as given (issue #17)


def test_dest_keeps_a_symlinked_parent_and_relocates_to_it(tmp_path: Path, work: Path) -> None:
    placeholder = "/opt/scrollcase/" + "_placehold" * 18
    box_json = (
        b'{"relocation": {"placeholder": "%s", "files": [{"path": "cfg", "mode": "text"}]}}' % placeholder.encode()
    )
    crafted = craft(work, [_file("box.json", box_json), _file("cfg", f"home={placeholder}\n".encode())])
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real", target_is_directory=True)
    result = unpack(crafted, tmp_path / "link" / "box")
    assert result.dest == tmp_path / "link" / "box"
    assert (tmp_path / "real" / "box" / "cfg").read_text() == f"home={tmp_path}/link/box\n"


def test_absolute_as_given_removes_dots_unless_a_symlink_makes_them_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "link").symlink_to("a/deep", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    assert absolute_as_given(Path("link/box")) == tmp_path / "link" / "box"
    assert absolute_as_given(Path("a/./deep/../box")) == tmp_path / "a" / "box"
    # link/.. is tmp_path/a (the OS follows the link first), not tmp_path: the parent is resolved
    assert absolute_as_given(Path("link/../box")) == tmp_path.resolve() / "a" / "box"


def test_a_small_archive_may_exceed_the_compression_ratio(work: Path) -> None:
    """Below DEFAULT_LIMITS.ratio_floor (64 MiB unpacked) the ratio is not held against an archive: a
    megabyte of zeros (ratio ~ 10,000) is headers-of-empty-files territory, not a bomb."""
    assert DEFAULT_LIMITS.ratio_floor == 64 << 20
    c = craft(work, [_file("zeros", bytes(1 << 20))])
    assert c.size * DEFAULT_LIMITS.max_ratio < 1 << 20
    result = unpack(c, work / "dest")
    assert (work / "dest" / "zeros").stat().st_size == 1 << 20 and result.files == 1


def test_the_default_limits_are_the_documented_ones() -> None:
    """docs/archive.md ("bombs"): 1,000,000 members, 512 GiB, 200x the archive's size once past 64 MiB;
    Windows rules on Windows only, case-insensitive names on Windows and macOS."""
    assert (DEFAULT_LIMITS.max_members, DEFAULT_LIMITS.max_total_bytes) == (1_000_000, 512 << 30)
    assert (DEFAULT_LIMITS.max_ratio, DEFAULT_LIMITS.ratio_floor) == (200.0, 64 << 20)
    assert DEFAULT_LIMITS.windows_names is (sys.platform == "win32")
    assert DEFAULT_LIMITS.case_insensitive is (sys.platform in ("win32", "darwin"))


def test_files_are_created_exclusively_and_never_through_a_link() -> None:
    """The second line of defence behind the in-memory checks: O_EXCL (and O_NOFOLLOW where it exists)."""
    assert _CREATE_FLAGS & os.O_EXCL and _CREATE_FLAGS & os.O_CREAT and _CREATE_FLAGS & os.O_WRONLY
    assert _CREATE_FLAGS & getattr(os, "O_NOFOLLOW", 0) == getattr(os, "O_NOFOLLOW", 0)


@pytest.mark.skipif(sys.platform == "win32", reason="Windows names are refused there by default")
def test_windows_device_names_are_fine_elsewhere_by_default(work: Path) -> None:
    c = craft(work, [_file("venv/Lib/aux.py", b"1")])
    unpack(c, work / "dest")
    assert (work / "dest" / "venv" / "Lib" / "aux.py").read_bytes() == b"1"


def test_a_case_collision_is_refused_whichever_name_comes_first(work: Path) -> None:
    c = craft(work, [_file("lib/A.py", b"1"), _file("Lib/a.py", b"2")])
    assert_rejected(c, work, "Lib/a.py", "collides with lib/A.py", limits=Limits(case_insensitive=True))


def test_data_a_directory_member_carries_is_skipped(work: Path) -> None:
    """Some tar writers give a directory a size; its data is stepped over, padding included."""
    members = [(_info("d", tarfile.DIRTYPE, size=700), b"x" * 700), _file("d/f", b"after the directory's data")]
    c = craft(work, members)
    unpack(c, work / "dest")
    assert (work / "dest" / "d" / "f").read_bytes() == b"after the directory's data"


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_link_member_that_carries_data_is_refused(work: Path, kind: str) -> None:
    link = _info("l", tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE, size=5, link="f")
    c = craft(work, [_file("f", b"1"), (link, b"extra")])
    assert_rejected(c, work, "'l'", f"{kind} member carries data")


@pytest.mark.parametrize(
    ("mode", "expected"),
    [(0o644, 0o644), (0o600, 0o644), (0o700, 0o755), (0o4711, 0o755), (0o645, 0o755), (0o654, 0o755)],
)
def test_a_file_is_unpacked_0755_if_any_execute_bit_is_set_else_0644(work: Path, mode: int, expected: int) -> None:
    c = craft(work, [_file("f", b"1", mode)])
    unpack(c, work / "dest")
    if os.name != "nt":
        assert (work / "dest" / "f").stat().st_mode & 0o7777 == expected


def test_a_pax_size_that_is_not_a_number_is_refused(work: Path) -> None:
    info = _info("f", size=1)
    info.pax_headers = {"size": "one"}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(b"1"))
    c = _write(work, zstandard.ZstdCompressor(level=3).compress(raw.getvalue()))
    assert_rejected(c, work, "bad pax size record")


def test_an_archive_split_over_several_zstd_frames_unpacks(work: Path) -> None:
    """scrollcase packs one frame per unit; the decompressor reads across every frame boundary."""
    tar = _tar_bytes([_file("a", os.urandom(3000)), _file("b", b"second")])
    cut = [0, 700, 1900, len(tar)]
    frames = b"".join(zstandard.ZstdCompressor(level=3).compress(tar[i:j]) for i, j in itertools.pairwise(cut))
    c = _write(work, frames)
    result = unpack(c, work / "dest")
    assert (work / "dest" / "b").read_bytes() == b"second" and result.files == 2


def test_nothing_is_relocated_without_a_box_json_or_its_relocation_entry(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    assert unpack(c, work / "plain").relocated_files == 0
    c = craft(work, [_file("box.json", b'{"boxId": "b"}')])
    assert unpack(c, work / "no-relocation").relocated_files == 0


def test_the_size_budget_counts_each_member_with_its_header(work: Path) -> None:
    """Each member declares its size plus a 512-byte header; a budget met exactly is not exceeded."""
    c = craft(work, [_file(name, bytes(512)) for name in "abc"])  # 3 x (512 + 512) = 3072 declared
    assert_rejected(c, work, "'c'", "would exceed 3071 bytes", limits=Limits(max_total_bytes=3071))
    assert unpack(c, work / "exact", Limits(max_total_bytes=3072)).files == 3


def test_past_the_floor_the_budget_is_the_ratio_times_the_archive_size(work: Path) -> None:
    c = craft(work, [_file("noise", os.urandom(2 << 20))])  # incompressible: ratio ~1
    assert unpack(c, work / "dest", Limits(max_ratio=10, ratio_floor=1 << 20)).files == 1


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_directories_are_created_0755(work: Path) -> None:
    c = craft(work, [(_info("d", tarfile.DIRTYPE, mode=0o700), None), _file("d/f", b"1"), _file("implicit/f", b"2")])
    unpack(c, work / "dest")
    assert (work / "dest" / "d").stat().st_mode & 0o777 == 0o755 & ~_umask()
    assert (work / "dest" / "implicit").stat().st_mode & 0o777 == 0o755 & ~_umask()


def test_limits_and_results_are_values_that_cannot_change(work: Path) -> None:
    result = unpack(craft(work, [_file("f", b"1")]), work / "dest")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.files = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_LIMITS.max_members = 2  # type: ignore[misc]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_dest_name_of_exactly_255_bytes_is_fine_and_256_is_refused(work: Path) -> None:
    """NAME_MAX (255 bytes, ext4 and most filesystems): the limit itself is a valid name."""
    c = craft(work, [_file("f", b"1")])
    assert unpack(c, work / ("d" * 255)).files == 1
    with pytest.raises(UsageError, match="longer than 255 bytes"):
        unpack(c, work / ("e" * 256))


def test_a_symlink_the_filesystem_cannot_create_is_a_build_error(work: Path) -> None:
    """A target longer than the system's PATH_MAX is inside the root by every rule, but os.symlink refuses it."""
    c = craft(work, [(_info("l", tarfile.SYMTYPE, link="t" * 5000), None)])
    with pytest.raises(BuildError, match="cannot create symlink l: File name too long"):
        unpack(c, work / "dest")
    assert sorted(p.name for p in work.iterdir()) == [c.path.name]


def test_a_symlink_parent_that_sorts_after_its_target_is_still_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``z/link/..`` is ``a`` (the link's target's parent): the lexical ``z`` is not taken for it."""
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "link").symlink_to(tmp_path / "a" / "deep", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    assert absolute_as_given(Path("z/link/../box")) == tmp_path.resolve() / "a" / "box"


def test_an_implicit_folder_collides_with_a_later_member_of_another_case(work: Path) -> None:
    c = craft(work, [_file("Lib/a.py", b"1"), _file("lib", b"2")])
    assert_rejected(c, work, "'lib'", "collides with Lib", limits=Limits(case_insensitive=True))


def test_extended_headers_alone_can_exceed_the_budget(work: Path) -> None:
    """A long name costs two blocks (GNU header + name) before the member's own header: 1536 bytes read
    for 1023 declared + 512.  The budget is checked against the bytes read too, and met exactly is fine."""
    c = craft(work, [_file("n" * 200, bytes(1023))])
    assert_rejected(
        c, work, "'" + "n" * 200 + "'", "unpacked size exceeds 1535 bytes", limits=Limits(max_total_bytes=1535)
    )
    assert unpack(c, work / "exact", Limits(max_total_bytes=1536)).files == 1


def test_an_archive_shorter_than_expected_is_refused_by_its_size(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    with pytest.raises(IntegrityError, match=rf"is {c.size} bytes, expected {c.size + 1}\b"):
        unpack_archive(c.path, work / "dest", expected_size=c.size + 1, expected_sha256=c.sha256)
    assert sorted(p.name for p in work.iterdir()) == [c.path.name]


def test_two_implicit_folders_that_differ_only_in_case_collide(work: Path) -> None:
    """``Lib/a.py`` then ``lib/b.py``: one folder on a case-insensitive filesystem, refused like two members
    (not left to the second mkdir's "file exists", nor unpacked as two folders where case matters)."""
    c = craft(work, [_file("Lib/a.py", b"1"), _file("lib/b.py", b"2")])
    assert_rejected(c, work, "'lib/b.py'", "collides with Lib", limits=Limits(case_insensitive=True))


def test_an_archive_that_cannot_be_read_says_so_rather_than_naming_an_empty_digest(work: Path) -> None:
    """A folder passes the size check (its st_size) but cannot be read: no bytes, so no digest to compare."""
    folder = work / "box.tar.zst"
    folder.mkdir()
    with pytest.raises(IntegrityError, match="cannot read the archive: Is a directory") as info:
        unpack_archive(folder, work / "dest", expected_size=folder.stat().st_size, expected_sha256="0" * 64)
    assert "sha256" not in str(info.value)
    assert sorted(p.name for p in work.iterdir()) == [folder.name]


def test_files_are_opened_binary_where_the_platform_has_o_binary_and_without_following_where_it_has_o_nofollow() -> (
    None
):
    """Windows has O_BINARY and no O_NOFOLLOW, POSIX the other way round; each is used only where it exists."""
    base = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    assert create_flags(types.SimpleNamespace()) == base
    assert create_flags(types.SimpleNamespace(O_BINARY=0x8000)) == base | 0x8000
    assert create_flags(types.SimpleNamespace(O_NOFOLLOW=0x20000)) == base | 0x20000
    assert create_flags(types.SimpleNamespace(O_BINARY=0x8000, O_NOFOLLOW=0x20000)) == base | 0x8000 | 0x20000
    assert create_flags() == _CREATE_FLAGS


@pytest.mark.parametrize(
    ("platform", "expected"),
    [("".join(["win", "32"]), True), ("linux", False), ("darwin", False), ("cygwin", False)],
)
def test_windows_name_rules_hold_on_windows_only(platform: str, expected: bool) -> None:
    """The platform string is built at run time: sys.platform is not the literal's object either."""
    assert windows_names_default(platform) is expected


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_dest_itself_is_0755_like_any_folder_of_the_box(work: Path) -> None:
    unpack(craft(work, [_file("f", b"1")]), work / "dest")
    assert (work / "dest").stat().st_mode & 0o7777 == 0o755


def test_missing_parent_folders_of_dest_are_created(work: Path) -> None:
    unpack(craft(work, [_file("f", b"1")]), work / "a" / "b" / "dest")
    assert (work / "a" / "b" / "dest" / "f").read_bytes() == b"1"


def test_a_dest_under_a_symlink_loop_is_a_usage_error(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    (work / "loop").symlink_to("loop")
    with pytest.raises(UsageError, match="its parent folder cannot be resolved"):
        unpack(c, work / "loop" / "dest")
    assert sorted(p.name for p in work.iterdir()) == sorted([c.path.name, "loop"])


def test_a_corrupt_block_is_named_even_with_more_archive_behind_it(work: Path) -> None:
    """The frame walker's finding is kept, not raised out of the reading thread: a frame whose first block
    has the reserved type, then more than one read's worth of bytes the walker would stumble over again."""
    good = zstandard.ZstdCompressor().compress(_tar_bytes([_file("f", b"1")]))
    reserved_block = b"\x28\xb5\x2f\xfd" + b"\x00\x00" + b"\x06\x00\x00"  # magic, header, block of type 3
    c = _write(work, good + reserved_block + bytes(range(256)) * (8 << 10))  # 2 MiB > READ_CHUNK
    assert_rejected(c, work, "reserved zstd block type")


def _relocatable(work: Path) -> Crafted:
    placeholder = "/opt/scrollcase/" + "_placehold" * 18
    box_json = (
        b'{"relocation": {"placeholder": "%s", "files": [{"path": "cfg", "mode": "text"}]}}' % placeholder.encode()
    )
    return craft(work, [_file("box.json", box_json), _file("cfg", f"home={placeholder}\n".encode())])


def test_a_box_unpacked_beside_its_final_place_is_relocated_and_receipted_for_that_place(work: Path) -> None:
    """An upgrade unpacks into a sibling and swaps it in: the files and the receipt name the final path."""
    result = unpack_archive(
        (c := _relocatable(work)).path,
        work / "incoming",
        expected_size=c.size,
        expected_sha256=c.sha256,
        relocate_to=work / "final",
    )
    assert result.dest == work / "incoming" and result.relocated_files == 1
    assert (work / "incoming" / "cfg").read_text() == f"home={work}/final\n"
    assert json.loads((work / "incoming" / "box.installed.json").read_text())["dest"] == f"{work}/final"


def test_the_result_counts_the_archive_and_tar_bytes_and_progress_is_told_every_archive_byte(work: Path) -> None:
    members = [_file("a", os.urandom(3000)), _file("b", b"2")]
    c = craft(work, members)
    told: list[int] = []
    result = unpack_archive(c.path, work / "dest", expected_size=c.size, expected_sha256=c.sha256, on_bytes=told.append)
    assert (result.size, result.uncompressed_bytes) == (c.size, len(_tar_bytes(members)))
    assert sum(told) == c.size


def test_a_dest_in_a_deleted_working_folder_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installer checks DEST before downloading: a relative DEST needs the working folder, which is gone."""
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()
    with pytest.raises(UsageError, match="its parent folder cannot be resolved"):
        prepare_dest(Path("dest"))


def test_a_folder_member_may_name_its_implied_folder_again_where_case_is_ignored(work: Path) -> None:
    c = craft(work, [_file("Lib/a.py", b"1"), (_info("Lib", tarfile.DIRTYPE), None)])
    assert unpack(c, work / "dest", Limits(case_insensitive=True)).entries == 2


@pytest.mark.parametrize("appears", ["folder", "dangling-symlink"])
def test_a_dest_that_appears_while_unpacking_is_kept_and_named(work: Path, appears: str) -> None:
    """Another process makes DEST (a folder with files, or a symlink to nowhere) while this unpack reads:
    the final rename fails, DEST is left as that process made it, and the message says what happened."""
    c = craft(work, [_file("f", b"1")])
    dest = work / "dest"

    def another_unpack(_: int) -> None:
        if appears == "folder" and not dest.exists():
            dest.mkdir()
            (dest / "theirs").write_text("theirs")
        elif appears == "dangling-symlink" and not dest.is_symlink():
            dest.symlink_to("nowhere")

    with pytest.raises(UsageError, match="it appeared while this unpack ran"):
        unpack_archive(c.path, dest, expected_size=c.size, expected_sha256=c.sha256, on_bytes=another_unpack)
    assert sorted(p.name for p in work.iterdir()) == [c.path.name, "dest"]
    assert (dest / "theirs").read_text() == "theirs" if appears == "folder" else os.readlink(dest) == "nowhere"


def test_a_missing_archive_is_named(work: Path) -> None:
    with pytest.raises(IntegrityError, match=r"cannot read archive .*gone\.tar\.zst: No such file or directory"):
        unpack_archive(work / "gone.tar.zst", work / "dest", expected_size=1, expected_sha256="0" * 64)
    assert list(work.iterdir()) == []


def test_a_frame_whose_content_fails_its_checksum_is_not_a_valid_zstd_stream(work: Path) -> None:
    """Well-formed frames and blocks (the walker is content) whose decompressed bytes do not match the
    frame's checksum: only the decompressor can tell, and its error is the message."""
    tar = _tar_bytes([_file("f", b"the same line again\n" * 2000)])
    frame = bytearray(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(tar))
    frame[-1] ^= 0xFF  # the last byte of the content checksum
    assert_rejected(_write(work, bytes(frame)), work, "not a valid zstd stream")


def test_past_the_floor_the_ratio_multiplies_the_archive_size(work: Path) -> None:
    """3 MiB of zeros compress to a few hundred bytes: a million times that is room, a million plus it is not."""
    c = craft(work, [_file("zeros", bytes(3 << 20))])
    assert c.size < 1000
    assert unpack(c, work / "dest", Limits(max_ratio=1_000_000, ratio_floor=1 << 20)).files == 1


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no folder can be made")
def test_a_temp_folder_that_cannot_be_made_is_a_build_error(work: Path) -> None:
    c = craft(work, [_file("f", b"1")])
    with pytest.raises(BuildError, match="cannot create a temp folder in /proc"):
        unpack(c, Path("/proc/scrollcase-unpack-test"))
