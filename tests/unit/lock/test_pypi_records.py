"""PyPI records completed as pixi writes them, and read back by py-rattler."""

from __future__ import annotations

from pathlib import Path

import pytest
from rattler import LockChannel, LockFile, LockPlatform

from scrollcase.errors import LockError
from scrollcase.lock.pypi_records import PypiLock, WheelMetadata, add_pypi_fields
from scrollcase.lock.read import load_lock
from scrollcase.lock.resolve import ResolvedWheel

TORCH = ResolvedWheel(
    "torch",
    "2.6.0+cu124",
    "https://download.pytorch.org/whl/cu124/torch-2.6.0%2Bcu124-cp311-cp311-linux_x86_64.whl",
    "a" * 64,
    100,
    "https://download.pytorch.org/whl/cu124",
)
FILELOCK = ResolvedWheel("filelock", "3.0", "https://files.example/filelock-3.0-py3-none-any.whl", "b" * 64, 5, None)
META = {
    "a" * 64: WheelMetadata(("filelock", "nvidia-cuda-runtime-cu12==12.4.127 ; sys_platform == 'linux'"), ">=3.9.0"),
    "b" * 64: WheelMetadata((), ">=3.8"),
}


def _rattler_lock(tmp_path: Path, wheels: list[ResolvedWheel]) -> str:
    platform = LockPlatform("linux-64", virtual_packages=["__cuda=12.4"])
    lock = LockFile([platform])
    lock.set_channels("default", [LockChannel("https://conda.anaconda.org/conda-forge/")])
    for wheel in wheels:
        lock.add_pypi_package("default", platform, wheel.name, wheel.version, wheel.url)
    lock.to_path(tmp_path / "raw.lock")
    return (tmp_path / "raw.lock").read_text()


def test_records_gain_sha256_index_requires_and_rattler_reads_them(tmp_path: Path) -> None:
    pypi = PypiLock(("https://pypi.org/simple",), [TORCH, FILELOCK], META)
    text = add_pypi_fields(_rattler_lock(tmp_path, [TORCH, FILELOCK]), pypi, "default")
    assert "    indexes:\n    - https://pypi.org/simple\n    packages:\n" in text
    path = tmp_path / "pixi.lock"
    path.write_text(text)
    env = LockFile.from_path(path).environment("default")
    assert env is not None
    [platform] = env.platforms()
    packages = {str(p.name): p for p in env.pypi_packages_for_platform(platform) or []}
    torch = packages["torch"]
    assert torch.hashes is not None and torch.hashes.sha256.hex() == "a" * 64
    assert torch.requires_python == ">=3.9.0"
    assert list(torch.requires_dist) == list(META["a" * 64].requires_dist)
    assert "  index: https://download.pytorch.org/whl/cu124" in text
    assert load_lock(path).environments["default"].packages["linux-64"]  # our own reader agrees


def test_a_record_the_writer_left_out_is_an_error(tmp_path: Path) -> None:
    pypi = PypiLock(("https://pypi.org/simple",), [TORCH, FILELOCK], META)
    with pytest.raises(LockError, match="did not write 1 PyPI record"):
        add_pypi_fields(_rattler_lock(tmp_path, [TORCH]), pypi, "default")
