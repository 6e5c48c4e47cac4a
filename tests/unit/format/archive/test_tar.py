"""The tar format both ways: headers written by :func:`build_header` are read back by our own parser
(through the same chunked reader unpack uses) and by stdlib ``tarfile``; the parser also reads headers
that ``tarfile`` wrote."""

from __future__ import annotations

import io
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollcase.format.archive.tar import (
    BLOCK,
    END_OF_ARCHIVE,
    META_KINDS,
    USTAR_MAX_SIZE,
    ChunkReader,
    Header,
    TarFormatError,
    build_header,
    header_size,
    padding,
    parse_header,
    parse_number,
    parse_pax,
    read_meta,
)

# (name, kind, mode, size, link): every shape the packer writes, plain ustar and pax.
MEMBERS = [
    ("venv/bin/python3.11", "file", 0o755, 3000, ""),
    ("box.json", "file", 0o644, 0, ""),
    ("x" * 100, "file", 0o644, 7, ""),  # exactly 100 bytes: still plain ustar
    ("x" * 101, "file", 0o644, 7, ""),  # pax path
    ("p" * 150 + "/" + "n" * 99, "file", 0o644, 5, ""),  # ustar prefix + name, no pax
    ("d/" * 70 + "f", "file", 0o644, 1, ""),  # too long for the prefix split: pax
    ("ünïcode.txt", "file", 0o644, 1, ""),  # not ASCII: pax
    ("venv", "dir", 0o755, 0, ""),
    ("a/" * 60 + "dir", "dir", 0o755, 0, ""),
    ("venv/bin/python", "symlink", 0o777, 0, "python3.11"),
    ("venv/weights", "symlink", 0o777, 0, "../model-cache/" + "w" * 120),  # pax linkpath
    ("venv/ü", "symlink", 0o777, 0, "ziel-ü"),
    ("big", "file", 0o644, 9 << 30, ""),  # over ustar's 11 octal digits: pax size
]


def _archive(members: list[tuple[str, str, int, int, str]], *, with_data: bool = True) -> bytes:
    out = []
    for name, kind, mode, size, link in members:
        out.append(build_header(name, kind=kind, mode=mode, size=size, link=link))
        if with_data and kind == "file":
            out.append(bytes([len(name) % 251]) * size + padding(size))
    return b"".join(out) + END_OF_ARCHIVE


def _read_back(data: bytes) -> list[Header]:
    """Our reader: the same header loop as unpack (extended headers folded into the next member)."""
    pieces = iter([data[i : i + 700] for i in range(0, len(data), 700)])  # chunk edges inside headers
    reader = ChunkReader(lambda: next(pieces, None))
    members: list[Header] = []
    pending: dict[str, str] = {}
    while (block := reader.read_block_or_end()) is not None and any(block):
        header = parse_header(block)
        if header.kind in META_KINDS:
            read_meta(header, reader, pending)
            continue
        size = int(pending.get("size", header.size))
        name, link = pending.get("path", header.name), pending.get("linkpath", header.link)
        members.append(Header(name, header.kind, header.mode, size, link))
        reader.skip(size + -size % BLOCK)
        pending = {}
    return members


def test_writer_round_trips_through_our_parser() -> None:
    small = [m for m in MEMBERS if m[3] < 1 << 20]
    got = _read_back(_archive(small))
    expected = [
        Header(name + "/" if kind == "dir" else name, kind, mode, size, link) for name, kind, mode, size, link in small
    ]
    assert got == expected


