"""PyPI wheels from a lock: planning (pure), fetching with the lock's sha256, installing with installer."""

from __future__ import annotations

import hashlib
import http.client
import os
import time
import zipfile
from pathlib import Path
from typing import BinaryIO

import pytest

from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format.layout import box_layout
from scrollcase.wheels import zipread as wheelzip
from scrollcase.wheels.install import install_wheels
from scrollcase.wheels.source import (
    LockedWheel,
    WheelSource,
    fetch_wheel,
    plain_shebang,
    plan_wheels,
    scheme_for,
    script_kind,
)
from tests.support.wheels import make_wheel

PLACEHOLDER = "/opt/placeholder/venv"
LINUX = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
WINDOWS = box_layout("venv/python.exe", "windows", "3.11", "model-cache/m")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_plan_resolves_urls_and_paths_relative_to_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "ws" / "pixi.lock"
    sources = plan_wheels(
        [
            LockedWheel(
                "torch", "2.4.0+cu124", "https://x.org/whl/torch-2.4.0%2Bcu124-cp311-cp311-linux_x86_64.whl", "a" * 64
            ),
            LockedWheel("tiny", "1.0", "./vendor/tiny-1.0-py3-none-any.whl", "b" * 64),
        ],
        lock,
        "linux-64",
    )
    assert sources[0].filename == "torch-2.4.0+cu124-cp311-cp311-linux_x86_64.whl"
    assert sources[1].url == (tmp_path / "ws" / "vendor" / "tiny-1.0-py3-none-any.whl").resolve().as_uri()


def test_plan_refuses_sdists_and_unhashed_wheels_all_at_once(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        plan_wheels(
            [
                LockedWheel("a", "1", "https://x.org/a-1.tar.gz", "a" * 64),
                LockedWheel("b", "2", "./b-2-py3-none-any.whl", None),
                LockedWheel("c", "3", "https://x.org/c-3-py3-none-any.whl", "c" * 64),
            ],
            tmp_path / "pixi.lock",
            "linux-64",
        )
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
    long_ago = time.time() - 90 * 86400
    os.utime(got.parent, (long_ago, long_ago))
    assert fetch_wheel(source, tmp_path / "cache", {"https": serve}) == got
    assert len(calls) == 1
    assert got.parent.stat().st_mtime > long_ago + 86400  # used: `scrollcase cache prune` keeps it
    got.write_bytes(b"bit rot")  # a damaged cache entry is downloaded again
    assert fetch_wheel(source, tmp_path / "cache", {"https": serve}).read_bytes() == wheel.read_bytes()
    assert len(calls) == 2


def test_tampered_download_is_refused_and_not_cached(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "index", "tiny", "1.0", {"tiny.py": b"X = 1\n"})

    def evil(url: str, out: BinaryIO, offset: int) -> None:
        out.write(b"not the wheel")

    with pytest.raises(IntegrityError):
        fetch_wheel(_source(wheel, url="https://i.example/tiny-1.0-py3-none-any.whl"), tmp_path / "c", {"https": evil})
    assert list((tmp_path / "c").rglob("*.whl*")) == []
    with pytest.raises(BuildError, match="no way to fetch s3"):
        fetch_wheel(_source(wheel, url="s3://b/tiny-1.0-py3-none-any.whl"), tmp_path / "c", {})


def test_install_places_modules_scripts_and_metadata(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path, "tiny", "1.0", {"tiny/__init__.py": b"def main():\n    return 0\n"}, {"tiny-tool": "tiny:main"}
    )
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


def rewrite(wheel: Path, changes: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    """The same wheel (RECORD untouched) with some members' bytes replaced or added."""
    with zipfile.ZipFile(wheel) as original:
        members = {name: original.read(name) for name in original.namelist()}
    members.update(changes)
    with zipfile.ZipFile(wheel, "w", compression) as rewritten:
        for name, data in members.items():
            rewritten.writestr(name, data)
    return wheel


def site(env: Path) -> Path:
    return env / "lib/python3.11/site-packages"


def test_a_member_changed_after_record_is_an_integrity_error(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"X = 1\n"})
    rewrite(wheel, {"tiny.py": b"changed after RECORD was written\n"})
    env = tmp_path / "venv"
    with pytest.raises(IntegrityError) as caught:
        install_wheels([wheel], LINUX, env, placeholder=PLACEHOLDER, arch="x86_64")
    assert caught.value.exit_code == 8 and wheel.name in caught.value.message
    (problem,) = caught.value.problems
    assert problem.key == "tiny.py" and "RECORD says 6" in problem.message and problem.file == str(wheel)
    assert not (site(env) / "tiny.py").exists()  # the file that failed its check is not left behind


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_same_size_different_bytes_are_caught_while_writing(tmp_path: Path, compression: int) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB: several reads, the check is at the member's end
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny/data.bin": big, "tiny/__init__.py": b""})
    rewrite(wheel, {"tiny/data.bin": big[:-1] + b"!"}, compression)
    env = tmp_path / "venv"
    with pytest.raises(IntegrityError) as caught:
        install_wheels([wheel], LINUX, env, placeholder=PLACEHOLDER, arch="x86_64")
    assert caught.value.problems[0].key == "tiny/data.bin" and "sha256" in caught.value.problems[0].message
    assert not (site(env) / "tiny/data.bin").exists()


def test_members_installer_skips_or_rewrites_are_checked_too(tmp_path: Path) -> None:
    """A __pycache__ member (installer skips it) and a ``#!python`` script (installer rewrites its
    first line) are still checked against RECORD."""
    files = {
        "tiny/__init__.py": b"",
        "tiny/__pycache__/x.cpython-311.pyc": b"\0" * 16,
        "tiny-1.0.data/scripts/tool": b"#!python\nprint(1)\n",
    }
    for member, bad in [
        ("tiny/__pycache__/x.cpython-311.pyc", b"\1" * 16),
        ("tiny-1.0.data/scripts/tool", b"#!python\nprint(2)\n"),
    ]:
        wheel = make_wheel(tmp_path / member.replace("/", "_"), "tiny", "1.0", files)
        rewrite(wheel, {member: bad})
        with pytest.raises(IntegrityError) as caught, pytest.warns(RuntimeWarning, match="__pycache__"):
            install_wheels([wheel], LINUX, wheel.parent / "venv", placeholder=PLACEHOLDER, arch="x86_64")
        assert caught.value.problems[0].key == member


def test_a_member_not_in_record_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    wheel = rewrite(make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"X = 1\n"}), {"extra.py": b"x\n"})
    with pytest.raises(BuildError, match="cannot be installed") as caught:
        install_wheels([wheel], LINUX, tmp_path / "venv", placeholder=PLACEHOLDER, arch="x86_64")
    assert "not mentioned in RECORD" in caught.value.problems[0].message
    assert not (tmp_path / "venv").exists()


