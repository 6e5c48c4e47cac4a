"""docs/format.md against what scrollcase writes, and the test vectors read the two ways a host may read a
framed archive.

* The page's numbers (the demo vector's frame table, the install receipt's example) are parsed from it
  and compared with the committed vectors, which tests/unit/format/test_vectors.py proves are what the code
  writes: a change to the packer or the receipt that the page does not follow fails here.
* Every valid vector is read by a reader that knows nothing of frames (one zstd stream: the `zstd` CLI,
  and zstandard's stream reader) and by one that checks the frame table and decompresses each frame on its
  own; both must find the tar stream and members ``frames.json`` records.
* The minimal host (tests/support/format_host.py, written from the page alone) installs every valid vector
  to its expected tree, receipt included, and refuses every hostile one at its stage or before; its
  relocation, from the page's byte rules, equals scrollcase's on generated files and hostile DESTs.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, assume, given, settings

from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, replace_binary, replace_text
from tests.support import format_host
from tests.unit.format.test_relocate_property import DESTS, files
from tests.unit.format.test_vectors import CATALOGUE_DATA, INSTALLS, REFUSED, VALID, listing
from tests.vectors.generate import VECTORS

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the vectors' trees hold POSIX symlinks and DESTs")

ROOT = Path(__file__).resolve().parents[3]
FORMAT = ROOT / "docs" / "format.md"
DEMO = next(v for v in VALID if v["name"] == "demo")
SRV = Path("/srv/box")


def doc_table(marker: str, text: str | None = None) -> list[dict[str, str]]:
    """The markdown table right after the HTML comment that starts with ``<!-- marker``: one dict per row,
    by header, cells without their backquotes."""
    lines = (text if text is not None else FORMAT.read_text(encoding="utf-8")).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"<!-- {marker}"))
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip().strip("|").split("|")])
    header, _, *body = rows
    return [dict(zip(header, row, strict=True)) for row in body]


def doc_block(marker: str) -> str:
    """The fenced code block right after the HTML comment that starts with ``<!-- marker``."""
    text = FORMAT.read_text(encoding="utf-8")
    found = re.search(re.escape(f"<!-- {marker}") + r"[^\n]*\n```\w*\n(.*?)\n```", text, re.DOTALL)
    assert found, f"format.md has no code block after <!-- {marker}"
    return found.group(1)


def page_words() -> str:
    """format.md with every run of whitespace as one space (a sentence may wrap anywhere)."""
    return " ".join(FORMAT.read_text(encoding="utf-8").split())


def manifest_of(vector: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((VECTORS / vector["release"]).read_bytes())
    return loaded


# ---------------------------------------------------------------- the page's numbers


def test_the_pages_frame_table_is_the_demo_vectors() -> None:
    frames = manifest_of(DEMO)["archive"]["frames"]
    rows = doc_table("frames of the demo vector")
    documented = [(r["name"], int(r["offset"]), int(r["size"]), int(r["uncompressedSize"])) for r in rows]
    assert documented == [(f["name"], f["offset"], f["size"], f["uncompressedSize"]) for f in frames]
    size = (VECTORS / DEMO["archive"]).stat().st_size
    assert f"`tests/vectors/demo/`), **{len(frames)} frames**, {size} bytes:" in page_words()


def test_the_pages_receipt_example_is_the_one_unpack_writes_for_the_demo_vector() -> None:
    documented = json.loads(doc_block("receipt of the demo vector"))
    short = next(i for i in DEMO["installs"] if i["label"] == "short")
    written = (VECTORS / short["files"] / format_host.RECEIPT).read_bytes()
    assert documented == json.loads(written)
    assert documented["dest"] == short["dest"] == "/srv/box"
    fields = {r["field"] for r in doc_table("", _receipt_section())}
    assert fields == set(documented)
    assert format_host.canonical(documented) == written  # §7's byte rule, as the page states it


def _receipt_section() -> str:
    """§7's field table, marked for doc_table (the section's first table)."""
    text = FORMAT.read_text(encoding="utf-8")
    section = text[text.index("## 7. The install receipt") : text.index("## 8. Running a box")]
    return section.replace("\n| field | value |", "\n<!-- \n| field | value |", 1)


def test_no_page_says_the_archive_is_one_frame() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), VECTORS / "README.md"]
    said = re.compile(r"\bone (zstd )?frame\b(?! per)|\bsingle(-| )frame (archive|stream)|after the zstd frame", re.I)
    found = [f"{p.name}: {m.group(0)}" for p in pages for m in said.finditer(p.read_text(encoding="utf-8"))]
    assert not found


def test_the_checklist_links_every_step_to_a_section_that_exists() -> None:
    text = FORMAT.read_text(encoding="utf-8")
    checklist = text[text.index("## A minimal host, in order") : text.index("## 1. The objects")]
    steps = re.findall(r"^\d+\. \*\*(.+?)\*\*(.*?)(?=^\d+\. |\Z)", checklist, re.M | re.S)
    assert len(steps) >= 10 and any("receipt" in title for title, _ in steps)
    anchors = {_anchor(h) for h in re.findall(r"^#{2,3} (.+)$", text, re.M)}
    for title, body in steps:
        links = re.findall(r"\]\(#([^)]+)\)", body)
        assert links and set(links) <= anchors, title


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


# ---------------------------------------------------------------- the vectors, read two ways


def frames_json(vector: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((VECTORS / vector["frames"]).read_bytes())
    return loaded


def tar_members(stream: bytes) -> list[dict[str, str]]:
    with tarfile.open(fileobj=io.BytesIO(stream), mode="r:") as tar:
        kinds = {tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink", tarfile.REGTYPE: "file"}
        return [{"path": m.name, "type": kinds[m.type]} for m in tar.getmembers()]


@pytest.mark.parametrize("vector", VALID, ids=[v["name"] for v in VALID])
def test_a_reader_that_knows_nothing_of_frames_reads_the_whole_archive(vector: dict[str, Any]) -> None:
    """zstandard's stream reader across frames, as any zstd decoder reads concatenated frames."""
    expected = frames_json(vector)
    data = (VECTORS / vector["archive"]).read_bytes()
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    stream = reader.read()
    assert (len(stream), hashlib.sha256(stream).hexdigest()) == (
        expected["stream"]["size"],
        expected["stream"]["sha256"],
    )
    assert tar_members(stream) == [m for f in expected["frames"] for m in f["members"]]
    assert stream.endswith(bytes(1024))


