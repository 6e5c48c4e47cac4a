"""The cache of unpacked, checked wheels: the same tree as a direct install, linked, and never trusted blindly."""

from __future__ import annotations

import hashlib
import json
import os
import time
import zipfile
from pathlib import Path

import pytest

from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format.layout import box_layout
from scrollcase.io import cache as usercache
from scrollcase.wheels.cache import WheelCache, fill_all
from scrollcase.wheels.install import install_wheels
from tests.support.wheels import make_wheel

PLACEHOLDER = "/opt/placeholder/venv"
LINUX = box_layout("venv/bin/python", "linux", "3.11", "model-cache/m")
SITE = "lib/python3.11/site-packages"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def with_executable(wheel: Path, member: str, data: bytes) -> Path:
    """The wheel with one more member, executable (mode 0o755), listed in RECORD."""
    import base64

    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    with zipfile.ZipFile(wheel) as z:
        items = [(i, z.read(i)) for i in z.infolist()]
    out = wheel.with_name(wheel.name)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info, body in items:
            if info.filename.endswith("/RECORD"):
                body = f"{member},sha256={digest},{len(data)}\n".encode() + body
            z.writestr(info, body)
        extra = zipfile.ZipInfo(member)
        extra.external_attr = (0o100755 & 0xFFFF) << 16
        z.writestr(extra, data)
    return out


def wheels(folder: Path) -> list[Path]:
    made = []
    for i in range(4):
        wheel = make_wheel(
            folder / f"w{i}",
            f"pkg{i}",
            "1.0",
            {
                f"pkg{i}/__init__.py": b"def main():\n    return 0\n",
                f"pkg{i}/data.bin": os.urandom(3000 + i),
                f"pkg{i}-1.0.data/scripts/run{i}": b"#!python\nprint(1)\n",
                f"pkg{i}-1.0.data/scripts/plain{i}": b"#!/bin/sh\necho hi\n",
                "nvidia/__init__.py": b"",  # shipped byte for byte by every one of them
            },
            {f"pkg{i}-tool": f"pkg{i}:main"},
        )
        made.append(with_executable(wheel, f"pkg{i}/bin/helper", b"\x7fELF fake\n"))
    return made


def filled(cache: WheelCache, paths: list[Path]) -> list:
    got = fill_all(cache, [(p, sha(p)) for p in paths])
    return [got[sha(p)] for p in paths]


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mode, p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def layouts(cache: WheelCache, wheel: Path) -> list[Path]:
    return sorted((cache.root / sha(wheel) / "layouts").glob("*/layout.json"))


@pytest.mark.parametrize("workers", [1, 3])
def test_a_cached_install_and_its_replay_are_the_tree_a_direct_install_writes(tmp_path: Path, workers: int) -> None:
    paths = wheels(tmp_path / "wheels")
    install_wheels(paths, LINUX, tmp_path / "direct", placeholder=PLACEHOLDER, arch="x86_64")
    cache = WheelCache(tmp_path / "cache")
    unpacked = filled(cache, paths)
    for attempt in ("installed", "replayed"):  # the first notes what installer placed, the second links that
        env = tmp_path / attempt
        install_wheels(unpacked, LINUX, env, placeholder=PLACEHOLDER, arch="x86_64", workers=workers)
        assert tree(env) == tree(tmp_path / "direct")  # RECORDs, scripts, executable bits, the shared file
        assert len(layouts(cache, paths[0])) == 1
        data = env / SITE / "pkg2/data.bin"
        stored = cache.root / sha(paths[2]) / "files/pkg2/data.bin"
        assert data.stat().st_ino == stored.stat().st_ino  # a hard link: nothing inflated or copied
        assert os.access(env / SITE / "pkg1/bin/helper", os.X_OK)
        assert (env / "bin/run1").read_bytes() == f"#!{PLACEHOLDER}/bin/python3.11\nprint(1)\n".encode()


def test_another_layout_is_installed_by_installer_not_replayed(tmp_path: Path) -> None:
    paths = wheels(tmp_path / "wheels")[:1]
    cache = WheelCache(tmp_path / "cache")
    unpacked = filled(cache, paths)
    install_wheels(unpacked, LINUX, tmp_path / "a", placeholder=PLACEHOLDER, arch="x86_64")
    install_wheels(unpacked, LINUX, tmp_path / "b", placeholder="/elsewhere/venv", arch="x86_64")
    assert len(layouts(cache, paths[0])) == 2  # the interpreter is in the scripts: a layout of its own
    assert (tmp_path / "b/bin/run0").read_bytes().startswith(b"#!/elsewhere/venv/bin/python3.11\n")


