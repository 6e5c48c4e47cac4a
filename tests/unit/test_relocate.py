"""Prefix rewriting rules (pure) and scanning/relocating a small tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.box import relocate
from scrollcase.box.relocate import (
    BOX_PREFIX_PLACEHOLDER,
    PaddingError,
    PrefixFile,
    RelocationInfo,
    replace_binary,
    replace_text,
    scan_prefix_files,
)
from scrollcase.errors import BuildError, IntegrityError

P = BOX_PREFIX_PLACEHOLDER.encode()


def test_placeholder_is_long_and_fixed() -> None:
    assert 190 <= len(BOX_PREFIX_PLACEHOLDER) <= 255
    assert BOX_PREFIX_PLACEHOLDER.startswith("/opt/scrollcase/")
    assert " " not in BOX_PREFIX_PLACEHOLDER


def test_text_plain_replace() -> None:
    data = b"prefix=" + P + b"\nlibdir=" + P + b"/lib\n"
    assert replace_text(data, P, b"/srv/box") == b"prefix=/srv/box\nlibdir=/srv/box/lib\n"


def test_short_shebang_is_kept() -> None:
    data = b"#!" + P + b"/venv/bin/python3.11 -E\nimport sys\n"
    assert replace_text(data, P, b"/srv/box") == b"#!/srv/box/venv/bin/python3.11 -E\nimport sys\n"


def test_long_python_shebang_becomes_sh_trampoline() -> None:
    long_prefix = b"/home/user/" + b"deep/" * 30
    out = replace_text(b"#!" + P + b"/bin/python3.11\nprint('hi')\n", P, long_prefix)
    lines = out.split(b"\n")
    assert lines[0] == b"#!/bin/sh"
    assert lines[1] == b"'''exec' \"" + long_prefix + b'/bin/python3.11" "$0" "$@"'
    assert lines[2] == b"' '''"
    assert lines[3] == b"print('hi')"


def test_python_shebang_with_space_and_options() -> None:
    out = replace_text(b"#!" + P + b"/bin/python -s\nx\n", P, b"/Users/me/My Boxes/b")
    assert out.startswith(b"#!/bin/sh\n'''exec' \"/Users/me/My Boxes/b/bin/python\" -s \"$0\" \"$@\"\n' '''\nx")


def test_shell_special_characters_are_escaped_in_the_trampoline() -> None:
    out = replace_text(b"#!" + P + b"/bin/python\n", P, b'/srv/a $b"c')
    assert b'"/srv/a \\$b\\"c/bin/python"' in out


def test_long_non_python_shebang_uses_env() -> None:
    out = replace_text(b"#!" + P + b"/bin/bash -e\necho hi\n", P, b"/x y")
    assert out == b"#!/usr/bin/env bash -e\necho hi\n"


def test_shebang_without_placeholder_untouched() -> None:
    data = b"#!/usr/bin/env python\nprefix = '" + P + b"'\n"
    assert replace_text(data, P, b"/srv") == b"#!/usr/bin/env python\nprefix = '/srv'\n"


def test_binary_c_string_rule_keeps_length() -> None:
    data = b"\x7fELF\x00" + P + b"/lib:" + P + b"/lib64\x00tail" + P + b"\x00end"
    out = replace_binary(data, P, b"/srv/b")
    assert len(out) == len(data)
    pad = len(P) - len(b"/srv/b")
    assert (
        out
        == b"\x7fELF\x00/srv/b/lib:/srv/b/lib64" + b"\x00" * (2 * pad) + b"\x00tail/srv/b" + b"\x00" * pad + b"\x00end"
    )


def test_binary_new_prefix_longer_than_placeholder() -> None:
    with pytest.raises(PaddingError):
        replace_binary(b"x" + P + b"\x00", P, P + b"/more")


def test_relocate_refuses_too_long_prefix_with_binary_files(tmp_path: Path) -> None:
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path="lib", mode="binary")])
    (tmp_path / "lib").write_bytes(P + b"\x00")
    with pytest.raises(BuildError, match="shorter path"):
        relocate.relocate(tmp_path, info, "/x" * 200)


def test_relocation_info_is_strict() -> None:
    with pytest.raises(ValueError, match="mode"):
        PrefixFile.model_validate({"path": "a", "mode": "weird"})
    with pytest.raises(ValueError, match="extra"):
        RelocationInfo.model_validate({"placeholder": "p", "files": [], "x": 1})
    assert relocate.read_relocation(b'{"boxId": "b"}') is None
    with pytest.raises(IntegrityError, match="relocation"):
        relocate.read_relocation(b'{"relocation": {"placeholder": 3}}')


def _env(root: Path) -> Path:
    env = root / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "lib").mkdir()
    (env / "conda-meta").mkdir()
    (env / "bin" / "tool").write_bytes(b"#!" + P + b"/venv/bin/python\nimport tool\n")
    (env / "lib" / "libx.so").write_bytes(b"\x7fELF\x00\x00" + P + b"/venv/lib\x00")
    (env / "lib" / "declared.txt").write_bytes(b"no NUL but declared binary " + P + b"\n")
    (env / "lib" / "plain.txt").write_bytes(b"nothing to see\x00")
    (env / "bin" / "link").symlink_to("tool")
    record = {
        "name": "x",
        "paths_data": {
            "paths_version": 1,
            "paths": [
                {
                    "_path": "lib/declared.txt",
                    "path_type": "hardlink",
                    "prefix_placeholder": "/opt/anaconda1",
                    "file_mode": "binary",
                },
                {
                    "_path": "bin/tool",
                    "path_type": "hardlink",
                    "prefix_placeholder": "/opt/anaconda1",
                    "file_mode": "text",
                },
                {"_path": "lib/plain.txt", "path_type": "hardlink"},
            ],
        },
    }
    (env / "conda-meta" / "x-1-0.json").write_text(json.dumps(record))
    (root / "box.json").write_text("{}")
    return root


def test_scan_uses_conda_meta_and_bytes(tmp_path: Path) -> None:
    root = _env(tmp_path / "box")
    found = scan_prefix_files(root, BOX_PREFIX_PLACEHOLDER)
    assert found == [
        PrefixFile(path="venv/bin/tool", mode="text"),
        PrefixFile(path="venv/lib/declared.txt", mode="binary"),
        PrefixFile(path="venv/lib/libx.so", mode="binary"),
    ]


def test_scan_finds_prefix_across_read_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relocate, "_SCAN_CHUNK", 64)
    (tmp_path / "f").write_bytes(b"a" * 100 + P + b"b" * 100)
    assert scan_prefix_files(tmp_path, BOX_PREFIX_PLACEHOLDER) == [PrefixFile(path="f", mode="text")]


def test_relocate_tree_and_keep_modes(tmp_path: Path) -> None:
    root = _env(tmp_path / "box")
    (root / "venv" / "bin" / "tool").chmod(0o755)
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(root, BOX_PREFIX_PLACEHOLDER))
    before = (root / "venv" / "lib" / "declared.txt").read_bytes()
    # declared binary by conda-meta: conda's C-string rule only rewrites NUL-terminated strings
    assert relocate.relocate(root, info, "/srv/b") == 2
    assert (root / "venv" / "lib" / "declared.txt").read_bytes() == before
    assert (root / "venv" / "bin" / "tool").read_bytes() == b"#!/srv/b/venv/bin/python\nimport tool\n"
    assert (root / "venv" / "bin" / "tool").stat().st_mode & 0o777 == 0o755
    lib = (root / "venv" / "lib" / "libx.so").read_bytes()
    assert lib.startswith(b"\x7fELF\x00\x00/srv/b/venv/lib\x00\x00") and len(lib) == 6 + len(P) + 10
    assert not list(root.rglob(".*.reloc"))


@pytest.mark.parametrize("bad", ["../outside", "/etc/passwd", "venv/bin/link", "venv/missing"])
def test_relocate_refuses_files_outside_or_not_regular(tmp_path: Path, bad: str) -> None:
    root = _env(tmp_path / "box")
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path=bad, mode="text")])
    with pytest.raises(IntegrityError, match="relocation"):
        relocate.relocate(root, info, "/srv")
