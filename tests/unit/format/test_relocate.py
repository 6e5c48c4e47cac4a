"""Prefix rewriting rules (pure) and scanning/relocating a small tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format import relocate
from scrollcase.format.relocate import (
    BOX_PREFIX_PLACEHOLDER,
    PaddingError,
    PrefixFile,
    RelocationInfo,
    replace_binary,
    replace_text,
    scan_prefix_files,
)

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
    assert lines[1] == b"'''exec' " + long_prefix + b'/bin/python3.11 "$0" "$@"'
    assert lines[2] == b"' '''"
    assert lines[3] == b"print('hi')"


def test_python_shebang_with_space_and_options() -> None:
    out = replace_text(b"#!" + P + b"/bin/python -s\nx\n", P, b"/Users/me/My Boxes/b")
    assert out.startswith(b"#!/bin/sh\n'''exec' '/Users/me/My Boxes/b/bin/python' -s \"$0\" \"$@\"\n' '''\nx")


def test_shell_special_characters_are_escaped_in_the_trampoline() -> None:
    out = replace_text(b"#!" + P + b"/bin/python\n", P, b'/srv/a $b"c')
    assert b"'''exec' '/srv/a $b\"c/bin/python' \"$0\"" in out  # single quotes: nothing expands


def test_long_non_python_shebang_uses_env() -> None:
    out = replace_text(b"#!" + P + b"/bin/bash -e\necho hi\n", P, b"/x y")
    assert out == b"#!/usr/bin/env -S bash -e\necho hi\n"  # -S: Linux passes "bash -e" as one word


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


def test_files_known_clean_are_not_read(tmp_path: Path) -> None:
    root = _env(tmp_path / "box")
    found = scan_prefix_files(root, BOX_PREFIX_PLACEHOLDER, clean={"venv/bin/tool"})
    assert [f.path for f in found] == ["venv/lib/declared.txt", "venv/lib/libx.so"]  # the caller vouched for it


def test_scan_finds_prefix_across_read_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relocate, "_SCAN_CHUNK", 64)
    (tmp_path / "f").write_bytes(b"a" * 100 + P + b"b" * 100)
    assert scan_prefix_files(tmp_path, BOX_PREFIX_PLACEHOLDER) == [PrefixFile(path="f", mode="text")]


def test_relocate_tree_and_keep_modes(tmp_path: Path) -> None:
    root = _env(tmp_path / "box")
    (root / "venv" / "bin" / "tool").chmod(0o755)
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=scan_prefix_files(root, BOX_PREFIX_PLACEHOLDER))
    before = (root / "venv" / "lib" / "declared.txt").read_bytes()
    # declared binary by conda-meta, without a NUL: its C string runs to the end of the file
    assert relocate.relocate(root, info, "/srv/b") == 3
    declared = (root / "venv" / "lib" / "declared.txt").read_bytes()
    assert declared == b"no NUL but declared binary /srv/b\n" + b"\x00" * (len(P) - 6) and len(declared) == len(before)
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


# ---------------------------------------------------------------- exactness (issue #17)

HOSTILE = "a b\"c$HOME`touch bq`d\\e'f$(touch dollar)'''g"  # every character sh or Python could act on


def test_placeholder_in_shebang_arguments_is_replaced_in_the_trampoline() -> None:
    data = b"#!" + P + b"/venv/bin/python -X pycache_prefix=" + P + b"/cache\nprint(1)\n"
    out = replace_text(data, P, b"/x y/b")
    assert P not in out
    assert out.split(b"\n")[1] == b"'''exec' '/x y/b/venv/bin/python' -X 'pycache_prefix=/x y/b/cache' \"$0\" \"$@\""


def test_env_shebang_with_placeholder_arguments_stays_one_env() -> None:
    out = replace_text(b"#!/usr/bin/env bash --init-file " + P + b"/rc\necho\n", P, b"/x y/b")
    assert out == b"#!/usr/bin/env -S bash --init-file '/x y/b/rc'\necho\n"
    short = replace_text(b"#!/usr/bin/env bash --init-file " + P + b"/rc\necho\n", P, b"/b")
    assert short == b"#!/usr/bin/env bash --init-file /b/rc\necho\n"  # fits: the plain replacement


def test_env_running_python_gets_the_trampoline() -> None:
    out = replace_text(b"#!/usr/bin/env -i python3 -X pycache_prefix=" + P + b"\nx\n", P, b"/x y")
    assert out.split(b"\n")[1] == b"'''exec' /usr/bin/env -i python3 -X 'pycache_prefix=/x y' \"$0\" \"$@\""


def test_crlf_shebang_keeps_its_line_end_and_no_cr_argument() -> None:
    out = replace_text(b"#!" + P + b"/bin/python -s\r\nx = 1\r\n", P, b"/x y")
    assert out == b"#!/bin/sh\n'''exec' '/x y/bin/python' -s \"$0\" \"$@\"\n' '''\r\nx = 1\r\n"
    assert replace_text(b"#!" + P + b"/python\r\n", P, b"/b") == b"#!/b/python\r\n"


def test_sh_quote_leaves_no_triple_quote_and_no_lone_backslash() -> None:
    quoted = relocate.sh_quote(HOSTILE.encode())
    assert b"'''" not in quoted
    assert b"\\" not in quoted.replace(b"\\\\", b"")


@pytest.mark.parametrize("end", [b"", b"\n", b"tail"])
def test_binary_placeholder_at_the_end_of_the_file_is_relocated(end: bytes) -> None:
    data = b"\x7fELF\x00" + P + b"/lib" + end
    out = replace_binary(data, P, b"/srv/b")
    assert P not in out and len(out) == len(data)
    assert out == b"\x7fELF\x00/srv/b/lib" + end + b"\x00" * (len(P) - 6)


def test_relocate_refuses_a_line_break_in_the_prefix(tmp_path: Path) -> None:
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path="t", mode="text")])
    (tmp_path / "t").write_bytes(P)
    with pytest.raises(BuildError, match="line break"):
        relocate.relocate(tmp_path, info, "/srv/a\nb")


def _hostile_box(tmp_path: Path, shebang: bytes, body: bytes) -> tuple[Path, Path]:
    """A box at a DEST full of shell metacharacters whose bin/python is this test's interpreter."""
    dest = tmp_path / HOSTILE
    (dest / "bin").mkdir(parents=True)
    (dest / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    script = dest / "bin" / "tool"
    script.write_bytes(replace_text(shebang + b"\n" + body, P, str(dest).encode()))
    script.chmod(0o755)
    return dest, script


REPORT = b"import json, sys\nprint(json.dumps([sys.executable, sys.argv[1:], sys.flags.no_site, sys._xoptions]))\n"


@pytest.mark.skipif(sys.platform == "win32", reason="shebangs are a POSIX feature")
@pytest.mark.parametrize("via_sh", [True, False], ids=["sh-script", "exec"])
def test_trampoline_runs_the_box_python_and_nothing_else(tmp_path: Path, via_sh: bool) -> None:
    dest, script = _hostile_box(tmp_path, b"#!" + P + b"/bin/python -S -X cache=" + P + b"/c", REPORT)
    work = tmp_path / "cwd"
    work.mkdir()
    argv = ["/bin/sh", str(script)] if via_sh else [str(script)]
    done = subprocess.run([*argv, "x y", "$HOME", "`id`"], cwd=work, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""  # no SyntaxWarning from the trampoline's escapes either
    exe, args, no_site, xoptions = json.loads(done.stdout)
    assert exe == str(dest / "bin" / "python")
    assert args == ["x y", "$HOME", "`id`"]
    assert no_site == 1 and xoptions == {"cache": f"{dest}/c"}
    assert sorted(p.name for p in work.iterdir()) == [] and not (tmp_path / "dollar").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="shebangs are a POSIX feature")
def test_env_shebang_passes_the_prefix_as_one_argument(tmp_path: Path) -> None:
    _, script = _hostile_box(tmp_path, b"#!/usr/bin/env printf [%s] " + P + b"/rc", b"")
    work = tmp_path / "cwd"
    work.mkdir()
    done = subprocess.run([str(script)], cwd=work, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"[{tmp_path / HOSTILE}/rc][{script}]".encode()
    assert list(work.iterdir()) == []


def test_the_dest_length_check_an_installer_makes_before_downloading() -> None:
    relocate.check_dest_length("/x" * 200, None)  # no binary file: any length
    relocate.check_dest_length("/" + "ü" * 97 + "x", 196)  # 196 bytes in UTF-8
    with pytest.raises(BuildError, match="197 bytes, longer than the 196-byte") as caught:
        relocate.check_dest_length("/" + "ü" * 98, 196, nothing_done="; nothing was downloaded")
    assert "nothing was downloaded" in caught.value.message and caught.value.exit_code == 5
    assert caught.value.fix == "unpack into a shorter path (at most 196 bytes)"


def test_scan_finds_the_prefix_at_every_split_across_a_chunk_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlap between reads is exactly one byte shorter than the prefix: no split point is missed."""
    monkeypatch.setattr(relocate, "_SCAN_CHUNK", 64)
    for offset in range(64):
        (tmp_path / "f").write_bytes(b"a" * offset + P + b"b" * 64)
        assert scan_prefix_files(tmp_path, BOX_PREFIX_PLACEHOLDER) == [PrefixFile(path="f", mode="text")], offset


def test_a_conda_meta_record_that_is_not_json_leaves_the_byte_scan_to_find_its_files(tmp_path: Path) -> None:
    root = _env(tmp_path / "box")
    (root / "venv" / "conda-meta" / "broken-1-0.json").write_text('{"paths_data": ')
    (root / "venv" / "conda-meta" / "list-1-0.json").write_text("[1, 2]")  # JSON, but not a record
    found = scan_prefix_files(root, BOX_PREFIX_PLACEHOLDER)
    assert PrefixFile(path="venv/lib/libx.so", mode="binary") in found
    assert PrefixFile(path="venv/lib/declared.txt", mode="binary") in found


def test_a_prefix_exactly_as_long_as_the_placeholder_fits_binary_files() -> None:
    same = b"/" + b"s" * (len(P) - 1)
    assert replace_binary(b"x" + P + b"/lib\x00", P, same) == b"x" + same + b"/lib\x00"


def test_padding_error_says_how_many_bytes_too_long() -> None:
    with pytest.raises(PaddingError) as caught:
        replace_binary(b"x" + P + b"\x00", P, P + b"/more")
    assert caught.value.args == (5,)
