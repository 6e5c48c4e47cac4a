"""plan_reuse and part_layout over generated archives, against the bytes themselves and a plain reference
(the example tests are in test_store_reuse.py)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from scrollcase.format.release import ArchiveFrame
from scrollcase.store.base import Piece
from scrollcase.store.reuse import EarlierArchive, PartRules, merge_sent, part_layout, plan_reuse

TAGS = st.sampled_from("abcdefgh")
SIZES = st.integers(1, 9)


def content(tag: str, size: int) -> bytes:
    return (tag * size).encode()  # a frame's bytes: its digest is theirs, so the same digest is the same bytes


def archive(frames: list[tuple[str, int]]) -> tuple[list[ArchiveFrame], bytes]:
    rows, data = [], b""
    for n, (tag, size) in enumerate(frames):
        body = content(tag, size)
        digest = hashlib.sha256(body).hexdigest()
        rows.append(ArchiveFrame(name=f"f{n}", offset=len(data), size=size, uncompressedSize=size, sha256=digest))
        data += body
    return rows, data


def reference_runs(new: list[ArchiveFrame], sources: list[list[ArchiveFrame]]) -> list[tuple[int, int, int, int]]:
    """(first new frame, length, source, first source frame): at each frame the longest run, the first found
    winning a tie, written as plainly as possible."""
    runs, i = [], 0
    while i < len(new):
        best = None
        for s, frames in enumerate(sources):
            for first in range(len(frames)):
                length = 0
                while (
                    i + length < len(new)
                    and first + length < len(frames)
                    and new[i + length].sha256 == frames[first + length].sha256
                ):
                    length += 1
                if length and (best is None or length > best[1]):
                    best = (i, length, s, first)
        if best is None:
            i += 1
            continue
        runs.append(best)
        i += best[1]
    return runs


def tiles(pieces: tuple[Piece, ...], size: int) -> bool:
    return pieces[0].start == 0 and pieces[-1].end == size and all(a.end == b.start for a, b in pairwise(pieces))


frame_lists = st.lists(st.tuples(TAGS, SIZES), min_size=1, max_size=10)


@settings(max_examples=300, deadline=None)
@given(new_spec=frame_lists, old_specs=st.lists(frame_lists, min_size=1, max_size=3))
def test_plan_reuse_copies_exactly_the_longest_runs_and_the_bytes_are_the_sources(
    new_spec: list[tuple[str, int]], old_specs: list[list[tuple[str, int]]]
) -> None:
    new, data = archive(new_spec)
    olds = [archive(spec) for spec in old_specs]
    earlier = [EarlierArchive(f"old{n}", f"old {n}", tuple(frames)) for n, (frames, _) in enumerate(olds)]
    pieces = plan_reuse(new, earlier)
    runs = reference_runs(new, [frames for frames, _ in olds])
    if not runs:
        assert pieces == ()
        return
    assert tiles(pieces, len(data))
    assert all(a.copied or b.copied for a, b in pairwise(pieces))  # neighbouring sends are one piece
    expected = [
        (new[i].offset, new[i + length - 1].offset + new[i + length - 1].size, f"old{s}", olds[s][0][first].offset)
        for i, length, s, first in runs
    ]
    assert [(p.start, p.end, p.source_key, p.source_start) for p in pieces if p.copied] == expected
    for p in pieces:
        if p.copied:
            source = olds[int(str(p.source_key)[3:])][1]
            assert source[p.source_start : p.source_start + p.size] == data[p.start : p.end]


@st.composite
def rules(draw: st.DrawFn) -> PartRules:
    """Parts at least ``min_part`` long, as every store's are (S3: 5 MiB, parts of 16 and 64 MiB)."""
    min_part = draw(st.integers(1, 12))
    return PartRules(
        min_part=min_part,
        send_part=draw(st.integers(min_part, 30)),
        copy_part=draw(st.integers(min_part, 30)),
        max_parts=draw(st.integers(1, 40)),
    )


spans = st.lists(st.tuples(st.booleans(), st.integers(1, 60)), min_size=1, max_size=10)


@settings(max_examples=400, deadline=None)
@given(spec=spans, rule=rules())
def test_part_layout_keeps_every_rule_and_every_copy_reads_its_own_bytes(
    spec: list[tuple[bool, int]], rule: PartRules
) -> None:
    pieces, offset = [], 0
    for copied, size in spec:
        pieces.append(Piece(offset, offset + size, "old", 3 * offset + 5) if copied else Piece(offset, offset + size))
        offset += size
    pieces = list(merge_sent(pieces))
    unbounded = part_layout(tuple(pieces), replace(rule, max_parts=10**9))
    parts = part_layout(tuple(pieces), rule)
    assert parts == (unbounded if len(unbounded) <= rule.max_parts else ())  # too many parts: sent whole
    if not unbounded:
        return
    assert tiles(unbounded, offset) and any(p.copied for p in unbounded)
    assert all(p.size >= rule.min_part for p in unbounded[:-1])
    for p in unbounded:  # a part is the rule's size, a short tail joined to it at most
        assert p.size < (rule.copy_part if p.copied else rule.send_part) + max(rule.min_part, 1) or p is unbounded[-1]
    copies = [q for q in pieces if q.copied]
    for p in unbounded:
        if p.copied:
            whole = next(q for q in copies if q.start <= p.start and p.end <= q.end)  # inside one copied piece
            assert p.source_start == whole.source_start + (p.start - whole.start)  # and reading its own bytes
    for q in copies:  # a copy long enough to stand as a part stands, unless a short send before it took its bytes
        if q.size >= 2 * rule.min_part and q is not pieces[0]:
            assert any(p.copied and q.start <= p.start and p.end <= q.end for p in unbounded)