def test_a_bad_crc_is_a_build_error(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"X = 1\n" * 100})
    rewrite(wheel, {}, zipfile.ZIP_STORED)
    data = bytearray(wheel.read_bytes())
    at = data.index(b"X = 1\n" * 100) + 50
    data[at] ^= 0x01  # the bytes change, the CRC-32 in the archive does not
    wheel.write_bytes(bytes(data))
    with pytest.raises(BuildError, match="cannot be installed") as caught:
        install_wheels([wheel], LINUX, tmp_path / "venv", placeholder=PLACEHOLDER, arch="x86_64")
    assert "CRC-32" in caught.value.problems[0].message


def test_a_dangling_symlink_in_the_way_is_a_clash_not_a_write_through_it(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    site(env).mkdir(parents=True)
    (site(env) / "tiny.py").symlink_to(tmp_path / "outside.py")
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"from pypi\n"})
    with pytest.raises(BuildError, match="clashes"):
        install_wheels([wheel], LINUX, env, placeholder=PLACEHOLDER, arch="x86_64")
    assert not (tmp_path / "outside.py").exists()


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_two_wheels_writing_one_path_clash_whichever_is_first(tmp_path: Path, workers: int) -> None:
    a = make_wheel(tmp_path / "a", "alpha", "1.0", {"shared/mod.py": b"A = 1\n", "alpha.py": b""})
    b = make_wheel(tmp_path / "b", "beta", "1.0", {"shared/mod.py": b"B = 2\n", "beta.py": b""})
    with pytest.raises(BuildError, match="clash") as caught:
        install_wheels([a, b], LINUX, tmp_path / "venv", placeholder=PLACEHOLDER, arch="x86_64", workers=workers)
    text = caught.value.render()
    assert "shared/mod.py" in text and "keep only one" in text
    written = site(tmp_path / "venv") / "shared/mod.py"  # the loser never overwrites (the winner may be cancelled)
    assert not written.exists() or written.read_bytes() in (b"A = 1\n", b"B = 2\n")


