"""PyPI wheels from a lock: planning (pure), fetching with the lock's sha256, installing with installer."""

from __future__ import annotations

import hashlib
import http.client
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

import pytest

from scrollcase.box.layout import box_layout
from scrollcase.box.wheels import (
    LockedWheel,
    WheelSource,
    fetch_wheel,
    install_wheels,
    plain_shebang,
    plan_wheels,
    scheme_for,
    script_kind,
)
from scrollcase.errors import BuildError, IntegrityError
from tests.support.wheels import make_wheel

PLACEHOLDER = "/opt/placeholder/venv"
LINUX = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
WINDOWS = box_layout("venv/python.exe", "windows", "3.11", "model-cache/m")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_plan_resolves_urls_and_paths_relative_to_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "ws" / "pixi.lock"
    sources = plan_wheels([
        LockedWheel("torch", "2.4.0+cu124", "https://x.org/whl/torch-2.4.0%2Bcu124-cp311-cp311-linux_x86_64.whl",
                    "a" * 64),
        LockedWheel("tiny", "1.0", "./vendor/tiny-1.0-py3-none-any.whl", "b" * 64),
    ], lock, "linux-64")
    assert sources[0].filename == "torch-2.4.0+cu124-cp311-cp311-linux_x86_64.whl"
    assert sources[1].url == (tmp_path / "ws" / "vendor" / "tiny-1.0-py3-none-any.whl").resolve().as_uri()


def test_plan_refuses_sdists_and_unhashed_wheels_all_at_once(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        plan_wheels([LockedWheel("a", "1", "https://x.org/a-1.tar.gz", "a" * 64),
                     LockedWheel("b", "2", "./b-2-py3-none-any.whl", None),
                     LockedWheel("c", "3", "https://x.org/c-3-py3-none-any.whl", "c" * 64)],
                    tmp_path / "pixi.lock", "linux-64")
    problems = caught.value.problems
    assert [p.key for p in problems] == ["packages.pypi.a", "packages.pypi.b"]
    assert "not a wheel" in problems[0].message and "no sha256" in problems[1].message
    assert all(p.fix and p.file == str(tmp_path / "pixi.lock") for p in problems)


def _source(path: Path, digest: str | None = None, url: str | None = None) -> WheelSource:
    return WheelSource("tiny", "1.0", url or path.as_uri(), path.name, digest or sha(path))


def test_local_wheel_is_checked_in_place(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"X = 1\n"})
    assert fetch_wheel(_source(wheel), tmp_path / "cache", {}) == wheel
    with pytest.raises(IntegrityError, match="does not match the lock"):
        fetch_wheel(_source(wheel, "0" * 64), tmp_path / "cache", {})
    with pytest.raises(BuildError, match="missing"):
        fetch_wheel(_source(tmp_path / "gone-1.0-py3-none-any.whl", "0" * 64), tmp_path / "cache", {})


def test_remote_wheel_is_downloaded_once_into_a_sha_keyed_cache(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "index", "tiny", "1.0", {"tiny.py": b"X = 1\n"})
    calls: list[str] = []

    def serve(url: str, out: BinaryIO, offset: int) -> None:
        calls.append(url)
        out.write(wheel.read_bytes())

    source = _source(wheel, url="https://index.example/tiny-1.0-py3-none-any.whl")
    got = fetch_wheel(source, tmp_path / "cache", {"https": serve})
    assert got == tmp_path / "cache" / sha(wheel) / wheel.name and got.read_bytes() == wheel.read_bytes()
    assert fetch_wheel(source, tmp_path / "cache", {"https": serve}) == got
    assert len(calls) == 1
    got.write_bytes(b"bit rot")  # a damaged cache entry is downloaded again
    assert fetch_wheel(source, tmp_path / "cache", {"https": serve}).read_bytes() == wheel.read_bytes()
    assert len(calls) == 2


def test_tampered_download_is_refused_and_not_cached(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "index", "tiny", "1.0", {"tiny.py": b"X = 1\n"})

    def evil(url: str, out: BinaryIO, offset: int) -> None:
        out.write(b"not the wheel")

    with pytest.raises(IntegrityError):
        fetch_wheel(_source(wheel, url="https://i.example/tiny-1.0-py3-none-any.whl"), tmp_path / "c",
                    {"https": evil})
    assert list((tmp_path / "c").rglob("*.whl*")) == []
    with pytest.raises(BuildError, match="no way to fetch s3"):
        fetch_wheel(_source(wheel, url="s3://b/tiny-1.0-py3-none-any.whl"), tmp_path / "c", {})


