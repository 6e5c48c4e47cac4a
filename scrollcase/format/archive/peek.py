"""Read one small top-level member (``box.json``) from a box archive without unpacking the rest.

Archives are packed with every directory first and ``box.json`` right after them
(:mod:`scrollcase.format.archive.units`; older single-frame archives sorted by name, depth first, so ``box.json``
came after the few top-level names that sort before it), and the stream is decompressed only that far.
Once a member other than a directory whose first path component sorts after ``box.json`` appears, the
archive has none.  Nothing touches the disk; memory is bounded by the
decompressor's output chunk and the member's own size limit.

This is not a check of the archive's integrity: callers compare its size and sha256 with the
release manifest separately (``publish`` hashes the whole file).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, cast

import zstandard

from scrollcase.errors import IntegrityError
from scrollcase.format.archive.tar import BLOCK, META_KINDS, ChunkReader, TarFormatError, parse_header, read_meta
from scrollcase.format.archive.zstdframes import FrameError, FrameWalker
from scrollcase.format.boxjson import BoxJson, parse_box_json
from scrollcase.format.layout import BOX_JSON
from scrollcase.io.documents import MAX_BOX_JSON_BYTES

READ_CHUNK = 1 << 20
MAX_MEMBER = MAX_BOX_JSON_BYTES  # box.json's one limit (io/documents.py), read or parsed


def read_member(archive: Path, name: str, *, max_size: int = MAX_MEMBER) -> bytes | None:
    """The bytes of the top-level member ``name``; None when the archive has none.

    IntegrityError when the file is not a zstd-compressed tar (as far as it was read), when the
    member is not a regular file or is larger than ``max_size``.  OSError when the file cannot be read.
    """
    label = str(archive)
    with archive.open("rb") as raw:
        walked = _Walked(raw)
        reader = zstandard.ZstdDecompressor().stream_reader(
            cast("IO[bytes]", walked), read_size=READ_CHUNK, read_across_frames=True, closefd=False
        )
        chunks = ChunkReader(lambda: reader.read(READ_CHUNK) or None)
        try:
            return _scan(chunks, name, max_size, label)
        except TarFormatError as exc:
            raise IntegrityError(f"archive {label}: {exc}", fix="rebuild the box, or download it again") from None
        except zstandard.ZstdError as exc:  # the frame walker says precisely what is wrong, as unpack's does
            detail = walked.error or f"not a valid zstd stream: {exc}"
            raise IntegrityError(f"archive {label}: {detail}", fix="rebuild the box, or download it again") from None


class _Walked:
    """The archive as the decompressor reads it, its zstd frames walked on the way (unpack's walker)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.frames = FrameWalker()
        self.error: str | None = None

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        if self.error is None:
            try:
                self.frames.feed(data)
            except FrameError as exc:
                self.error = str(exc)
        return data


def _scan(chunks: ChunkReader, name: str, max_size: int, label: str) -> bytes | None:
    pending: dict[str, str] = {}
    while True:
        block = chunks.read_header_block()
        if block is None:
            return None
        header = parse_header(block)
        if header.kind in META_KINDS:
            read_meta(header, chunks, pending)
            continue
        member = pending.get("path", header.name).removeprefix("./").rstrip("/")
        size = int(pending["size"]) if "size" in pending and pending["size"].isdigit() else header.size
        pending = {}
        if member == name:
            if header.kind != "file":
                raise IntegrityError(
                    f"archive {label}: {name} is a {header.kind}, not a regular file",
                    fix="rebuild the box with `scrollcase build`",
                )
            if size > max_size:
                raise IntegrityError(
                    f"archive {label}: {name} is {size} bytes (more than {max_size})",
                    fix="rebuild the box with `scrollcase build`",
                )
            return chunks.read(size)
        # Sorted, after the directories (a framed archive puts them all first): it would have come already.
        if header.kind != "dir" and member.split("/", 1)[0] > name:
            return None
        chunks.skip(size + (-size % BLOCK))


def read_box_json(archive: Path, label: str | None = None) -> BoxJson:
    """The archive's own ``box.json``, read from the stream's start; IntegrityError when absent or invalid."""
    shown = label or str(archive)
    try:
        data = read_member(archive, BOX_JSON)
    except OSError as exc:
        raise IntegrityError(
            f"cannot read archive {shown}: {exc.strerror}", fix="check the path, or build the box again"
        ) from None
    if data is None:
        raise IntegrityError(
            f"archive {shown} has no {BOX_JSON} at its root: it is not a scrollcase box",
            fix="publish the archive `scrollcase build` wrote beside this release manifest",
        )
    return parse_box_json(data, file=f"{shown}!{BOX_JSON}")
