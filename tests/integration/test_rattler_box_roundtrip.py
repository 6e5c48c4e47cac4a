"""An environment installed by py-rattler under BOX_PREFIX_PLACEHOLDER/venv (as the build does: the
placeholder stands for the box root), scanned, packed, unpacked elsewhere: conda-meta drives the
scan and every placeholder ends up as DEST."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from scrollcase.demo.channel import PREFIX_PLACEHOLDER, PackageFile, PackageSpec, index_channel, write_package
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, PrefixFile, RelocationInfo, scan_prefix_files


def _channel(root: Path) -> Path:
    script = f"#!{PREFIX_PLACEHOLDER}/bin/python3\nprint('hi')\n".encode()
    config = f"prefix={PREFIX_PLACEHOLDER}\n".encode()
    write_package(
        root,
        PackageSpec(
            name="tool",
            version="1.0",
            files=[
                PackageFile("bin/tool", script, 0o755, prefix_mode="text"),
                PackageFile("lib/pkgconfig/tool.pc", config, prefix_mode="text"),
                PackageFile("lib/libtool.so.1", b"\x7fELF\x00no prefix here\x00", 0o755),
                PackageFile("lib/libtool.so", b"", symlink_to="libtool.so.1"),
            ],
        ),
    )
    index_channel(root, ["linux-64"])
    return root


def _install(channel: Path, prefix: Path, cache: Path) -> None:
    import rattler

    async def run() -> None:
        records = await rattler.solve(
            sources=[channel.resolve().as_uri()],
            specs=["tool"],
            platforms=[rattler.Subdir("linux-64"), rattler.Subdir("noarch")],
            gateway=rattler.Gateway(),
            channel_relations="disabled",
        )
        await rattler.install(
            records,
            target_prefix=prefix,
            cache_dir=cache,
            show_progress=False,
            platform=rattler.Subdir("linux-64"),
            alternative_target_prefix=f"{BOX_PREFIX_PLACEHOLDER}/venv",
        )

    asyncio.run(run())


def test_rattler_env_scanned_packed_unpacked_relocated(tmp_path: Path) -> None:
    box = tmp_path / "build" / "box"
    _install(_channel(tmp_path / "channel"), box / "venv", tmp_path / "cache")
    assert BOX_PREFIX_PLACEHOLDER in (box / "venv" / "bin" / "tool").read_text()
    files = scan_prefix_files(box, BOX_PREFIX_PLACEHOLDER)
    assert PrefixFile(path="venv/bin/tool", mode="text") in files
    assert PrefixFile(path="venv/lib/pkgconfig/tool.pc", mode="text") in files
    assert not any(f.path.startswith("venv/lib/libtool") for f in files)
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=files)
    (box / "box.json").write_text(json.dumps({"relocation": info.model_dump()}))
    packed = pack_tree(box, tmp_path / "box.tar.zst")
    assert str(tmp_path).encode() not in (tmp_path / "box.tar.zst").read_bytes()  # no build path leaks
    dest = tmp_path / "installed" / "here"
    result = unpack_archive(packed.path, dest, expected_size=packed.size, expected_sha256=packed.sha256)
    assert result.relocated_files == len(files)
    real = dest.resolve()
    # rattler wrote its own #!/bin/sh trampoline for the long placeholder shebang; it stays valid
    script = (real / "venv" / "bin" / "tool").read_text()
    assert f'"{real}/venv/bin/python3"' in script and BOX_PREFIX_PLACEHOLDER not in script
    assert (real / "venv" / "lib" / "pkgconfig" / "tool.pc").read_text() == f"prefix={real}/venv\n"
    assert (real / "venv" / "lib" / "libtool.so").resolve() == real / "venv" / "lib" / "libtool.so.1"