def test_a_changed_generated_file_makes_the_layout_be_recorded_again(tmp_path: Path) -> None:
    paths = wheels(tmp_path / "wheels")[:1]
    cache = WheelCache(tmp_path / "cache")
    unpacked = filled(cache, paths)
    for env in ("recorded", "replayed"):
        install_wheels(unpacked, LINUX, tmp_path / env, placeholder=PLACEHOLDER, arch="x86_64")
    record = "pkg0-1.0.dist-info/RECORD"
    good = (tmp_path / "recorded" / SITE / record).read_bytes()
    (tmp_path / "replayed" / SITE / record).write_bytes(b"edited\n")  # through the hard link into the cache
    install_wheels(unpacked, LINUX, tmp_path / "again", placeholder=PLACEHOLDER, arch="x86_64")
    assert (tmp_path / "again" / SITE / record).read_bytes() == good
    assert b"pkg0/__init__.py," in good


@pytest.mark.parametrize("damage", ["edited in place", "deleted", "entry garbled"])
def test_a_changed_entry_is_thrown_away_not_trusted(tmp_path: Path, damage: str) -> None:
    [wheel] = wheels(tmp_path / "wheels")[:1]
    cache = WheelCache(tmp_path / "cache")
    [entry] = filled(cache, [wheel])
    stored = entry.root / "files/pkg0/data.bin"
    if damage == "edited in place":  # as through a hard link in a kept box tree: same size, new mtime
        size = stored.stat().st_size
        with stored.open("r+b") as f:
            f.write(b"X" * size)
        os.utime(stored, ns=(1, 1))
    elif damage == "deleted":
        stored.unlink()
    else:
        (entry.root / "entry.json").write_text("{not json")
    assert cache.load(sha(wheel)) is None
    assert not entry.root.exists()


def test_a_tampered_wheel_never_becomes_an_entry(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "bad", "1.0", {"bad.py": b"X = 1\n"})
    with zipfile.ZipFile(wheel) as z:
        items = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(wheel, "w") as z:
        for info, body in items:
            z.writestr(info, b"X = 2\n" if info.filename == "bad.py" else body)
    cache = WheelCache(tmp_path / "cache")
    with pytest.raises(IntegrityError, match=r"bad-1\.0.*RECORD"):
        fill_all(cache, [(wheel, sha(wheel))])
    assert list((tmp_path / "cache").iterdir()) == []  # no entry, no temp folder


def test_a_killed_fill_leaves_a_temp_folder_the_next_fill_removes(tmp_path: Path) -> None:
    [wheel] = wheels(tmp_path / "wheels")[:1]
    digest = sha(wheel)
    stale = tmp_path / "cache" / f".{digest}.999999999-abc123.part"
    (stale / "files").mkdir(parents=True)
    filled(WheelCache(tmp_path / "cache"), [wheel])
    assert not stale.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [digest]


def test_a_second_fill_of_the_same_wheel_keeps_the_first_entry(tmp_path: Path) -> None:
    [wheel] = wheels(tmp_path / "wheels")[:1]
    cache = WheelCache(tmp_path / "cache")
    [first] = filled(cache, [wheel])
    [second] = filled(cache, [wheel])
    assert second.entry == first.entry
    assert sorted(p.name for p in cache.root.iterdir()) == [sha(wheel)]


@pytest.mark.parametrize("replayed", [False, True])
def test_a_cached_file_in_the_way_of_a_conda_file_is_a_clash(tmp_path: Path, replayed: bool) -> None:
    wheel = make_wheel(tmp_path, "tiny", "1.0", {"tiny.py": b"from pypi\n"})
    unpacked = filled(WheelCache(tmp_path / "cache"), [wheel])
    if replayed:
        install_wheels(unpacked, LINUX, tmp_path / "first", placeholder=PLACEHOLDER, arch="x86_64")
    env = tmp_path / "venv"
    (env / SITE).mkdir(parents=True)
    (env / SITE / "tiny.py").write_text("from conda\n")
    with pytest.raises(BuildError, match="clashes"):
        install_wheels(unpacked, LINUX, env, placeholder=PLACEHOLDER, arch="x86_64")
    assert (env / SITE / "tiny.py").read_text() == "from conda\n"


