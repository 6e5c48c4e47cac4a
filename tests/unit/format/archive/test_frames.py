"""The framed archive: one zstd frame per unit, a correct frame table, the same bytes every time,
readable by GNU tar and by our unpack, and a tampered frame found by the frame table check."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import random
import shutil
import subprocess
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import zstandard

from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format.archive import frames
from scrollcase.format.archive import pack as archive
from scrollcase.format.archive.frames import FrameRecord, FrameSink, check_frame_table, frame_table, table_problems
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.archive.zstdframes import FrameWalker
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.framedbox import make_framed_box
from tests.support.releases import make_manifest


def test_frame_table_describes_the_archive(tmp_path: Path) -> None:
    packed = pack_tree(make_framed_box(tmp_path / "box"), tmp_path / "a.tar.zst")
    data = packed.path.read_bytes()
    names = [f.name for f in packed.frames]
    assert names[:2] == ["dirs", "box.json"] and names[-1] == "end"
    assert {
        "conda/python-3.11.7-h0_0",
        "wheel/pkg0-1.0",
        "wheel/pkg3-1.0",
        "assets/org/model/weights.bin",
        "rest",
    } <= set(names)
    assert not table_problems(packed.frames, packed.size)
    for frame in packed.frames:
        chunk = data[frame.offset : frame.offset + frame.size]
        assert hashlib.sha256(chunk).hexdigest() == frame.sha256
        walker = FrameWalker()
        walker.feed(chunk)
        walker.finish()
        assert walker.frames == 1  # each row is exactly one independent frame
        assert len(zstandard.ZstdDecompressor().decompress(chunk)) == frame.uncompressed_size
    assert sum(f.uncompressed_size for f in packed.frames) == packed.uncompressed_bytes
    check_frame_table(packed.path, frame_table(packed.frames) or [], packed.size, "a.release.json")


def test_framed_archive_is_reproducible_and_shares_unchanged_frames(tmp_path: Path) -> None:
    first = pack_tree(make_framed_box(tmp_path / "a", version="1.0.0", payload=5_000_000), tmp_path / "1.tar.zst")
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "a", copy, symlinks=True)
    again = pack_tree(copy, tmp_path / "2.tar.zst", threads=1)
    assert again.sha256 == first.sha256  # pkg0's 5 MB unit is streamed, the rest compressed in the pool
    newer = pack_tree(make_framed_box(tmp_path / "b", version="1.0.1", payload=5_000_000), tmp_path / "3.tar.zst")
    changed = {f.name for f in newer.frames} - {f.name for f in first.frames}
    old = {f.name: f.sha256 for f in first.frames}
    differ = sorted(f.name for f in newer.frames if old.get(f.name) != f.sha256)
    assert not changed and differ == ["box.json", "wheel/pkg0-1.0"]


def test_a_units_frame_is_the_same_bytes_pooled_or_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """archive.SMALL_UNIT only says which compressor makes a unit's frame (memory, speed), never its bytes:
    above zstd's one-thread limit (512 KiB of input) both give the same frame.  Units of 0.6-3 MB here."""
    box = make_framed_box(tmp_path / "box", payload=600_000, packages=6)
    for i in range(1, 6):  # a unit per size, all above the limit
        blob = random.Random(i).randbytes(600_000 * i)
        (next(box.rglob(f"pkg{i}/data.bin"))).write_bytes(blob[: len(blob) // 2] + bytes(len(blob) // 2))
    digests = set()
    for small_unit in (64 << 20, 512 << 10):
        monkeypatch.setattr(archive, "SMALL_UNIT", small_unit)
        digests.add(pack_tree(box, tmp_path / f"{small_unit}.tar.zst").sha256)
    assert len(digests) == 1


def test_gnu_tar_and_unpack_read_the_framed_archive(tmp_path: Path) -> None:
    packed = pack_tree(make_framed_box(tmp_path / "box"), tmp_path / "a.tar.zst")
    if shutil.which("zstd") and shutil.which("tar"):
        listing = subprocess.run(
            f"zstd -dc {packed.path} | tar -tf -", shell=True, check=True, capture_output=True, text=True
        ).stdout.split()
        assert "venv/lib/python3.11/site-packages/pkg0/__init__.py" in listing and "box.json" in listing
        out = tmp_path / "gnu"
        out.mkdir()
        subprocess.run(f"zstd -dc {packed.path} | tar -xf - -C {out}", shell=True, check=True)
        assert (out / "venv" / "bin" / "python").is_symlink()
    result = unpack_archive(packed.path, tmp_path / "dest", expected_size=packed.size, expected_sha256=packed.sha256)
    assert (result.dest / "model-cache" / "org" / "model" / "weights.bin").stat().st_size == 25600


def test_a_tampered_frame_is_found(tmp_path: Path) -> None:
    packed = pack_tree(make_framed_box(tmp_path / "box"), tmp_path / "a.tar.zst")
    table = frame_table(packed.frames) or []
    victim = next(f for f in packed.frames if f.name == "wheel/pkg2-1.0")
    data = bytearray(packed.path.read_bytes())
    data[victim.offset + victim.size // 2] ^= 0xFF
    packed.path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"frame 'wheel/pkg2-1.0' at offset \d+ has sha256"):
        check_frame_table(packed.path, table, packed.size, "a.release.json")


def test_a_table_with_gaps_or_a_wrong_total_is_refused() -> None:
    rows = [FrameRecord("a", 0, 10, 1, "0" * 64), FrameRecord("b", 12, 5, 1, "0" * 64)]
    problems = table_problems(rows, 20)
    assert problems == [
        "frame 'b' starts at 12, the one before it ends at 10",
        "the frames end at 17, the archive is 20 bytes",
    ]


def test_publish_refuses_a_manifest_whose_frame_table_disagrees(tmp_path: Path) -> None:
    packed = pack_tree(make_framed_box(tmp_path / "box"), tmp_path / "a.tar.zst")
    table = frame_table(packed.frames) or []
    swapped = [table[0], table[2].model_copy(update={"offset": table[1].offset}), *table[2:]]
    draft = make_manifest(size=packed.size, sha256=packed.sha256)
    archive = draft.archive.model_copy(update={"frames": swapped})
    manifest = draft.model_copy(update={"archive": archive})
    with pytest.raises(IntegrityError, match=r"the frame table of release\.json disagrees"):
        publish(LocalStore(tmp_path / "store"), manifest, packed.path)
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.tar.zst"))


class _FullDisk(io.BytesIO):
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


def test_the_sink_hashes_and_writes_each_frame_in_order() -> None:
    out = io.BytesIO()
    sink = FrameSink(out, depth=2)
    seen: list[str] = []
    for name, parts in (("a", [b"x" * 10, b"y" * 5]), ("b", [b"z" * 7])):
        for part in parts:
            sink.write(part)
        sink.end_frame(name, 100, lambda record: seen.append(record.name))
    sink.close()
    data = out.getvalue()
    assert data == b"x" * 10 + b"y" * 5 + b"z" * 7
    assert sink.size == len(data) and sink.sha.hexdigest() == hashlib.sha256(data).hexdigest()
    assert [(f.name, f.offset, f.size, f.sha256) for f in sink.frames] == [
        ("a", 0, 15, hashlib.sha256(data[:15]).hexdigest()),
        ("b", 15, 7, hashlib.sha256(data[15:]).hexdigest()),
    ]
    assert seen == ["a", "b"]


def test_a_full_disk_under_the_sink_is_raised_to_the_packer_and_never_hangs_it() -> None:
    """The sink writes on its own thread: its ENOSPC must reach the packer, even with the queue full."""
    sink = FrameSink(_FullDisk(room=3), depth=1)
    with pytest.raises(OSError) as raised:
        try:
            for _ in range(50):
                sink.write(b"0123456789")
        finally:
            sink.close(quiet=True)  # as pack_tree does: its threads end
        sink.close()
    assert raised.value.errno == errno.ENOSPC


def test_pack_tree_on_a_full_disk_raises_enospc_and_leaves_no_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    (tree / "venv").mkdir(parents=True)
    (tree / "venv" / "big.bin").write_bytes(os.urandom(6 << 20))  # a streamed unit
    real = archive.FrameSink

    def full(out: Any, **options: Any) -> FrameSink:
        sink = real(out, **options)
        sink.out = _FullDisk(room=1 << 20)
        return sink

    monkeypatch.setattr(archive, "FrameSink", full)
    out = tmp_path / "box.tar.zst"
    with pytest.raises(OSError) as raised:
        archive.pack_tree(tree, out)
    assert raised.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_a_copied_frame_is_hashed_unless_its_digest_is_known(tmp_path: Path) -> None:
    """copy_frame (a rebuild's reused frames): the bytes land in place, hashed through a buffer smaller than
    the file; into a file object without a descriptor, by the plain read and write."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(os.urandom(9 << 20))
    second.write_bytes(b"frame two")
    out = io.BytesIO()
    sink = FrameSink(out, depth=2)
    recorded: list[str] = []
    sink.write(b"head")
    sink.end_frame("head", 4)
    sink.copy_frame(first, "first", 123, on_record=lambda record: recorded.append(record.sha256))
    sink.copy_frame(second, "second", 45, known="f" * 64)
    sink.close()
    data = out.getvalue()
    assert data == b"head" + first.read_bytes() + second.read_bytes()
    assert sink.sha.hexdigest() == hashlib.sha256(data).hexdigest()
    rows = [(f.name, f.offset, f.size, f.uncompressed_size, f.sha256) for f in sink.frames]
    assert rows == [
        ("head", 0, 4, 4, hashlib.sha256(b"head").hexdigest()),
        ("first", 4, 9 << 20, 123, hashlib.sha256(first.read_bytes()).hexdigest()),
        ("second", 4 + (9 << 20), 9, 45, "f" * 64),  # known: trusted, not hashed again
    ]
    assert recorded == [rows[1][4]]


@pytest.mark.parametrize("kernel_copy", [True, False], ids=["copy_file_range", "read-and-write"])
@pytest.mark.parametrize("positional_reads", [True, False], ids=["preadv", "second-handle"])
def test_copied_frames_and_written_bytes_interleave_in_order_in_a_real_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool, positional_reads: bool
) -> None:
    """Into a file on disk the kernel copies each cached frame (copy_file_range) at the file's own position,
    between bytes the sink still holds buffered: they must land in stream order, hashed as they land.  Where
    the OS has no copy_file_range (macOS, Windows) the plain read and write must give the same file, and
    where it has no preadv (Windows) the hash's second handle must read the same bytes as the copy."""
    monkeypatch.setattr(frames, "_HASH_READ", 1 << 16)  # several reads per frame
    if not kernel_copy:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    if not positional_reads:
        monkeypatch.delattr(os, "preadv", raising=False)
    cached = []
    for i, size in enumerate((300_001, 65_536, 1)):
        path = tmp_path / f"cached-{i}"
        path.write_bytes(os.urandom(size))
        cached.append(path)
    archive_path = tmp_path / "archive"
    with archive_path.open("xb") as out:
        sink = FrameSink(out, depth=2)
        for i, path in enumerate(cached):
            sink.write(b"tar bytes %d" % i)  # left in the file object's buffer until the copy flushes it
            sink.end_frame(f"written-{i}", 11)
            sink.copy_frame(path, f"cached-{i}", 1)
        sink.write(b"end")
        sink.end_frame("end", 3)
        sink.close()
    expected = b"".join(b"tar bytes %d" % i + path.read_bytes() for i, path in enumerate(cached)) + b"end"
    data = archive_path.read_bytes()
    assert data == expected
    assert sink.sha.hexdigest() == hashlib.sha256(data).hexdigest()
    for record in sink.frames:
        assert record.sha256 == hashlib.sha256(data[record.offset : record.offset + record.size]).hexdigest()


def test_cached_frames_never_wait_for_room_but_bytes_do(tmp_path: Path) -> None:
    """A rebuild queues every cached frame at once (each holds only a path), so it meets its changed package
    while the sink is still busy with the frames before it; bytes still wait for the queue's room."""
    cached = tmp_path / "cached"
    cached.write_bytes(b"c" * 10)
    out = io.BytesIO()
    sink = FrameSink(out, depth=1)
    first: Future[bytes] = Future()
    sink.frame(first, "first", 1, lambda record, frame: None)  # the sink waits for it, holding the one room
    copies = threading.Thread(
        target=lambda: [sink.copy_frame(cached, f"cached-{i}", 10) for i in range(50)], daemon=True
    )
    copies.start()
    copies.join(10)
    assert not copies.is_alive()  # queued at once, the sink still waiting for the first frame
    late = threading.Thread(target=sink.write, args=(b"late",), daemon=True)
    late.start()
    late.join(0.3)
    assert late.is_alive()  # bytes wait until the sink has written the frame before them
    first.set_result(b"F")
    late.join(10)
    assert not late.is_alive()
    sink.end_frame("late", 4)
    sink.close()
    assert out.getvalue() == b"F" + b"c" * 10 * 50 + b"late"
    assert [f.name for f in sink.frames] == ["first", *(f"cached-{i}" for i in range(50)), "late"]


def test_a_frame_still_being_written_is_copied_in_its_place_when_ready(tmp_path: Path) -> None:
    """copy_frame of a future (a changed unit compressed aside): the sink waits for it in stream order, the
    frames after it queued meanwhile; copying() says whether the sink still has copies to make."""
    later, aside = tmp_path / "later", tmp_path / "aside"
    later.write_bytes(b"L" * 10)
    out = io.BytesIO()
    sink = FrameSink(out)
    assert not sink.copying()
    pending: Future[Path] = Future()
    sink.copy_frame(pending, "aside", 5)
    sink.copy_frame(later, "later", 10)
    assert sink.copying()
    aside.write_bytes(b"A" * 5)
    pending.set_result(aside)
    sink.wait()
    assert not sink.copying()
    sink.close()
    assert out.getvalue() == b"A" * 5 + b"L" * 10
    assert [(f.name, f.offset, f.sha256) for f in sink.frames] == [
        ("aside", 0, hashlib.sha256(b"A" * 5).hexdigest()),
        ("later", 5, hashlib.sha256(b"L" * 10).hexdigest()),
    ]


def test_a_cached_frame_cut_short_while_it_is_copied_is_an_error_naming_it(tmp_path: Path) -> None:
    source = tmp_path / "cached"
    source.write_bytes(b"x" * 100)
    with (tmp_path / "archive").open("xb") as out, source.open("rb", buffering=0) as raw:
        sink = FrameSink(out)
        with pytest.raises(BuildError) as raised:
            sink._write_span(frames._Span(raw, 150, str(source)))
        sink.close()
    assert f"the pack cache's frame {source} ended after 100 of its 150 bytes" in str(raised.value)


def test_a_full_disk_while_copying_a_frame_is_raised_and_never_hangs(tmp_path: Path) -> None:
    frame = tmp_path / "frame"
    frame.write_bytes(os.urandom(20 << 20))
    sink = FrameSink(_FullDisk(room=1 << 20), depth=1)
    with pytest.raises(OSError) as raised:
        for _ in range(3):
            sink.copy_frame(frame, "frame", 1)
        sink.close()
    assert raised.value.errno == errno.ENOSPC