@pytest.mark.skipif(shutil.which("zstd") is None or shutil.which("tar") is None, reason="no zstd or tar CLI")
def test_zstd_dc_piped_to_tar_x_unpacks_the_demo_vector(tmp_path: Path) -> None:
    """§3.1: `zstd -dc | tar -x` reads a framed archive (the tree before relocation: the placeholder in it)."""
    archive = VECTORS / DEMO["archive"]
    stream = subprocess.run(["zstd", "-dc", str(archive)], capture_output=True, check=True).stdout
    assert hashlib.sha256(stream).hexdigest() == frames_json(DEMO)["stream"]["sha256"]
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=stream, check=True)
    on_disk = {e["path"] for e in listing(tmp_path)}
    assert on_disk == {m["path"] for f in frames_json(DEMO)["frames"] for m in f["members"]}


@pytest.mark.parametrize("vector", VALID, ids=[v["name"] for v in VALID])
def test_a_reader_that_checks_the_frame_table_finds_each_units_members(vector: dict[str, Any]) -> None:
    data = (VECTORS / vector["archive"]).read_bytes()
    archive = manifest_of(vector)["archive"]
    format_host.check_frame_table(data, archive["frames"], archive["size"])
    expected = frames_json(vector)["frames"]
    assert [f["name"] for f in expected] == [row["name"] for row in archive["frames"]]
    assert archive["frames"][-1]["name"] == "end" and len(archive["frames"]) > 2
    for row, want in zip(archive["frames"], expected, strict=True):
        frame = data[row["offset"] : row["offset"] + row["size"]]
        params = zstandard.get_frame_parameters(frame)
        assert (params.content_size, params.has_checksum) == (row["uncompressedSize"], False)
        alone = format_host.frame_bytes(data, row)
        assert len(alone) == row["uncompressedSize"] == want["uncompressedSize"]
        assert len(alone) % 512 == 0  # §3.2: whole tar members, no member spans two frames
        if row["name"] == "end":
            assert alone == bytes(1024)
        else:
            assert tar_members(alone + bytes(1024)) == want["members"], row["name"]


# ---------------------------------------------------------------- the minimal host on the vectors


