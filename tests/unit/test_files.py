"""Atomic writes and the per-OS user cache folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.io.files import user_cache_dir, write_atomic


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
