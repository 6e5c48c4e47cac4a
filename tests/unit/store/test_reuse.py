"""plan_reuse finds the runs of a new archive's frames that an earlier archive holds; part_layout shapes the
pieces into parts S3 accepts (pure)."""

from __future__ import annotations

import hashlib
from dataclasses import FrozenInstanceError
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollcase.format.release import ArchiveFrame
from scrollcase.store.base import Piece
from scrollcase.store.reuse import EarlierArchive, PartRules, copied_bytes, merge_sent, part_layout, plan_reuse

MIB = 1 << 20
RULES = PartRules(min_part=5 * MIB, send_part=16 * MIB, copy_part=64 * MIB, max_parts=10_000)


def table(*frames: tuple[str, int]) -> list[ArchiveFrame]:
    """A frame table of (content tag, size) rows, laid end to end; the tag stands for the frame's bytes."""
    rows, offset = [], 0
    for n, (tag, size) in enumerate(frames):
        digest = hashlib.sha256(f"{tag}:{size}".encode()).hexdigest()
        rows.append(ArchiveFrame(name=f"f{n}-{tag}", offset=offset, size=size, uncompressedSize=size, sha256=digest))
        offset += size
    return rows


def earlier(key: str, *frames: tuple[str, int]) -> EarlierArchive:
    return EarlierArchive(key, key, tuple(table(*frames)))


def covers(pieces: tuple[Piece, ...], size: int) -> bool:
    return (
        bool(pieces)
        and pieces[0].start == 0
        and pieces[-1].end == size
        and all(a.end == b.start for a, b in pairwise(pieces))
    )


def test_one_changed_package_is_sent_and_the_runs_around_it_are_copied() -> None:
    old = earlier("old", ("dirs", 10), ("box", 20), ("a", 100), ("b", 200), ("c", 300), ("end", 5))
    new = table(("dirs", 10), ("box2", 21), ("a", 100), ("b2", 250), ("c", 300), ("end", 5))
    pieces = plan_reuse(new, [old])
    assert pieces == (
        Piece(0, 10, "old", 0),
        Piece(10, 31),
        Piece(31, 131, "old", 30),
        Piece(131, 381),
        Piece(381, 686, "old", 330),  # c and end: one run, at their offsets in the old archive
    )
    assert covers(pieces, 686) and copied_bytes(pieces) == 10 + 100 + 305


def test_nothing_to_reuse_is_an_empty_plan() -> None:
    new = table(("a", 100), ("b", 200))
    assert plan_reuse(new, []) == ()
    assert plan_reuse(new, [earlier("old", ("x", 100), ("y", 200))]) == ()
    assert plan_reuse([], [earlier("old", ("a", 100))]) == ()


def test_same_digest_of_another_size_is_not_the_same_frame() -> None:
    new = table(("a", 100))
    other = EarlierArchive("old", "old", (table(("a", 100))[0].model_copy(update={"size": 99}),))
    assert plan_reuse(new, [other]) == ()


def test_the_longest_run_wins_and_the_first_source_wins_a_tie() -> None:
    new = table(("a", 10), ("b", 10), ("c", 10))
    short = earlier("short", ("a", 10), ("x", 10))
    long = earlier("long", ("a", 10), ("b", 10), ("c", 10))
    assert plan_reuse(new, [short, long]) == (Piece(0, 30, "long", 0),)
    twin = earlier("twin", ("a", 10), ("b", 10), ("c", 10))
    assert plan_reuse(new, [long, twin]) == (Piece(0, 30, "long", 0),)


def test_runs_may_come_from_different_sources_and_reordered_frames() -> None:
    new = table(("a", 10), ("b", 10), ("c", 10))
    first = earlier("one", ("b", 10), ("a", 10))
    second = earlier("two", ("z", 7), ("b", 10), ("c", 10))
    assert plan_reuse(new, [first, second]) == (Piece(0, 10, "one", 10), Piece(10, 30, "two", 7))


def test_a_frame_of_the_same_digest_but_another_size_ends_a_run() -> None:
    new = table(("a", 10), ("b", 10))
    for size in (9, 11):  # shorter and longer: neither is the same frame
        old_b = table(("x", 10), ("b", 10))[1].model_copy(update={"size": size})
        old = EarlierArchive("old", "old", (table(("a", 10))[0], old_b))
        assert plan_reuse(new, [old]) == (Piece(0, 10, "old", 0), Piece(10, 20))


def test_a_run_over_hundreds_of_frames_read_from_a_manifest_is_found_to_either_table_s_end() -> None:
    # counts and sizes past CPython's small-int cache, the earlier table parsed from JSON as a manifest's is:
    # frames match by value, and a run stops at the end of the new table or of the earlier one
    rows = [(f"p{n}", 1000 + n) for n in range(300)]
    end = sum(size for _, size in rows)

    def from_manifest(*frames: tuple[str, int]) -> EarlierArchive:
        parsed = tuple(ArchiveFrame.model_validate_json(frame.model_dump_json()) for frame in table(*frames))
        return EarlierArchive("old", "old", parsed)

    longer = table(*rows, ("changed", 1000))
    assert plan_reuse(longer, [from_manifest(*rows)]) == (Piece(0, end, "old", 0), Piece(end, end + 1000))
    assert plan_reuse(table(*rows), [from_manifest(*rows, ("later", 1000))]) == (Piece(0, end, "old", 0),)


def test_merge_sent_joins_neighbouring_sends_only() -> None:
    pieces = [Piece(0, 5), Piece(5, 9), Piece(9, 20, "k", 0), Piece(20, 30)]
    assert merge_sent(pieces) == (Piece(0, 9), Piece(9, 20, "k", 0), Piece(20, 30))