def test_the_minimal_host_uses_nothing_of_scrollcase() -> None:
    tree = ast.parse(Path(format_host.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [m for m in imported if m.startswith(("scrollcase", "tests"))]


@pytest.mark.parametrize(("vector", "install"), INSTALLS, ids=[f"{v['name']}-{i['label']}" for v, i in INSTALLS])
def test_the_minimal_host_installs_each_valid_vector_as_expected(
    tmp_path: Path, vector: dict[str, Any], install: dict[str, Any]
) -> None:
    dest = tmp_path / "box"
    format_host.install_release(manifest_of(vector), VECTORS / vector["archive"], dest, install["dest"])
    expected = json.loads((VECTORS / install["expected"]).read_bytes())
    assert listing(dest) == expected["entries"]
    for rel in expected["relocated"]:  # the receipt included
        assert (dest / rel).read_bytes() == (VECTORS / install["files"] / rel).read_bytes(), rel


@pytest.mark.parametrize("vector", REFUSED, ids=[v["name"] for v in REFUSED])
def test_the_minimal_host_refuses_each_hostile_vector_in_time(tmp_path: Path, vector: dict[str, Any]) -> None:
    dest = tmp_path / "box"
    with pytest.raises(format_host.Refused) as refused:
        format_host.install_release(manifest_of(vector), VECTORS / vector["archive"], dest, vector["dest"])
    stages = format_host.STAGES
    assert stages.index(refused.value.stage) <= stages.index(vector["refusal"]["stage"]), str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_a_newer_frame_format_is_refused_by_the_minimal_host_and_by_scrollcase(tmp_path: Path) -> None:
    """§9: a host that checks the frame table refuses an archive.frameFormat it does not know, before a
    byte is extracted; scrollcase too, naming the field and the fix."""
    from scrollcase.format.release import parse_release
    from scrollcase.format.versions import NewerFormatError

    manifest = manifest_of(DEMO)
    manifest["archive"]["frameFormat"] = 2
    with pytest.raises(format_host.Refused) as refused:
        format_host.install_release(manifest, VECTORS / DEMO["archive"], tmp_path / "box", str(SRV))
    assert refused.value.stage == "frames" and list(tmp_path.iterdir()) == []
    with pytest.raises(NewerFormatError, match=r"archive\.frameFormat is 2") as caught:
        parse_release(json.dumps(manifest).encode(), "demo.release.json")
    assert "upgrade scrollcase" in (caught.value.fix or "")
    manifest["archive"]["frameFormat"] = 1  # stated, it is the format absent means
    format_host.install_release(manifest, VECTORS / DEMO["archive"], tmp_path / "box", str(SRV))


def test_the_catalogue_names_frames_json_for_every_valid_vector() -> None:
    assert all((VECTORS / v["frames"]).is_file() for v in VALID)
    assert CATALOGUE_DATA["schemaVersion"] == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dest=DESTS, file=files())
def test_the_hosts_relocation_from_the_docs_is_scrollcases(dest: str, file: tuple[str, bytes]) -> None:
    """The byte rules of format.md §6 / archive.md, as the host implements them from the page, against
    scrollcase's own on generated shebangs, binary strings and hostile DESTs (quotes, $, spaces, CRLF)."""
    mode, data = file
    new = dest.encode()
    placeholder = BOX_PREFIX_PLACEHOLDER.encode()
    if mode == "binary":
        assume(len(new) <= len(placeholder))
        assert format_host.relocate_binary(data, placeholder, new) == replace_binary(data, placeholder, new)
    else:
        assert format_host.relocate_text(data, placeholder, new) == replace_text(data, placeholder, new)


def test_the_pages_warning_about_a_first_frame_reader_holds() -> None:
    """§3.1 names zstandard's one-shot decompress() as a reader that stops after the first frame."""
    data = (VECTORS / DEMO["archive"]).read_bytes()
    first = len(zstandard.ZstdDecompressor().decompress(data))
    assert first == manifest_of(DEMO)["archive"]["frames"][0]["uncompressedSize"]
    stream = frames_json(DEMO)["stream"]["size"]
    assert f"gives the demo vector's first {first} bytes of {stream})" in page_words()


def test_a_skippable_frame_between_frames_is_skipped_by_both_readers(tmp_path: Path) -> None:
    """§3.1: scrollcase writes no skippable frame, but a reader skips one (RFC 8878 §3.1.2), scrollcase's too."""
    data = (VECTORS / DEMO["archive"]).read_bytes()
    cut = manifest_of(DEMO)["archive"]["frames"][2]["offset"]
    skippable = (0x184D2A53).to_bytes(4, "little") + (6).to_bytes(4, "little") + b"ignore"
    spliced = data[:cut] + skippable + data[cut:]
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(spliced), read_across_frames=True)
    assert hashlib.sha256(reader.read()).hexdigest() == frames_json(DEMO)["stream"]["sha256"]
    trees = []
    for name, archive_bytes in (("spliced", spliced), ("plain", data)):
        archive = tmp_path / f"{name}.tar.zst"
        archive.write_bytes(archive_bytes)
        digest = hashlib.sha256(archive_bytes).hexdigest()
        box = tmp_path / name
        unpack_archive(archive, box, expected_size=len(archive_bytes), expected_sha256=digest, relocate_to=SRV)
        trees.append(listing(box))
    assert trees[0] == trees[1]