def test_a_file_two_wheels_ship_byte_for_byte_is_shared(tmp_path: Path) -> None:
    """The nvidia-*-cu12 wheels all ship the same empty nvidia/__init__.py: written once, in both RECORDs."""
    wheels = [
        make_wheel(tmp_path / n, n, "1.0", {"nvidia/__init__.py": b"", f"nvidia/{n}/lib.so": n.encode()})
        for n in ("cublas", "cudnn", "nccl")
    ]
    env = tmp_path / "venv"
    install_wheels(wheels, LINUX, env, placeholder=PLACEHOLDER, arch="x86_64", workers=3)
    assert (site(env) / "nvidia/__init__.py").read_bytes() == b""
    for n in ("cublas", "cudnn", "nccl"):
        record = (site(env) / f"{n}-1.0.dist-info/RECORD").read_text()
        assert "nvidia/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n" in record


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mode, p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def test_parallel_install_writes_the_same_tree_as_one_thread(tmp_path: Path) -> None:
    wheels = [
        make_wheel(
            tmp_path / f"w{i}",
            f"pkg{i}",
            "1.0",
            {
                f"pkg{i}/__init__.py": b"def main():\n    return 0\n",
                f"pkg{i}/data.bin": bytes(i) * 5000,
                f"pkg{i}-1.0.data/scripts/run{i}": b"#!python\nprint(1)\n",
            },
            {f"pkg{i}-tool": f"pkg{i}:main"},
        )
        for i in range(6)
    ]
    for workers in (1, 4):
        install_wheels(
            wheels, LINUX, tmp_path / f"env{workers}", placeholder=PLACEHOLDER, arch="x86_64", workers=workers
        )
    assert tree(tmp_path / "env1") == tree(tmp_path / "env4")
    script = tmp_path / "env4/bin/run3"
    assert script.read_bytes() == f"#!{PLACEHOLDER}/bin/python3.11\nprint(1)\n".encode()
    assert os.access(tmp_path / "env4/bin/pkg3-tool", os.X_OK)


def test_the_first_real_failure_is_raised_not_a_cancellation(tmp_path: Path) -> None:
    good = [make_wheel(tmp_path / f"g{i}", f"good{i}", "1.0", {f"good{i}.bin": os.urandom(1 << 20)}) for i in range(3)]
    bad = rewrite(make_wheel(tmp_path / "bad", "bad", "1.0", {"bad.py": b"X = 1\n"}), {"bad.py": b"X = 2\n"})
    with pytest.raises(IntegrityError, match=r"bad-1\.0"):
        install_wheels([*good, bad], LINUX, tmp_path / "venv", placeholder=PLACEHOLDER, arch="x86_64", workers=2)


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
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"def main():\n    return 0\n"}, {"tiny-tool": "tiny:main"})
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
        fetch_wheel(_source(wheel, url="https://i.example/tiny-1.0-py3-none-any.whl"), tmp_path / "c", {"https": drops})
    assert "rerun the build" in (caught.value.problems[0].fix or "")
    assert list((tmp_path / "c").rglob("*.part")) == []


@pytest.mark.parametrize("inflater", ["fast", "stdlib"])
def test_member_reader_reads_what_zipfile_reads(tmp_path: Path, inflater: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import zlib

    if inflater == "stdlib":
        monkeypatch.setattr(wheelzip, "FAST_ZLIB", zlib)
    rng = random.Random(5)
    text = b"".join(b"line %d %s\n" % (i, bytes(rng.choices(b"abc", k=rng.randint(0, 90)))) for i in range(3000))
    members = {"a.txt": text, "empty": b"", "noise.bin": rng.randbytes(100_000)}
    archive = tmp_path / "m.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in members.items():
            for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                z.writestr(f"{method}/{name}", data, method)
    with zipfile.ZipFile(archive) as z, archive.open("rb", buffering=0) as fp:
        infos = z.infolist()
        for info, end in zip(infos, wheelzip.member_ends(infos, archive.stat().st_size), strict=True):
            want = members[info.filename.split("/", 1)[1]]
            reader = wheelzip.MemberReader(fp, info, end, chunk=777)  # reads that straddle lines
            assert reader.read(8) == want[:8]
            reader.seek(0)
            first = reader.readline()
            assert first == want[: want.find(b"\n") + 1 or len(want)]
            assert first + reader.read() == want
            assert reader.read(10) == b""
            reader.seek(0)
            pieces = []
            while piece := reader.read(4096):
                pieces.append(piece)
            assert b"".join(pieces) == want


def test_member_ends_refuse_overlapping_members(tmp_path: Path) -> None:
    archive = tmp_path / "m.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a", b"x" * 100)
        z.writestr("b", b"y" * 100)
    with zipfile.ZipFile(archive) as z, archive.open("rb", buffering=0) as fp:
        a, b = z.infolist()
        assert wheelzip.member_ends([a, b], 999) == [b.header_offset, 999]
        b.header_offset = a.header_offset  # a central directory that points two names at one body
        with pytest.raises(zipfile.BadZipFile, match="Overlapped"):
            wheelzip.MemberReader(fp, a, wheelzip.member_ends([a, b], 999)[0], chunk=64)


def test_folder_depth_counts_both_separators_of_a_windows_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replayed layout's targets are joined onto the env with "/" inside: on Windows a parent and its
    child must still be made a depth apart, parent first."""
    from scrollcase.wheels import install as wheelinstall

    monkeypatch.setattr(wheelinstall.os, "sep", "\\")
    monkeypatch.setattr(wheelinstall.os, "altsep", "/")
    assert wheelinstall._depth("C:\\box\\venv\\Lib") == 3
    assert wheelinstall._depth("C:\\box\\venv\\Lib/site-packages") == 4