def test_install_places_modules_scripts_and_metadata(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny/__init__.py": b"def main():\n    return 0\n"},
                       {"tiny-tool": "tiny:main"})
    env = tmp_path / "box" / "venv"
    install_wheels([wheel], LINUX, env, placeholder=PLACEHOLDER, arch="x86_64")
    site = env / "lib/python3.11/site-packages"
    assert (site / "tiny/__init__.py").read_bytes() == b"def main():\n    return 0\n"
    assert (site / "tiny-1.0.dist-info/INSTALLER").read_bytes() == b"scrollcase\n"
    assert (site / "tiny-1.0.dist-info/RECORD").is_file()
    script = (env / "bin/tiny-tool").read_text()
    assert script.startswith(f"#!{PLACEHOLDER}/bin/python3.11\n") and "from tiny import main" in script
    assert list(env.rglob("*.pyc")) == []


def test_a_file_already_there_is_a_clash_not_an_overwrite(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    (env / "lib/python3.11/site-packages").mkdir(parents=True)
    (env / "lib/python3.11/site-packages/tiny.py").write_text("from conda\n")
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"from pypi\n"})
    with pytest.raises(BuildError, match="clashes") as caught:
        install_wheels([wheel], LINUX, env, placeholder=PLACEHOLDER, arch="x86_64")
    assert "keep only one" in (caught.value.problems[0].fix or "")
    assert (env / "lib/python3.11/site-packages/tiny.py").read_text() == "from conda\n"


def test_a_wheel_writing_outside_the_environment_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "evil", "1.0", {"../../../escaped.py": b"x\n"})
    with pytest.raises(BuildError, match="cannot be installed"):
        install_wheels([wheel], LINUX, tmp_path / "box" / "venv", placeholder=PLACEHOLDER, arch="x86_64")
    assert not list(tmp_path.rglob("escaped.py"))


def test_a_corrupt_wheel_is_a_build_error(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"X = 1\n"})
    with zipfile.ZipFile(wheel) as original:
        members = {name: original.read(name) for name in original.namelist()}
    members["tiny.py"] = b"changed after RECORD was written\n"
    with zipfile.ZipFile(wheel, "w") as rewritten:
        for name, data in members.items():
            rewritten.writestr(name, data)
    with pytest.raises(BuildError, match="cannot be installed"):
        install_wheels([wheel], LINUX, tmp_path / "venv", placeholder=PLACEHOLDER, arch="x86_64")


def test_windows_scheme_and_launchers() -> None:
    env = Path("C:/box/venv")
    scheme = scheme_for(WINDOWS, env)
    assert scheme["purelib"] == str(env / "Lib" / "site-packages") == scheme["platlib"]
    assert scheme["scripts"] == str(env / "Scripts") and scheme["headers"] == str(env / "Include")
    assert script_kind(WINDOWS, "x86_64") == "win-amd64" and script_kind(WINDOWS, "arm64") == "win-arm64"
    assert script_kind(LINUX, "x86_64") == "posix"
    assert scheme_for(LINUX, Path("/b/venv"))["headers"] == "/b/venv/include/python3.11"


def test_long_placeholder_scripts_keep_a_plain_shebang_for_relocation(tmp_path: Path) -> None:
    """installer would write an unquoted /bin/sh trampoline for a path over 127 bytes; the box keeps
    ``#!<placeholder interpreter>`` like conda's entry points, which relocation rewrites on unpack."""
    long_placeholder = "/opt/scrollcase/" + "_placehold" * 18 + "/venv"
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"def main():\n    return 0\n"},
                       {"tiny-tool": "tiny:main"})
    env = tmp_path / "venv"
    install_wheels([wheel], LINUX, env, placeholder=long_placeholder, arch="x86_64")
    script = env / "bin/tiny-tool"
    first, rest = script.read_bytes().split(b"\n", 1)
    assert first == f"#!{long_placeholder}/bin/python3.11".encode()
    assert b"'''exec'" not in rest and b"from tiny import main" in rest
    assert os.access(script, os.X_OK)
    assert plain_shebang(b"#!/short/python\nbody\n", "/p/python") == b"#!/p/python\nbody\n"


def test_a_dropped_download_is_a_build_error_and_leaves_no_part(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "index", "tiny", "1.0", {"tiny.py": b"X = 1\n"})

    def drops(url: str, out: BinaryIO, offset: int) -> None:
        out.write(b"half")
        raise http.client.IncompleteRead(b"half")

    with pytest.raises(BuildError, match="downloading wheel") as caught:
        fetch_wheel(_source(wheel, url="https://i.example/tiny-1.0-py3-none-any.whl"), tmp_path / "c",
                    {"https": drops})
    assert "rerun the build" in (caught.value.problems[0].fix or "")
    assert list((tmp_path / "c").rglob("*.part")) == []