def test_runs_too_small_for_a_part_are_sent() -> None:
    pieces = (Piece(0, 2 * MIB, "old", 0), Piece(2 * MIB, 3 * MIB), Piece(3 * MIB, 4 * MIB, "old", 3 * MIB))
    assert part_layout(pieces, RULES) == ()  # no copy can stand: sent whole, as without reuse


def test_a_short_send_takes_the_bytes_it_lacks_from_the_copy_after_it() -> None:
    size = 40 * MIB
    pieces = (Piece(0, MIB), Piece(MIB, size, "old", 3 * MIB))
    parts = part_layout(pieces, RULES)
    assert parts[0] == Piece(0, 5 * MIB)
    assert parts[1].copied and parts[1].start == 5 * MIB and parts[1].source_start == 7 * MIB
    assert covers(parts, size) and copied_bytes(parts) == 35 * MIB


def test_a_copy_that_would_be_left_too_short_is_sent_with_its_neighbours() -> None:
    pieces = (Piece(0, MIB), Piece(MIB, 7 * MIB, "old", MIB), Piece(7 * MIB, 8 * MIB), Piece(8 * MIB, 30 * MIB, "o", 0))
    parts = part_layout(pieces, RULES)
    assert parts[0] == Piece(0, 8 * MIB)  # the 6 MiB copy, less 4 MiB, would leave 2 MiB: sent whole
    assert all(p.copied for p in parts[1:]) and covers(parts, 30 * MIB)


def test_the_last_part_may_be_short_even_a_copy() -> None:
    pieces = (Piece(0, 6 * MIB), Piece(6 * MIB, 7 * MIB, "old", 0))
    assert part_layout(pieces, RULES) == pieces


def test_a_copy_of_exactly_the_least_part_size_stands_as_a_part() -> None:
    pieces = (Piece(0, 6 * MIB), Piece(6 * MIB, 11 * MIB, "old", 0), Piece(11 * MIB, 17 * MIB))
    assert part_layout(pieces, RULES) == pieces


def test_a_short_send_takes_its_bytes_from_the_last_copy_and_leaves_it_the_rest() -> None:
    for rest in (MIB, 1):  # a copied byte is a part too
        pieces = (Piece(0, 2 * MIB), Piece(2 * MIB, 5 * MIB + rest, "old", 0))
        assert part_layout(pieces, RULES) == (Piece(0, 5 * MIB), Piece(5 * MIB, 5 * MIB + rest, "old", 3 * MIB))


def test_a_last_copy_the_short_send_needs_whole_is_sent_with_it() -> None:
    assert part_layout((Piece(0, 2 * MIB), Piece(2 * MIB, 5 * MIB, "old", 0)), RULES) == ()  # no empty copy left


def test_a_copy_left_exactly_the_least_part_size_stays_a_copy() -> None:
    pieces = (
        Piece(0, MIB),
        Piece(MIB, 10 * MIB, "old", 0),
        Piece(10 * MIB, 20 * MIB),
        Piece(20 * MIB, 40 * MIB, "o", 0),
    )
    assert part_layout(pieces, RULES) == (
        Piece(0, 5 * MIB),
        Piece(5 * MIB, 10 * MIB, "old", 4 * MIB),
        Piece(10 * MIB, 20 * MIB),
        Piece(20 * MIB, 40 * MIB, "o", 0),
    )


def test_the_rules_and_an_earlier_archive_cannot_change() -> None:
    with pytest.raises(FrozenInstanceError):
        RULES.min_part = 1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        earlier("old", ("a", 10)).key = "other"  # type: ignore[misc]


def test_the_last_part_may_be_a_short_copy_however_many_parts_come_before_it() -> None:
    rules = PartRules(min_part=2, send_part=2, copy_part=2, max_parts=10_000)
    pieces = (*(Piece(n, n + 2, "old", n) for n in range(0, 600, 2)), Piece(600, 601, "old", 600))
    assert part_layout(pieces, rules) == pieces


def test_long_pieces_are_cut_and_a_short_tail_joins_the_part_before() -> None:
    pieces = (Piece(0, 33 * MIB), Piece(33 * MIB, 33 * MIB + 130 * MIB, "old", 0))
    parts = part_layout(pieces, RULES)
    assert [p.size // MIB for p in parts] == [16, 17, 64, 66]
    assert [p.source_start // MIB for p in parts if p.copied] == [0, 64]


def test_more_parts_than_allowed_fall_back_to_sending_whole() -> None:
    rules = PartRules(min_part=1, send_part=1, copy_part=1, max_parts=3)
    assert part_layout((Piece(0, 2), Piece(2, 4, "old", 0)), rules) == ()


sizes = st.lists(st.tuples(st.booleans(), st.integers(1, 40 * MIB)), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(sizes)
def test_parts_obey_s3_rules_and_keep_every_copy_aligned(spec: list[tuple[bool, int]]) -> None:
    pieces, offset = [], 0
    for copied, size in spec:
        pieces.append(Piece(offset, offset + size, "old", offset + 7) if copied else Piece(offset, offset + size))
        offset += size
    parts = part_layout(tuple(merge_sent(pieces)), RULES)
    if not parts:
        return
    assert covers(parts, offset)
    assert all(p.size >= RULES.min_part for p in parts[:-1])
    assert all(p.source_start == p.start + 7 for p in parts if p.copied)  # each copy still reads its own bytes
    copied_in = {(p.start, p.end) for p in pieces if p.copied}
    assert all(any(a <= p.start and p.end <= b for a, b in copied_in) for p in parts if p.copied)
