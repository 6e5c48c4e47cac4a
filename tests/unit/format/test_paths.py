"""Member-name and symlink rules (pure, no disk)."""

from __future__ import annotations

import pytest

from scrollcase.format import paths


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a", "a"),
        ("./a//b/", "a/b"),
        ("a/./b", "a/b"),
        ("venv/bin/python3.11", "venv/bin/python3.11"),
    ],
)
def test_normalise_member_accepts_relative_names(name: str, expected: str) -> None:
    assert paths.normalise_member(name) == expected


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("/etc/passwd", "absolute path"),
        ("../evil", "'..'"),
        ("a/../../evil", "'..'"),
        ("a/b/..", "'..'"),
        ("C:/Windows/evil", "drive letter"),
        ("c:evil", "drive letter"),
        ("./C:/Windows/evil", "drive letter"),  # the first real component counts, not the first characters
        ("a\\..\\evil", "backslash"),
        ("", "empty"),
        ("a\x00b", "NUL"),
        ("./", "root itself"),
    ],
)
def test_normalise_member_refuses_unsafe_names(name: str, rule: str) -> None:
    with pytest.raises(paths.UnsafePath) as info:
        paths.normalise_member(name)
    assert rule in info.value.rule


@pytest.mark.parametrize("target", ["/usr/lib/libc.so", "C:/x", "\\\\server\\share", "a\\b", ""])
def test_link_targets_must_be_relative_posix(target: str) -> None:
    with pytest.raises(paths.UnsafePath):
        paths.check_link_target(target)


def test_resolve_link_inside_and_through_other_links() -> None:
    links = {"lib/libz.so": "libz.so.1", "lib/libz.so.1": "libz.so.1.3", "bin/py": "../lib/../bin/python3"}
    assert paths.resolve_link("lib/libz.so", links) == "lib/libz.so.1.3"
    assert paths.resolve_link("bin/py", links) == "bin/python3"


def test_resolve_link_refuses_escape_even_if_it_comes_back() -> None:
    with pytest.raises(paths.UnsafePath, match="outside"):
        paths.resolve_link("a", {"a": "../root/a"})


def test_resolve_link_follows_archive_links_that_a_lexical_check_would_miss() -> None:
    # d/l1 -> ".." is the root; d/l2 -> "l1/../.." is lexically "." but really above the root.
    links = {"d/l1": "..", "d/l2": "l1/../.."}
    assert paths.resolve_link("d/l1", links) == ""
    with pytest.raises(paths.UnsafePath, match="outside"):
        paths.resolve_link("d/l2", links)
    assert paths.escaping_link(links) == ("d/l2", "symlink points outside the archive root")


def test_resolve_link_detects_loops() -> None:
    with pytest.raises(paths.UnsafePath, match="loop"):
        paths.resolve_link("a", {"a": "b", "b": "a"})


def test_escaping_link_none_for_safe_links() -> None:
    assert paths.escaping_link({"a/b": "../c", "c": "d/e"}) is None


def test_casefold_key_collides_like_windows() -> None:
    assert paths.casefold_key("Lib/Site-Packages/A.py") == paths.casefold_key("lib/site-packages/a.PY")


@pytest.mark.parametrize("name", ["aux.py", "lib/CON", "x/nul.txt", "com1", "a/b:c", "q?", "trail.", "sp "])
def test_windows_names_refused(name: str) -> None:
    with pytest.raises(paths.UnsafePath, match="Windows"):
        paths.check_windows_name(name)


@pytest.mark.parametrize(
    "name", ["auxiliary.py", "Lib/site-packages/con_fig.py", "console", "a.b.c", "COM10", "lpt10.txt"]
)
def test_windows_names_allowed(name: str) -> None:
    paths.check_windows_name(name)


def test_native_path_windows_and_posix_layouts() -> None:
    assert (
        paths.native_path("C:\\boxes\\.tmp\\", "venv/Lib/site-packages/x.py", "\\")
        == "C:\\boxes\\.tmp\\venv\\Lib\\site-packages\\x.py"
    )
    assert paths.native_path("/srv/.tmp/", "venv/bin/python", "/") == "/srv/.tmp/venv/bin/python"


@pytest.mark.parametrize(("platform", "expected"), [("win32", True), ("darwin", True), ("linux", False)])
def test_case_insensitive_default(platform: str, expected: bool) -> None:
    assert paths.case_insensitive_default(platform) is expected


def _chain(hops: int) -> dict[str, str]:
    """``l0 -> l1 -> ... -> l{hops}``: following ``l0`` to the end takes ``hops`` hops through links."""
    return {f"l{i}": f"l{i + 1}" for i in range(hops)} | {f"l{hops}": "end"}


def test_a_chain_of_exactly_40_hops_resolves_and_41_is_a_loop() -> None:
    """MAX_LINK_HOPS (40) hops through further links are followed; one more is refused as a loop."""
    assert paths.MAX_LINK_HOPS == 40
    assert paths.resolve_link("l0", _chain(40)) == "end"
    with pytest.raises(paths.UnsafePath, match="loop"):
        paths.resolve_link("l0", _chain(41))


@pytest.mark.parametrize("name", ["COM0", "com9", "LPT0", "lpt9.txt", "lib/Com5.dll"])
def test_every_com_and_lpt_port_name_is_reserved_on_windows(name: str) -> None:
    with pytest.raises(paths.UnsafePath, match="reserved device name"):
        paths.check_windows_name(name)


@pytest.mark.parametrize(("name", "parent"), [("venv", ""), ("a/b", "a"), ("venv/lib/libz.so", "venv/lib")])
def test_parent_of_a_top_level_name_is_the_root(name: str, parent: str) -> None:
    assert paths.parent_of(name) == parent


def test_a_top_level_link_resolves_from_the_root() -> None:
    assert paths.resolve_link("python3", {"python3": "venv/bin/python3.11"}) == "venv/bin/python3.11"


@pytest.mark.parametrize("part", ["-data", "+x", "#1", "!", ".-x", ",", "$x"])
def test_a_component_that_sorts_before_dotdot_is_an_ordinary_name(part: str) -> None:
    """Only ``..`` itself goes up: ``-data`` or ``.-x`` (which sort before it) are folder names."""
    assert paths.resolve_link("bin/x", {"bin/x": f"{part}/f"}) == f"bin/{part}/f"
