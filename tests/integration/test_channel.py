"""A channel written by scrollcase.demo.channel is indexed, solved and installed by py-rattler."""

import asyncio
import os
import zipfile
from pathlib import Path

import rattler

from scrollcase.demo.channel import PREFIX_PLACEHOLDER, PackageFile, PackageSpec, index_channel, write_package


def _virtual(name: str, version: str) -> rattler.GenericVirtualPackage:
    return rattler.GenericVirtualPackage(rattler.PackageName(name), rattler.Version(version), rattler.BuildString("0"))


def _channel(root: Path) -> Path:
    ch = root / "channel"
    torch_file = PackageFile(
        "lib/torch-build.txt", b"built for " + PREFIX_PLACEHOLDER.encode() + b"\n", prefix_mode="text"
    )
    write_package(
        ch,
        PackageSpec(
            "pytorch",
            "2.5.1",
            "cuda124_py311_0",
            build_number=1,
            depends=["cuda-version >=12.4,<12.5", "__cuda"],
            files=[torch_file],
        ),
    )
    write_package(ch, PackageSpec("pytorch", "2.5.1", "cpu_py311_0", files=[PackageFile("lib/cpu.txt", b"cpu\n")]))
    write_package(ch, PackageSpec("cuda-version", "12.4", "h0", noarch="generic", constrains=["__cuda >=12.4"]))
    index_channel(ch, ["linux-64"])
    return ch


def _solve(ch: Path, specs: list[str], virtual: list[rattler.GenericVirtualPackage]) -> list[rattler.RepoDataRecord]:
    return asyncio.run(rattler.solve([ch.as_uri()], specs, platforms=["linux-64", "noarch"], virtual_packages=virtual))


def test_solver_picks_the_cuda_build_only_when_cuda_is_present(tmp_path: Path):
    ch = _channel(tmp_path)
    unix = _virtual("__unix", "0")
    solved = _solve(ch, ["pytorch[build=cuda*]"], [unix, _virtual("__cuda", "12.4")])
    with_cuda = {r.name.normalized: str(r.build) for r in solved}
    assert with_cuda["pytorch"] == "cuda124_py311_0"
    assert with_cuda["cuda-version"] == "h0"
    without = {r.name.normalized: str(r.build) for r in _solve(ch, ["pytorch"], [unix])}
    assert without["pytorch"] == "cpu_py311_0"


def test_install_replaces_the_prefix_placeholder(tmp_path: Path):
    ch = _channel(tmp_path)
    records = _solve(ch, ["pytorch[build=cuda*]"], [_virtual("__unix", "0"), _virtual("__cuda", "12.4")])
    prefix = tmp_path / "env"
    asyncio.run(rattler.install(records, prefix, cache_dir=tmp_path / "cache", show_progress=False))
    assert (prefix / "lib" / "torch-build.txt").read_text() == f"built for {prefix}\n"
    assert sorted(p.name.split("-")[0] for p in (prefix / "conda-meta").glob("*.json")) == ["cuda", "pytorch"]


def test_packages_are_byte_reproducible(tmp_path: Path):
    spec = PackageSpec("demo", "1.0", files=[PackageFile("a.txt", b"a")])
    first = write_package(tmp_path / "one", spec).read_bytes()
    second = write_package(tmp_path / "two", spec).read_bytes()
    assert first == second


def test_conda_v2_packages_are_indexed_solved_and_installed(tmp_path: Path):
    """The .conda format (zstd inside a zip) the demo writes: rattler reads it, relocation included."""
    ch = tmp_path / "channel"
    text = PackageFile("share/where.txt", b"at " + PREFIX_PLACEHOLDER.encode() + b"\n", prefix_mode="text")
    tool = PackageFile("bin/tool", b"#!/bin/sh\necho ok\n", 0o755)
    link = PackageFile("bin/tool-link", b"", symlink_to="tool")
    spec = PackageSpec("demo", "1.0", "0", files=[text, tool, link], format=".conda")
    written = write_package(ch, spec)
    assert written.name == "demo-1.0-0.conda"
    assert written.read_bytes() == write_package(tmp_path / "again", spec).read_bytes()  # reproducible
    with zipfile.ZipFile(written) as archive:
        assert sorted(archive.namelist()) == ["info-demo-1.0-0.tar.zst", "metadata.json", "pkg-demo-1.0-0.tar.zst"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist())
    index_channel(ch, ["linux-64"])
    records = _solve(ch, ["demo"], [_virtual("__unix", "0")])
    assert [r.file_name for r in records] == ["demo-1.0-0.conda"]
    prefix = tmp_path / "env"
    asyncio.run(rattler.install(records, prefix, cache_dir=tmp_path / "cache", show_progress=False))
    assert (prefix / "share/where.txt").read_text() == f"at {prefix}\n"
    assert os.access(prefix / "bin/tool", os.X_OK) and (prefix / "bin/tool-link").is_symlink()
