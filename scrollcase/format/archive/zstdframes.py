"""Walking the frame/block structure of a zstd stream without decompressing it (pure, incremental).

Why: the decompressor is driven through a bounded-output reader (so a few compressed bytes can never
expand to gigabytes in one call), and that reader neither reports a truncated frame nor data after
the last frame.  Block headers carry their sizes, so following them costs a few operations per
128 KiB block and tells exactly where each frame ends (RFC 8878, sections 3.1.1 and 3.1.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50


class FrameError(ValueError):
    """The bytes are not a well-formed sequence of zstd frames."""


@dataclass
class FrameWalker:
    """Feed every compressed byte in order; ``finish()`` says whether the stream ended cleanly."""

    _buf: bytearray = field(default_factory=bytearray)
    _skip: int = 0  # bytes of the current block/skippable frame still to pass over
    _state: str = "magic"  # magic | header | block | checksum
    _checksum: bool = False
    frames: int = 0

    def feed(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        if self._skip:
            take = min(self._skip, len(view))
            self._skip -= take
            view = view[take:]
        if not view:
            return
        self._buf += view
        self._advance()

    def _advance(self) -> None:
        pos = 0
        buf = self._buf
        while True:
            if self._skip:
                take = min(self._skip, len(buf) - pos)
                self._skip -= take
                pos += take
                if self._skip:
                    break
            need = self._need(buf, pos)
            if need is None or len(buf) - pos < need:
                break
            pos = self._step(buf, pos)
        del buf[:pos]

    def _need(self, buf: bytearray, pos: int) -> int | None:
        if self._state in ("magic", "checksum"):
            return 4 if self._state == "checksum" else 8 if _is_skippable(buf, pos) else 5
        if self._state == "header":
            return _header_size(buf[pos])
        return 3  # block header

    def _step(self, buf: bytearray, pos: int) -> int:
        if self._state == "magic":
            return self._frame_start(buf, pos)
        if self._state == "header":
            size = _header_size(buf[pos])
            self._state = "block"
            return pos + size
        if self._state == "checksum":
            self._end_frame()
            return pos + 4
        header = int.from_bytes(buf[pos : pos + 3], "little")
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        if kind == 3:
            raise FrameError("reserved zstd block type (corrupt stream)")
        self._skip = 1 if kind == 1 else size
        if last:
            if self._checksum:
                self._state = "checksum"
            else:
                self._end_frame()
        return pos + 3

    def _frame_start(self, buf: bytearray, pos: int) -> int:
        magic = int.from_bytes(buf[pos : pos + 4], "little")
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            self._skip = int.from_bytes(buf[pos + 4 : pos + 8], "little")
            return pos + 8
        if magic != ZSTD_MAGIC:
            if self.frames:
                raise FrameError("data after the end of the zstd frame")
            raise FrameError("not a zstd stream (bad magic number)")
        descriptor = buf[pos + 4]
        if descriptor & 0x08:
            raise FrameError("reserved bit set in the zstd frame header (corrupt stream)")
        self._checksum = bool(descriptor & 0x04)
        self._state = "header"
        return pos + 4  # the descriptor is re-read by _header_size

    def _end_frame(self) -> None:
        self.frames += 1
        self._state = "magic"

    def finish(self) -> None:
        """Raise FrameError unless the stream ended exactly at the end of a frame."""
        if self._state == "magic" and not self._skip and self._buf and not _starts_frame(self._buf):
            raise FrameError(
                "data after the end of the zstd frame" if self.frames else "not a zstd stream (bad magic number)"
            )
        if self._skip or self._buf or self._state != "magic":
            raise FrameError("archive is truncated (the zstd frame does not end)")
        if not self.frames:
            raise FrameError("not a zstd stream (no frame)")


def _starts_frame(buf: bytearray) -> bool:
    """Whether a short leftover begins like a zstd (or skippable) frame's magic number."""
    head = bytes(buf[:4])
    return ZSTD_MAGIC.to_bytes(4, "little").startswith(head) or _is_skippable(buf, 0)


def _is_skippable(buf: bytearray, pos: int) -> bool:
    return len(buf) - pos >= 4 and int.from_bytes(buf[pos : pos + 4], "little") & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC


def _header_size(descriptor: int) -> int:
    """Bytes of the frame header from the descriptor byte on (descriptor, window, dict id, size)."""
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    window = 0 if single_segment else 1
    dict_id = (0, 1, 2, 4)[dict_flag]
    content_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    return 1 + window + dict_id + content_size
