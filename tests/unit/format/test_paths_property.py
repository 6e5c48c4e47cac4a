"""Property tests of the archive path rules (issue #19): generated member names and symlink trees
against the safety rules of format/paths.py, with the real filesystem's ``realpath`` as the oracle for
where a symlink leads."""

from __future__ import annotations

import os
import posixpath
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollcase.format import paths

# components that are ordinary, special to POSIX, or special to Windows
PIECES = st.sampled_from(["a", "b", "lib", ".", "..", "", "c:", "C:x", "x\\y", "n\x00ul", " ", "a.b"])
NAMES = st.lists(PIECES, min_size=1, max_size=6).map("/".join)

# A small symlink namespace: no link name is the parent folder of another, so the tree can be
# made on disk; targets walk up, down and through other links.
LINK_NAMES = ["a", "b", "d/x", "d/y", "e/f/g"]
TARGET_PARTS = st.sampled_from(["..", ".", "a", "b", "d", "x", "y", "e", "f", "g", "z", "-z", ".-"])
TARGETS = st.lists(TARGET_PARTS, min_size=1, max_size=5).map("/".join)
LINK_TREES = st.dictionaries(st.sampled_from(LINK_NAMES), TARGETS, min_size=1, max_size=len(LINK_NAMES))


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_an_accepted_member_name_is_canonical_and_stays_inside_the_root(name: str) -> None:
    try:
        normal = paths.normalise_member(name)
    except paths.UnsafePath:
        return
    parts = normal.split("/")
    assert all(part not in ("", ".", "..") for part in parts)
    assert "\\" not in normal and "\x00" not in normal and not normal.startswith("/")
    assert paths.normalise_member(normal) == normal  # canonical: normalising again changes nothing
    assert normal == posixpath.normpath(name)  # the same file a POSIX system would name
    assert posixpath.normpath(posixpath.join("/root", normal)).startswith("/root/")


def _drive(component: str) -> bool:
    """``C:`` or ``c:x``: a drive (relative or not) on Windows."""
    return len(component) >= 2 and component[0].isascii() and component[0].isalpha() and component[1] == ":"


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_a_name_is_refused_exactly_when_it_breaks_a_rule(name: str) -> None:
    components = [p for p in name.split("/") if p not in ("", ".")]
    breaks = (
        "\x00" in name
        or "\\" in name
        or name.startswith("/")
        or not components
        or _drive(components[0])
        or ".." in components
    )
    try:
        paths.normalise_member(name)
    except paths.UnsafePath:
        assert breaks
    else:
        assert not breaks


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["/", "\\", "C:", "z:", "\\\\srv\\"]), st.text(alphabet="ab/.\\:", max_size=8))
def test_a_link_target_absolute_on_any_platform_is_refused(start: str, rest: str) -> None:
    with pytest.raises(paths.UnsafePath):
        paths.check_link_target(start + rest)


@settings(max_examples=200, deadline=None)
@given(TARGETS)
def test_a_relative_posix_link_target_is_accepted(target: str) -> None:
    paths.check_link_target(target)


def _on_disk(links: dict[str, str], top: Path) -> Path:
    root = top / "root"
    for link, target in links.items():
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(target)
    return root


@pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")
@settings(max_examples=150, deadline=None)
@given(LINK_TREES)
def test_a_link_resolves_where_the_filesystem_resolves_it_or_is_refused_when_that_leaves_the_root(
    links: dict[str, str],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = _on_disk(links, Path(tmp))
        real_root = os.path.realpath(root)
        for link in links:
            real = os.path.realpath(root / link)
            try:
                resolved = paths.resolve_link(link, links)
            except paths.UnsafePath:
                continue  # refusing is always safe; leaving the root must never be accepted
            assert real == os.path.realpath(root / resolved) if resolved else real == real_root
            assert os.path.commonpath([real_root, real]) == real_root


@settings(max_examples=150, deadline=None)
@given(LINK_TREES)
def test_escaping_link_names_the_first_link_that_does_not_resolve(links: dict[str, str]) -> None:
    refused = []
    for link in sorted(links):
        try:
            paths.resolve_link(link, links)
        except paths.UnsafePath as exc:
            refused.append((link, exc.rule))
    assert paths.escaping_link(links) == (refused[0] if refused else None)
