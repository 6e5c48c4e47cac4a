"""build/conda.py with real py-rattler on a local channel (no network)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from scrollcase.build.conda import install_records
from scrollcase.demo.channel import PackageFile, PackageSpec, index_channel, write_package
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER

POST_LINK = b'#!/bin/bash\necho ran > "$PREFIX/post-link-ran"\n'


def _records(channel: Path) -> list[Any]:
    import rattler

    write_package(
        channel,
        PackageSpec(
            name="linkprobe",
            version="1.0",
            files=[
                PackageFile("share/linkprobe/data.txt", b"payload\n"),
                PackageFile("bin/.linkprobe-post-link.sh", POST_LINK, 0o755),
            ],
        ),
    )
    index_channel(channel, ["linux-64"])
    return list(
        asyncio.run(
            rattler.solve(
                sources=[channel.resolve().as_uri()],
                specs=["linkprobe"],
                platforms=[rattler.Subdir("linux-64"), rattler.Subdir("noarch")],
                gateway=rattler.Gateway(),
                channel_relations="disabled",
            )
        )
    )


@pytest.mark.skipif(sys.platform != "linux", reason="the probe package is linux-64")
def test_link_scripts_never_run(tmp_path: Path) -> None:
    """docs/build.md, stage 1 (install): "Link scripts never run." A package's post-link script would
    run build-machine code with the build's paths; the probe's script would leave a file behind."""
    env = tmp_path / "box" / "venv"
    install_records(
        _records(tmp_path / "channel"),
        env,
        subdir="linux-64",
        cache_dir=tmp_path / "cache",
        placeholder=f"{BOX_PREFIX_PLACEHOLDER}/venv",
    )
    assert (env / "share" / "linkprobe" / "data.txt").read_bytes() == b"payload\n"
    assert (env / "bin" / ".linkprobe-post-link.sh").is_file()  # linked as a file, never executed
    assert not (env / "post-link-ran").exists()
    assert not list(tmp_path.rglob("post-link-ran"))
