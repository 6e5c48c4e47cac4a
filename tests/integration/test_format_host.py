"""docs/format.md's promise on a real box: a host written from the page alone (tests/support/format_host.py:
tarfile + zstandard, no scrollcase) installs the box `scrollcase demo` builds from its store, byte for byte
as `scrollcase unpack` does, receipt included, and `scrollcase verify --installed` accepts it.  The page's
numbers about that box (its frames) are checked against what the build wrote."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zstandard

from scrollcase import cli
from tests.support import format_host
from tests.unit.format.test_format_doc import FORMAT, doc_block, doc_table
from tests.unit.format.test_vectors import listing

pytestmark = pytest.mark.slow


def demo_release(workspace: Path) -> tuple[Path, dict[str, Any]]:
    store = workspace / ".scrollcase" / "store"
    (release,) = sorted(store.glob("boxes/*/*/*/*.release.json"))
    return store, json.loads(release.read_bytes())


def test_the_pages_frames_of_the_demo_box_are_what_the_build_wrote(demo_workspace: Path) -> None:
    _, manifest = demo_release(demo_workspace)
    names = [f["name"] for f in manifest["archive"]["frames"]]
    rows = doc_table("frames of the demo box")
    patterns = ["[^/]+".join(map(re.escape, re.split(r"<[^>]+>", r["name"]))) for r in rows]  # <version>: any
    assert len(patterns) == len(names), names
    for pattern, name in zip(patterns, names, strict=True):
        assert re.fullmatch(pattern, name), (pattern, name)
    stated = re.search(r"`scrollcase demo` builds .*? has \*\*(\d+)\s+frames\*\*", FORMAT.read_text(), re.S)
    assert stated and int(stated.group(1)) == len(names)


def test_a_host_written_from_the_page_installs_the_demo_box_as_unpack_does(
    demo_workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, manifest = demo_release(demo_workspace)
    dest = tmp_path / "box"  # both installs relocate for this path: the reference is moved aside after
    release = store / manifest["keys"]["release"]
    assert cli.main(["unpack", "--quiet", str(release), str(dest)]) == 0
    reference = tmp_path / "unpacked-by-scrollcase"
    dest.rename(reference)

    format_host.install_from_store(store, manifest["boxId"], manifest["targetId"], dest)

    assert listing(dest) == listing(reference)  # every entry: type, mode, size, sha256, link target
    receipt = (dest / format_host.RECEIPT).read_bytes()
    assert receipt == (reference / format_host.RECEIPT).read_bytes()
    documented = json.loads(doc_block("receipt of the demo vector"))
    assert set(json.loads(receipt)) == set(documented)  # §7's fields are the ones written
    assert set(json.loads(receipt)["relocated"][0]) == set(documented["relocated"][0])
    capsys.readouterr()
    assert cli.main(["verify", "--installed", str(dest), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_without_the_receipt_verify_installed_refuses_the_hosts_tree(demo_workspace: Path, tmp_path: Path) -> None:
    """§7 says the receipt is required: the same host, minus step 10, is refused."""
    store, manifest = demo_release(demo_workspace)
    dest = format_host.install_from_store(store, manifest["boxId"], manifest["targetId"], tmp_path / "box")
    (dest / format_host.RECEIPT).unlink()
    assert cli.main(["verify", "--installed", str(dest), "--quiet"]) == 8


@pytest.mark.skipif(shutil.which("zstd") is None, reason="no zstd CLI")
def test_zstd_dc_reads_the_demo_box_as_the_frame_table_cuts_it(demo_workspace: Path) -> None:
    """§3.1: one zstd stream for a reader that ignores frames, its length the table's uncompressed sum; each
    frame's header records its size, no checksum, no dictionary, a window of at most 2 MiB."""
    store, manifest = demo_release(demo_workspace)
    archive = store / manifest["keys"]["archive"]
    done = subprocess.run(["zstd", "-dc", str(archive)], capture_output=True, check=True)
    frames = manifest["archive"]["frames"]
    assert len(done.stdout) == sum(f["uncompressedSize"] for f in frames)
    assert done.stdout.endswith(bytes(1024)) and frames[-1]["name"] == "end"
    data = archive.read_bytes()
    format_host.check_frame_table(data, frames, manifest["archive"]["size"])
    for row in frames:  # §3.1: the frame header as the page describes it
        params = zstandard.get_frame_parameters(data[row["offset"] : row["offset"] + 18])
        assert (params.content_size, params.has_checksum, params.dict_id) == (row["uncompressedSize"], False, 0)
        assert params.window_size <= 2 << 20, row["name"]
