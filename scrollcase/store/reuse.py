"""Which bytes of a new archive the store already holds in an earlier release of the same box (pure).

A framed archive is a sequence of independent zstd frames, one per package (format/archive/frames.py), and the
packer is deterministic: a release in which one package changed shares every other frame, byte for
byte, with the release before it, only at other offsets.  :func:`plan_reuse` finds the runs of
consecutive frames of the new archive that stand, consecutively and with the same digests and sizes, in
one earlier archive: each run becomes a piece the store copies from there; the rest is sent.

A store then shapes the pieces into what it can do: a directory copies any range (store/local.py); S3
copies and uploads *parts*, each but the last at least 5 MiB, at most 10,000 of them (:func:`part_layout`,
used by store/s3.py).  Nothing here trusts the earlier archive's bytes: the stores check what they copied
against the new archive's own digests before the object becomes visible.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scrollcase.format.archive.frames import FrameLike
from scrollcase.store.base import Piece


@dataclass(frozen=True)
class EarlierArchive:
    """An archive already in the store, as its release manifest's frame table describes it."""

    key: str  # its object key
    label: str  # "<boxId> <version> <targetId>", for messages
    frames: tuple[FrameLike, ...]


@dataclass(frozen=True)
class _Run:
    source: EarlierArchive
    first: int  # index of the run's first frame in the source's table
    length: int  # frames


def plan_reuse(frames: Sequence[FrameLike], earlier: Sequence[EarlierArchive]) -> tuple[Piece, ...]:
    """The new archive (its frame table ``frames``) as pieces: runs found in ``earlier`` (the first of
    them wins a tie: callers list the best sources first), the rest to send.  ``()`` when nothing is
    reusable (or the archive has no frame table)."""
    positions = [_positions(source.frames) for source in earlier]
    pieces: list[Piece] = []
    i = 0
    while i < len(frames):
        run = _longest_run(frames, i, earlier, positions)
        if run is None:
            pieces.append(Piece(frames[i].offset, frames[i].offset + frames[i].size))
            i += 1
            continue
        last = frames[i + run.length - 1]
        start = frames[i].offset
        pieces.append(Piece(start, last.offset + last.size, run.source.key, run.source.frames[run.first].offset))
        i += run.length
    merged = merge_sent(pieces)
    return merged if any(p.copied for p in merged) else ()


def _positions(frames: Sequence[FrameLike]) -> dict[tuple[str, int], list[int]]:
    found: dict[tuple[str, int], list[int]] = {}
    for n, frame in enumerate(frames):
        found.setdefault((frame.sha256, frame.size), []).append(n)
    return found


def _longest_run(
    frames: Sequence[FrameLike],
    i: int,
    earlier: Sequence[EarlierArchive],
    positions: Sequence[Mapping[tuple[str, int], list[int]]],
) -> _Run | None:
    best: _Run | None = None
    for source, where in zip(earlier, positions, strict=True):
        for first in where.get((frames[i].sha256, frames[i].size), []):
            length = 1
            while (
                i + length < len(frames)
                and first + length < len(source.frames)
                and _same(frames[i + length], source.frames[first + length])
            ):
                length += 1
            if best is None or length > best.length:
                best = _Run(source, first, length)
    return best


def _same(a: FrameLike, b: FrameLike) -> bool:
    return a.sha256 == b.sha256 and a.size == b.size


def merge_sent(pieces: Sequence[Piece]) -> tuple[Piece, ...]:
    """``pieces`` with neighbouring sent pieces joined into one."""
    out: list[Piece] = []
    for piece in pieces:
        if out and not piece.copied and not out[-1].copied:
            out[-1] = Piece(out[-1].start, piece.end)
        else:
            out.append(piece)
    return tuple(out)


def copied_bytes(pieces: Sequence[Piece]) -> int:
    return sum(p.size for p in pieces if p.copied)


@dataclass(frozen=True)
class PartRules:
    """A multipart upload's rules: every part but the last at least ``min_part`` bytes, at most
    ``max_parts`` parts; sent parts near ``send_part`` bytes (memory), copied ones near ``copy_part``."""

    min_part: int
    send_part: int
    copy_part: int
    max_parts: int


def part_layout(pieces: Sequence[Piece], rules: PartRules) -> tuple[Piece, ...]:
    """``pieces`` (from :func:`plan_reuse`) as the parts of one multipart upload that obeys ``rules``.

    A run too short to stand as a part (but the last) is sent instead, joined to its neighbours; a sent piece too short
    to be a part takes the bytes it lacks from the copy after it (or all of it, when the rest of that copy
    would be too short); long pieces are cut into parts.  ``()`` when no copy survives, or when the parts
    would be more than ``max_parts``: then the file is sent whole, as without reuse.
    """
    last = len(pieces) - 1
    standing = merge_sent(
        [
            p if not p.copied or p.size >= rules.min_part or n == last else Piece(p.start, p.end)
            for n, p in enumerate(pieces)
        ]
    )
    parts = [part for piece in _grow_short_sends(standing, rules.min_part) for part in _cut(piece, rules)]
    if len(parts) > rules.max_parts or not any(p.copied for p in parts):
        return ()
    return tuple(parts)


def _grow_short_sends(pieces: Sequence[Piece], min_part: int) -> list[Piece]:
    pending = deque(pieces)
    out: list[Piece] = []
    while pending:
        piece = pending.popleft()
        if piece.copied or piece.size >= min_part or not pending:
            out.append(piece)
            continue
        after = pending.popleft()  # a copy: sent neighbours are merged
        lacking = min_part - piece.size
        rest = after.size - lacking
        if rest >= min_part or (rest > 0 and not pending):
            out.append(Piece(piece.start, piece.start + min_part))
            pending.appendleft(_tail(after, lacking))
        else:
            grown = Piece(piece.start, after.end)
            if pending and not pending[0].copied:
                grown = Piece(piece.start, pending.popleft().end)
            pending.appendleft(grown)
    return out


def _tail(piece: Piece, skip: int) -> Piece:
    """``piece`` less its first ``skip`` bytes."""
    return Piece(piece.start + skip, piece.end, piece.source_key, piece.source_start + skip)


def _cut(piece: Piece, rules: PartRules) -> list[Piece]:
    """``piece`` in parts of about the rule's size; a short last part is joined to the one before it."""
    size = rules.copy_part if piece.copied else rules.send_part
    starts = list(range(0, piece.size, size))
    if len(starts) > 1 and piece.size - starts[-1] < rules.min_part:
        starts.pop()
    ends = [*starts[1:], piece.size]
    return [
        Piece(piece.start + a, piece.start + b, piece.source_key, piece.source_start + a if piece.copied else 0)
        for a, b in zip(starts, ends, strict=True)
    ]