def test_a_cache_on_another_file_system_is_copied_from(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on another file system than the temp folder")
    import tempfile

    with tempfile.TemporaryDirectory(dir=shm) as other:
        paths = wheels(tmp_path / "wheels")
        cache = WheelCache(Path(other) / "cache")
        install_wheels(filled(cache, paths), LINUX, tmp_path / "env", placeholder=PLACEHOLDER, arch="x86_64")
        install_wheels(paths, LINUX, tmp_path / "direct", placeholder=PLACEHOLDER, arch="x86_64")
        assert tree(tmp_path / "env") == tree(tmp_path / "direct")
        assert (tmp_path / "env" / SITE / "pkg0/data.bin").stat().st_nlink == 1  # copies, not links


@pytest.mark.parametrize("target", ["../outside.py", "/etc/passwd", "lib/../../x", "C:/x", "a\\..\\..\\x"])
def test_a_planted_layout_cannot_link_outside_the_environment(tmp_path: Path, target: str) -> None:
    paths = wheels(tmp_path / "wheels")[:1]
    cache = WheelCache(tmp_path / "cache")
    unpacked = filled(cache, paths)
    install_wheels(unpacked, LINUX, tmp_path / "first", placeholder=PLACEHOLDER, arch="x86_64")
    [layout] = layouts(cache, paths[0])
    data = json.loads(layout.read_text())
    data["files"][0][0] = target
    layout.write_text(json.dumps(data))
    with pytest.raises(BuildError, match="outside of the target directory"):
        install_wheels(unpacked, LINUX, tmp_path / "second", placeholder=PLACEHOLDER, arch="x86_64")
    assert not (tmp_path / "outside.py").exists()


def test_an_environment_given_relative_is_recorded_and_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scrollcase build` with a relative --state-dir installs into a relative environment path."""
    paths = wheels(tmp_path / "wheels")
    cache = WheelCache(tmp_path / "cache")
    unpacked = filled(cache, paths)
    install_wheels(paths, LINUX, tmp_path / "direct", placeholder=PLACEHOLDER, arch="x86_64")
    monkeypatch.chdir(tmp_path)
    for env in ("rel/recorded", "rel/replayed"):
        install_wheels(unpacked, LINUX, Path(env), placeholder=PLACEHOLDER, arch="x86_64")
    assert tree(tmp_path / "rel/replayed") == tree(tmp_path / "direct")


def test_replayed_and_recorded_wheels_in_one_install_share_files_and_claims(tmp_path: Path) -> None:
    """Two wheels replayed, two installed by installer, all four shipping nvidia/__init__.py."""
    paths = wheels(tmp_path / "wheels")
    cache = WheelCache(tmp_path / "cache")
    unpacked = filled(cache, paths)
    install_wheels(unpacked[:2], LINUX, tmp_path / "half", placeholder=PLACEHOLDER, arch="x86_64")
    install_wheels(paths, LINUX, tmp_path / "direct", placeholder=PLACEHOLDER, arch="x86_64")
    install_wheels(unpacked, LINUX, tmp_path / "mixed", placeholder=PLACEHOLDER, arch="x86_64", workers=4)
    assert tree(tmp_path / "mixed") == tree(tmp_path / "direct")


def test_a_used_entry_is_marked_used_so_an_age_prune_keeps_it(tmp_path: Path) -> None:
    [wheel] = wheels(tmp_path / "wheels")[:1]
    cache = WheelCache(tmp_path / "cache")
    filled(cache, [wheel])
    entry = cache.root / sha(wheel)
    long_ago = time.time() - 90 * 86400
    os.utime(entry, (long_ago, long_ago))
    assert cache.load(sha(wheel)) is not None
    assert usercache.UNPACKED_CACHE.prune(cache.root, 30) == []
    os.utime(entry, (long_ago, long_ago))  # not used since
    assert [path for path, _ in usercache.UNPACKED_CACHE.prune(cache.root, 30)] == [entry]
    assert cache.load(sha(wheel)) is None
