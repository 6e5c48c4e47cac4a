"""Wheel metadata for lock records: PEP 658 files, wheels read in place, a cache keyed by sha256."""

from __future__ import annotations

import io
import urllib.error
from pathlib import Path

import pytest

from scrollcase.errors import SolveError
from scrollcase.lock.pypi_records import parse_metadata, pixi_requirement, wheel_metadata
from scrollcase.lock.resolve import ResolvedWheel
from tests.support.wheels import make_wheel

METADATA = """\
Metadata-Version: 2.1
Name: torch
Version: 2.6.0
Requires-Python: >=3.9.0
Requires-Dist: filelock
Requires-Dist: typing-extensions (>=4.10.0)
Requires-Dist: nvidia-cuda-runtime-cu12 (==12.4.127) ; platform_system == "Linux"
Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"

the long description
"""


def test_requirements_are_written_as_pixi_writes_them() -> None:
    meta = parse_metadata(METADATA)
    assert meta.requires_python == ">=3.9.0"
    assert meta.requires_dist == (
        "filelock",
        "typing-extensions>=4.10.0",
        "nvidia-cuda-runtime-cu12==12.4.127 ; platform_system == 'Linux'",
        "opt-einsum>=3.3 ; extra == 'opt-einsum'",
    )
    assert pixi_requirement("uvicorn[standard,b] >= 0.2") == "uvicorn[b,standard]>=0.2"


def _wheel(url: str, sha: str = "ab" * 32) -> ResolvedWheel:
    return ResolvedWheel("torch", "2.6.0", url, sha, None, None)


def test_pep658_metadata_is_fetched_once_then_cached(tmp_path: Path) -> None:
    asked: list[str] = []

    def get(url: str) -> bytes:
        asked.append(url)
        return METADATA.encode()

    def no_download(_: ResolvedWheel) -> Path:
        raise AssertionError("the wheel itself must not be downloaded")

    wheel = _wheel("https://files.example/torch-2.6.0-cp311-none-any.whl")
    first = wheel_metadata([wheel], tmp_path, no_download, get)
    again = wheel_metadata([wheel], tmp_path, no_download, get)
    assert asked == [wheel.url + ".metadata"]
    assert first == again and first[wheel.sha256].requires_python == ">=3.9.0"


def test_an_index_without_metadata_files_falls_back_to_the_wheel(tmp_path: Path) -> None:
    path = make_wheel(tmp_path / "w", "demo", "1.0", {"demo/__init__.py": b""})

    def get(url: str) -> bytes:
        raise urllib.error.HTTPError(url, 404, "not found", {}, io.BytesIO())  # type: ignore[arg-type]

    meta = wheel_metadata(
        [_wheel("https://files.example/demo-1.0-py3-none-any.whl")], tmp_path / "c", lambda _: path, get
    )
    assert next(iter(meta.values())).requires_dist == ()


def test_file_wheels_are_read_in_place(tmp_path: Path) -> None:
    path = make_wheel(tmp_path / "w", "demo", "1.0", {"demo/__init__.py": b""})
    meta = wheel_metadata([_wheel(path.as_uri())], tmp_path / "c", lambda _: path)
    assert next(iter(meta.values())).requires_python is None


def test_an_unreachable_index_is_a_solve_error_naming_the_wheel(tmp_path: Path) -> None:
    def get(url: str) -> bytes:
        raise urllib.error.URLError("connection refused")

    with pytest.raises(SolveError, match=r"metadata of torch 2\.6\.0") as info:
        wheel_metadata([_wheel("https://files.example/t.whl")], tmp_path, lambda _: tmp_path, get)
    assert info.value.problems[0].key == "packages.pypi.torch"
