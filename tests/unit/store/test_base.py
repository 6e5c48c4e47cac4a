from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollcase.errors import IntegrityError, StoreError
from scrollcase.store.base import (
    Blob,
    FileUpload,
    ObjectInfo,
    Piece,
    RangeRead,
    ReadableStore,
    Store,
    Transfer,
    WriteOptions,
    capped,
    limited,
    parse_content_range,
    range_header,
    read_document,
    read_sidecar,
    sidecar_path,
    sidecar_text,
)
from scrollcase.store.http import HttpStore
from scrollcase.store.local import LocalStore
from scrollcase.store.s3 import S3Store

SHA = "ab" * 32


def test_the_sidecar_reader_reads_what_the_writer_wrote(tmp_path: Path) -> None:
    archive = tmp_path / "box.tar.zst"
    sidecar_path(archive).write_bytes(sidecar_text(SHA, archive.name))
    assert sidecar_path(archive) == tmp_path / "box.tar.zst.sha256"
    assert read_sidecar(archive) == SHA


def test_no_sidecar_is_none(tmp_path: Path) -> None:
    assert read_sidecar(tmp_path / "box.tar.zst") is None


@pytest.mark.parametrize("text", ["", "not-a-digest  box.tar.zst\n", "ab" * 31])
def test_a_sidecar_without_a_digest_is_an_integrity_error(tmp_path: Path, text: str) -> None:
    archive = tmp_path / "box.tar.zst"
    sidecar_path(archive).write_text(text)
    with pytest.raises(IntegrityError, match="does not start with a sha256 digest"):
        read_sidecar(archive)


def test_an_upper_case_digest_is_read_as_written_and_a_name_after_it_is_ignored(tmp_path: Path) -> None:
    archive = tmp_path / "box.tar.zst"
    sidecar_path(archive).write_text(f"{SHA.upper()}  *box.tar.zst\nmore words\n")
    assert read_sidecar(archive) == SHA.upper()
    assert sidecar_text(SHA, "box.tar.zst") == f"{SHA}  box.tar.zst\n".encode()


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        ("bytes 100-999/1000", (100, 999, 1000)),
        ("bytes 0-0/*", (0, 0, None)),
        (" bytes 5-9/10 ", (5, 9, 10)),
        ("bytes */1000", None),
        ("items 1-2/3", None),
        (None, None),
    ],
)
def test_a_content_range_is_parsed_and_anything_else_is_none(
    header: str | None, parsed: tuple[int, int, int | None] | None
) -> None:
    assert parse_content_range(header) == parsed


@pytest.mark.parametrize(
    ("offset", "length", "header"),
    [(0, None, None), (5, None, "bytes=5-"), (0, 10, "bytes=0-9"), (5, 1, "bytes=5-5"), (7, 3, "bytes=7-9")],
)
def test_range_header_asks_for_the_bytes_wanted_or_nothing_for_the_whole_object(
    offset: int, length: int | None, header: str | None
) -> None:
    assert range_header(offset, length) == header


@pytest.mark.parametrize(
    ("length", "cut"),
    [
        (None, [b"abc", b"def", b"gh"]),
        (0, []),
        (1, [b"a"]),
        (3, [b"abc"]),
        (4, [b"abc", b"d"]),
        (8, [b"abc", b"def", b"gh"]),
        (9, [b"abc", b"def", b"gh"]),
    ],
)
def test_limited_cuts_the_chunks_after_length_bytes(length: int | None, cut: list[bytes]) -> None:
    assert list(limited(iter([b"abc", b"def", b"gh"]), length)) == cut


def test_limited_stops_reading_once_it_has_the_bytes() -> None:
    pulled: list[bytes] = []

    def chunks() -> Iterator[bytes]:
        for chunk in (b"abc", b"def", b"never"):
            pulled.append(chunk)
            yield chunk

    assert list(limited(chunks(), 6)) == [b"abc", b"def"]
    assert pulled == [b"abc", b"def", b"never"]  # the third is pulled only to see that nothing is left


def test_a_piece_knows_its_size_and_where_its_bytes_come_from() -> None:
    sent = Piece(10, 25)
    assert (sent.size, sent.copied) == (15, False)
    copied = Piece(10, 25, "boxes/b/old.tar.zst", 100)
    assert (copied.size, copied.copied, copied.source_range) == (15, True, (100, 115))
    assert Piece(0, 4, "k").source_range == (0, 4)


@pytest.mark.parametrize(
    "fact",
    [
        ObjectInfo("k", 1, None),
        Blob(b"x", "e"),
        Piece(0, 1),
        FileUpload(Path("a"), 1, SHA),
        Transfer(1),
        RangeRead(0, None, iter([])),
    ],
)
def test_the_facts_a_store_returns_cannot_change(fact: object) -> None:
    name = next(iter(vars(fact)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fact, name, getattr(fact, name))


def defaults(function: object) -> dict[str, object]:
    return {name: p.default for name, p in inspect.signature(function).parameters.items() if p.default is not p.empty}


@pytest.mark.parametrize(
    ("protocol", "store"),
    [
        (Store, LocalStore),
        (Store, S3Store),
        (ReadableStore, LocalStore),
        (ReadableStore, S3Store),
        (ReadableStore, HttpStore),
    ],
)
def test_every_store_has_what_its_protocol_declares(protocol: type, store: type) -> None:
    # the protocols are read by mypy only, so their declarations are checked here against the stores themselves
    assert isinstance(inspect.getattr_static(protocol, "url"), property)
    assert isinstance(inspect.getattr_static(store, "url"), property)
    if protocol is ReadableStore:
        assert defaults(store.read_from) == defaults(protocol.read_from) == {"offset": 0, "length": None}


def test_every_write_option_may_be_left_out() -> None:
    assert WriteOptions.__required_keys__ == frozenset()
    assert WriteOptions.__optional_keys__ == {"if_none_match", "if_match", "content_type"}


def test_capped_passes_up_to_the_size_and_refuses_the_first_byte_past_it() -> None:
    assert b"".join(capped(iter([b"ab", b"cd"]), 4, "http://s/k", "the frame")) == b"abcd"
    taken: list[bytes] = []
    with pytest.raises(IntegrityError) as refused:
        taken.extend(capped(iter([b"ab", b"cd", b"e", b"never"]), 4, "http://s/k", "the frame"))
    assert taken == [b"ab", b"cd"]  # the chunk that crosses the size is never handed over
    assert (
        refused.value.message
        == "refusing http://s/k: the store sent more than the 4 bytes of the frame; nothing of it was kept"
    )


def test_read_document_stops_at_its_size_and_at_its_deadline() -> None:
    now = time.monotonic()
    assert read_document(iter([b"{}", b"\n"]), "u", max_bytes=3, started=now, seconds=60) == b"{}\n"
    with pytest.raises(StoreError, match=r"^refusing u: more than 3 bytes arrived, and a document is at most 3 bytes"):
        read_document(iter([b"{}", b"\n", b" "]), "u", max_bytes=3, started=now, seconds=60)
    with pytest.raises(
        StoreError, match=r"^refusing u: only 1 bytes arrived before the deadline of 2 s for a document"
    ):
        read_document(iter([b"{"]), "u", max_bytes=3, started=now - 5, seconds=2)
