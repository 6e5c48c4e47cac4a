"""Atomic writes (temp names beside the target, streaming, moves), read-or-raise, and the user cache."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from scrollcase.errors import LockError
from scrollcase.io import files
from scrollcase.io.files import (
    ReadErrors,
    atomic_output,
    cache_entry,
    copy_range,
    finish_resumed,
    make_temp_dir,
    move_into_place,
    pid_alive,
    read_bytes,
    read_text,
    recover_swap,
    remove_stale_temps,
    replacing,
    replacing_dir,
    resume_path,
    swap_dir,
    temp_path,
    temp_pattern,
    user_cache_dir,
    write_atomic,
)


def test_write_atomic_replaces_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "file.json"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["file.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    write_atomic(target, b"old")
    with pytest.raises(TypeError):
        write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["file"]


@pytest.mark.parametrize(
    ("env", "platform", "expected"),
    [
        ({"SCROLLCASE_CACHE_DIR": "/c", "HOME": "/h"}, "linux", "/c"),
        ({"HOME": "/h"}, "linux", "/h/.cache/scrollcase"),
        ({"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "linux", "/x/scrollcase"),
        ({"HOME": "/h"}, "darwin", "/h/Library/Caches/scrollcase"),
        (
            {"USERPROFILE": "C:/Users/u", "LOCALAPPDATA": "C:/Users/u/AppData/Local"},
            "win32",
            "C:/Users/u/AppData/Local/scrollcase/Cache",
        ),
        ({"USERPROFILE": "C:/Users/u"}, "win32", "C:/Users/u/AppData/Local/scrollcase/Cache"),
    ],
)
def test_user_cache_dir_per_os(env: dict[str, str], platform: str, expected: str) -> None:
    assert user_cache_dir(env, platform) == Path(expected)


# --- temp names, streaming writes, moves -------------------------------------------------------------


def _dead_pid() -> int:
    """A pid no process has (near the highest one the kernel could hand out)."""
    return next(pid for pid in range(2**22 - 7, 2**22 - 1000, -1) if not pid_alive(pid))


def test_temp_names_say_which_process_made_them(tmp_path: Path) -> None:
    target = tmp_path / "box.tar.zst"
    temp = temp_path(target)
    match = temp_pattern(target).match(temp.name)
    assert temp.parent == tmp_path and match is not None and int(match.group(1)) == os.getpid()
    assert temp_path(target) != temp, "every temp name is fresh"
    assert temp_pattern(target, ".unpacking").match(make_temp_dir(target, ".unpacking").name)


def test_a_long_name_is_cut_so_the_temp_name_stays_under_name_max(tmp_path: Path) -> None:
    target = tmp_path / ("é" * 120)  # 240 bytes of UTF-8
    assert len(os.fsencode(temp_path(target).name)) < 255


@pytest.mark.skipif(sys.platform == "win32", reason="no cheap pid probe on Windows: temps are always kept")
def test_stale_temps_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "obj"
    dead = _dead_pid()
    stale_file = tmp_path / f".obj.{dead}-abc123.part"
    stale_dir = tmp_path / f".obj.{dead}-def456.part"
    live = tmp_path / f".obj.{os.getpid()}-abc123.part"
    other = tmp_path / f".other.{dead}-abc123.part"
    for path in (stale_file, live, other):
        path.write_bytes(b"x")
    stale_dir.mkdir()
    (stale_dir / "inner").write_bytes(b"x")
    assert sorted(remove_stale_temps(target)) == sorted([stale_file, stale_dir])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


def test_atomic_output_streams_and_renames_on_success(tmp_path: Path) -> None:
    target = tmp_path / "out" / "big.bin"
    with atomic_output(target) as out:
        out.write(b"a" * 10)
        out.write(b"b")
        assert not target.exists(), "nothing is visible before the block ends"
    assert target.read_bytes() == b"a" * 10 + b"b"
    assert [p.name for p in target.parent.iterdir()] == ["big.bin"]


def test_an_error_inside_the_block_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(target) as out:
        out.write(b"new")
        raise RuntimeError("a check of the new bytes failed")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["file"]


def test_replacing_lets_the_caller_check_the_temp_before_it_counts(tmp_path: Path) -> None:
    target = tmp_path / "wheel.whl"
    with pytest.raises(ValueError), replacing(target) as temp:
        temp.write_bytes(b"wrong")
        raise ValueError("sha256 mismatch")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_mode_sets_exact_permission_bits(tmp_path: Path) -> None:
    target = write_atomic(tmp_path / "tool", b"#!/bin/sh\n", mode=0o755)
    assert target.stat().st_mode & 0o7777 == 0o755


def test_move_into_place_renames_a_finished_file(tmp_path: Path) -> None:
    source = tmp_path / "work" / "box.tar.zst"
    source.parent.mkdir()
    source.write_bytes(b"archive")
    target = move_into_place(source, tmp_path / "dist" / "box.tar.zst")
    assert target.read_bytes() == b"archive" and not source.exists()


def test_replacing_dir_swaps_a_whole_folder(tmp_path: Path) -> None:
    dest = tmp_path / "channel"
    (dest / "old").mkdir(parents=True)
    with replacing_dir(dest) as tmp:
        (tmp / "noarch").mkdir()
    assert [p.name for p in dest.iterdir()] == ["noarch"] and [p.name for p in tmp_path.iterdir()] == ["channel"]
    with pytest.raises(RuntimeError), replacing_dir(dest) as tmp:
        (tmp / "half").mkdir()
        raise RuntimeError("indexing failed")
    assert [p.name for p in dest.iterdir()] == ["noarch"] and [p.name for p in tmp_path.iterdir()] == ["channel"]


def test_a_cache_entry_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "frames" / "ab" / "abcd"
    with pytest.raises(ValueError), cache_entry(target) as out:
        out.write(b"wrong bytes")
        raise ValueError("sha256 mismatch")
    assert list(target.parent.iterdir()) == []
    with cache_entry(target) as out:
        out.write(b"frame")
        assert not target.exists(), "nothing is visible before the block ends"
    assert [p.name for p in target.parent.iterdir()] == ["abcd"] and target.read_bytes() == b"frame"


def test_a_cache_entry_another_run_wrote_stands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "abcd"
    target.write_bytes(b"frame")

    def refused(self: Path, other: Path) -> Path:
        raise PermissionError(13, "in use")  # as Windows refuses a rename over a file open elsewhere

    monkeypatch.setattr(Path, "replace", refused)
    with cache_entry(target) as out:
        out.write(b"frame")
    assert [p.name for p in tmp_path.iterdir()] == ["abcd"]


@pytest.mark.skipif(sys.platform == "win32", reason="no cheap pid probe on Windows: temps are always kept")
def test_a_cache_entry_removes_what_killed_runs_left_for_it(tmp_path: Path) -> None:
    target = tmp_path / "abcd"
    stale = tmp_path / f".abcd.{_dead_pid()}-abc123.part"
    stale.write_bytes(b"half")
    with cache_entry(target) as out:
        out.write(b"frame")
    assert [p.name for p in tmp_path.iterdir()] == ["abcd"]


def _tree(folder: Path, marker: str) -> Path:
    folder.mkdir()
    (folder / "box.json").write_text(marker)
    return folder


def test_swap_dir_replaces_an_empty_target_or_keeps_the_old_one_as_previous(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    swap_dir(_tree(tmp_path / "new", "1"), dest)
    assert (dest / "box.json").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["dest"]
    previous = tmp_path / "previous"
    swap_dir(_tree(tmp_path / "new", "2"), dest, previous)
    assert (dest / "box.json").read_text() == "2" and (previous / "box.json").read_text() == "1"


def test_swap_dir_puts_the_old_tree_back_when_the_new_one_cannot_move(tmp_path: Path) -> None:
    dest, previous = _tree(tmp_path / "dest", "1"), tmp_path / "previous"
    with pytest.raises(OSError):
        swap_dir(tmp_path / "missing", dest, previous)
    assert (dest / "box.json").read_text() == "1" and not previous.exists()
    with pytest.raises(OSError):
        swap_dir(_tree(tmp_path / "new", "2"), _tree(tmp_path / "full", "x"))  # not an empty folder


def test_recover_swap_puts_back_a_previous_tree_a_kill_left_alone(tmp_path: Path) -> None:
    dest, previous = tmp_path / "dest", _tree(tmp_path / "previous", "1")
    assert recover_swap(dest, previous, "box.json") and (dest / "box.json").read_text() == "1"
    assert not recover_swap(dest, _tree(tmp_path / "previous", "0"), "box.json"), "DEST is there: nothing to do"
    assert not recover_swap(tmp_path / "other", tmp_path / "empty", "box.json"), "no complete previous tree"


def test_a_resumable_part_has_a_fixed_name_and_is_finished_by_rename(tmp_path: Path) -> None:
    done = tmp_path / "0"
    part = resume_path(done)
    assert part == tmp_path / "0.part" and resume_path(done) == part
    part.write_bytes(b"complete")
    assert finish_resumed(part, done).read_bytes() == b"complete" and not part.exists()


# --- read or raise --------------------------------------------------------------------------------------


_ERRORS = ReadErrors(LockError, missing_fix="create it", unreadable="cannot read {path}: {strerror}", fix="check it")


def test_a_missing_file_raises_the_callers_error_and_fix(tmp_path: Path) -> None:
    with pytest.raises(LockError) as caught:
        read_bytes(tmp_path / "pixi.lock", _ERRORS, shown="pixi.lock")
    assert caught.value.message == "pixi.lock does not exist" and caught.value.fix == "create it"


def test_a_missing_file_can_be_a_located_problem(tmp_path: Path) -> None:
    errors = ReadErrors(LockError, missing_problem="the recipe has no committed lock", missing_fix="lock it")
    with pytest.raises(LockError) as caught:
        read_text(tmp_path / "pixi.lock", errors, shown="pixi.lock")
    (problem,) = caught.value.problems
    assert (problem.message, problem.file, problem.fix, caught.value.fix) == (
        "the recipe has no committed lock",
        "pixi.lock",
        "lock it",
        None,
    )


def test_an_unreadable_path_names_the_os_reason(tmp_path: Path) -> None:
    with pytest.raises(LockError) as caught:
        read_bytes(tmp_path, _ERRORS)  # a folder
    assert caught.value.message.startswith(f"cannot read {tmp_path}: ") and caught.value.fix == "check it"


def test_text_that_is_not_utf8_is_unreadable_or_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "pixi.toml"
    path.write_bytes(b"ok\xff")
    with pytest.raises(LockError) as caught:
        read_text(path, ReadErrors(LockError, unreadable="cannot read {path}: {exc}"))
    assert "can't decode byte 0xff in position 2" in caught.value.message
    with pytest.raises(LockError) as caught:
        read_text(path, ReadErrors(LockError, not_utf8="{path} is not UTF-8 text", not_utf8_fix="regenerate"))
    assert caught.value.message == f"{path} is not UTF-8 text"
    assert [(p.message, p.fix) for p in caught.value.problems] == [("byte 2 is not valid UTF-8", "regenerate")]


def test_text_is_read_with_universal_newlines(tmp_path: Path) -> None:
    path = tmp_path / "pixi.lock"
    path.write_bytes(b"a\r\nb\n")
    assert read_text(path, _ERRORS) == "a\nb\n"


SOURCE = bytes(range(256)) * 40


def test_copy_range_copies_from_an_offset_and_counts_a_short_source(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.write_bytes(SOURCE)
    with source.open("rb", buffering=0) as src, (tmp_path / "out").open("xb", buffering=0) as out:
        assert copy_range(src, out, 100, 50) == 50
        assert copy_range(src, out, len(SOURCE) - 10, 50) == 10  # the source ends first
        assert copy_range(src, out, 0, 0) == 0
    assert (tmp_path / "out").read_bytes() == SOURCE[100:150] + SOURCE[-10:]


def test_copy_range_into_a_pipe_falls_back_to_read_and_write(tmp_path: Path) -> None:
    """copy_file_range refuses a pipe (EINVAL, EXDEV on other file systems): the plain copy goes on, in
    reads of at most 8 MiB, each no longer than what is left to copy."""
    data = SOURCE * (17 * 1024 * 1024 // len(SOURCE))
    source = tmp_path / "source"
    source.write_bytes(data)
    read_end, write_end = os.pipe()
    received: list[bytes] = []
    with os.fdopen(read_end, "rb") as pipe:
        reader = threading.Thread(target=lambda: received.append(pipe.read()))
        reader.start()
        with source.open("rb", buffering=0) as src, os.fdopen(write_end, "wb", buffering=0) as out:
            assert copy_range(src, out, 7, 3000) == 3000
            assert copy_range(src, out, 100, 8 * 1024 * 1024 + 100) == 8 * 1024 * 1024 + 100
            assert copy_range(src, out, len(data) - 5, 100) == 5
        reader.join()
    assert received == [data[7:3007] + data[100 : 8 * 1024 * 1024 + 200] + data[-5:]]


def test_digest_entries_lists_only_sha256_named_entries_in_their_prefix_folder(tmp_path: Path) -> None:
    good = tmp_path / "ab" / ("ab" + "1" * 62)
    misplaced = tmp_path / "cd" / ("ab" + "2" * 62)
    temp = tmp_path / "ab" / f".{good.name}.123-abc.part"
    for path in (good, misplaced, temp, tmp_path / "ab" / "note.txt", tmp_path / "pins.json"):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x")
    assert files.digest_entries(tmp_path) == [good]
    assert files.digest_entries(tmp_path / "missing") == []


def test_remove_older_than_keeps_young_and_named_entries(tmp_path: Path) -> None:
    old, young, kept = (tmp_path / name for name in ("old", "young", "kept"))
    for path in (old, young, kept):
        path.write_bytes(b"12345")
    os.utime(old, (1000.0, 1000.0))
    os.utime(kept, (1000.0, 1000.0))
    assert files.remove_older_than([old, young, kept, tmp_path / "gone"], 2000.0, keep={"kept"}) == [(old, 5)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "young"]


def test_cache_entry_from_links_the_file_in_and_leaves_no_temp(tmp_path: Path) -> None:
    source = tmp_path / "made.pyc"
    source.write_bytes(b"bytecode")
    entry = tmp_path / "cache" / "ab" / ("ab" + "0" * 62)
    files.cache_entry_from(source, entry)
    assert entry.read_bytes() == b"bytecode" and entry.stat().st_ino == source.stat().st_ino
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]


def test_open_unlinked_reads_a_file_and_refuses_a_link(tmp_path: Path) -> None:
    (tmp_path / "entry").write_bytes(b"frame")
    with files.open_unlinked(tmp_path / "entry") as stream:
        assert stream.read() == b"frame"
    (tmp_path / "link").symlink_to(tmp_path / "entry")
    with pytest.raises(OSError, match="link"):
        files.open_unlinked(tmp_path / "link")


def test_touch_unlinked_never_changes_what_a_link_names(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"")
    os.utime(target, (1_000_000, 1_000_000))
    (tmp_path / "link").symlink_to(target)
    files.touch_unlinked(tmp_path / "link")
    assert target.stat().st_mtime == 1_000_000
    files.touch_unlinked(target)
    assert target.stat().st_mtime > 1_000_000


def test_a_guarded_writer_turns_a_refused_write_into_the_callers_error(tmp_path: Path) -> None:
    class Refused(Exception):
        pass

    with (tmp_path / "out").open("wb") as out:
        writer = files.GuardedWriter(out, lambda exc: Refused(exc.strerror))
        assert writer.write(b"ok") == 2
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this OS: a full disk cannot be had without mounting one")
    with (  # the device: a real ENOSPC on every write
        Path("/dev/full").open("wb", buffering=0) as full,
        pytest.raises(Refused, match="No space left on device"),
    ):
        files.GuardedWriter(full, lambda exc: Refused(exc.strerror)).write(b"x")