def test_writer_round_trips_through_stdlib_tarfile() -> None:
    small = [m for m in MEMBERS if m[3] < 1 << 20]
    with tarfile.open(fileobj=io.BytesIO(_archive(small)), mode="r:") as tar:
        infos = tar.getmembers()
        file_data = {i.name: tar.extractfile(i).read() for i in infos if i.isfile()}  # type: ignore[union-attr]
    kinds = {tarfile.REGTYPE: "file", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink"}
    assert [(i.name, kinds[i.type], i.mode, i.size, i.linkname) for i in infos] == small
    assert all(i.mtime == 0 and i.uid == i.gid == 0 and i.uname == i.gname == "" for i in infos)
    assert all(data == bytes([len(name) % 251]) * len(data) for name, data in file_data.items())


def test_huge_size_round_trips_through_both_readers() -> None:
    block = build_header("big", kind="file", size=9 << 30)
    pax = parse_header(block[:BLOCK])
    assert pax.kind == "pax" and parse_pax(block[BLOCK : BLOCK + pax.size]) == {"size": str(9 << 30)}
    assert parse_header(block[-BLOCK:]).size == 0  # the ustar field yields to the pax record
    with tarfile.open(fileobj=io.BytesIO(block + END_OF_ARCHIVE), mode="r:") as tar:
        info = tar.next()
    assert info is not None and info.size == 9 << 30


def test_header_is_read_back_by_stdlib() -> None:
    block = build_header("venv/bin/python", kind="file", mode=0o755, size=10)
    assert len(block) == 512
    info = tarfile.TarInfo.frombuf(block, "utf-8", "strict")
    assert (info.name, info.size, info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname) == (
        "venv/bin/python",
        10,
        0o755,
        0,
        0,
        0,
        "",
        "",
    )


def test_long_and_unicode_names_use_pax() -> None:
    for name in ["d/" * 70 + "f", "x" * 101, "ünï"]:
        block = build_header(name, kind="file", size=3)
        assert len(block) % 512 == 0
        with tarfile.open(fileobj=io.BytesIO(block + b"abc" + bytes(509) + bytes(1024)), mode="r:") as tar:
            assert tar.getnames() == [name]


def test_long_name_fits_ustar_prefix_without_pax() -> None:
    name = "p" * 150 + "/" + "n" * 99
    assert len(build_header(name, kind="file")) == 512


def test_huge_size_goes_to_pax() -> None:
    block = build_header("big", kind="file", size=9 << 30)
    with tarfile.open(fileobj=io.BytesIO(block + bytes(1024)), mode="r:") as tar:
        info = tar.next()
    assert info is not None and info.size == 9 << 30


def _stdlib_header(name: str, **fields: object) -> bytes:
    info = tarfile.TarInfo(name)
    for key, value in fields.items():
        setattr(info, key, value)
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def test_parse_header_reads_stdlib_ustar() -> None:
    block = _stdlib_header("a/" * 60 + "file.txt", size=1234, mode=0o755)
    header = parse_header(block)
    assert header.name == "a/" * 60 + "file.txt"
    assert (header.kind, header.size, header.mode) == ("file", 1234, 0o755)


@pytest.mark.parametrize(
    ("typeflag", "kind"),
    [
        (tarfile.DIRTYPE, "dir"),
        (tarfile.SYMTYPE, "symlink"),
        (tarfile.LNKTYPE, "hardlink"),
        (tarfile.CHRTYPE, "device"),
        (tarfile.BLKTYPE, "device"),
        (tarfile.FIFOTYPE, "fifo"),
    ],
)
def test_parse_header_kinds(typeflag: bytes, kind: str) -> None:
    assert parse_header(_stdlib_header("x", type=typeflag, linkname="t")).kind == kind


def test_parse_header_checksum_mismatch() -> None:
    block = bytearray(_stdlib_header("x", size=1))
    block[0] ^= 0x01
    with pytest.raises(TarFormatError, match="checksum"):
        parse_header(bytes(block))


def test_parse_number_octal_and_base256() -> None:
    assert parse_number(b"0000644\x00") == 0o644
    assert parse_number(b"   12 \x00") == 0o12
    assert parse_number(b"\x80" + (10 << 30).to_bytes(11, "big")) == 10 << 30
    with pytest.raises(TarFormatError):
        parse_number(b"9999\x00")


def test_parse_pax_records_from_stdlib() -> None:
    info = tarfile.TarInfo("ü" * 200)
    info.linkname = "l" * 150
    info.type = tarfile.SYMTYPE
    buf = info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8")
    pax_header = parse_header(buf[:512])
    records = parse_pax(buf[512 : 512 + pax_header.size])
    assert records["path"] == "ü" * 200
    assert records["linkpath"] == "l" * 150


def test_parse_pax_rejects_garbage() -> None:
    with pytest.raises(TarFormatError):
        parse_pax(b"12 nonsense")


_NAMES = st.text(alphabet=st.sampled_from("ab/._-é\u00ff"), min_size=1, max_size=260)


@settings(max_examples=300, deadline=None)
@given(
    name=_NAMES,
    kind=st.sampled_from(["file", "dir", "symlink"]),
    size=st.sampled_from([0, 1, 511, 512, USTAR_MAX_SIZE, USTAR_MAX_SIZE + 1]),
    link=st.text(alphabet=st.sampled_from("ab/.é"), max_size=120),
)
def test_header_size_is_the_length_of_the_header_built(name: str, kind: str, size: int, link: str) -> None:
    """The packer measures units with header_size before packing them: it must never disagree."""
    size = size if kind == "file" else 0
    link = link if kind == "symlink" else ""
    assert header_size(name, kind=kind, size=size, link=link) == len(
        build_header(name, kind=kind, size=size, link=link)
    )
