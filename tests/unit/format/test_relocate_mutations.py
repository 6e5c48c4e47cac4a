"""Relocation promises that survived deliberate bugs (issue 19): containment of every rewritten file
inside the box, and the 127-byte shebang limit (scrollcase/format/relocate.py module docstring)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scrollcase.errors import IntegrityError
from scrollcase.format.relocate import MAX_SHEBANG, PrefixFile, RelocationInfo, fix_shebang, relocate

PLACEHOLDER = "/opt/scrollcase/" + "_placehold" * 4


@pytest.mark.skipif(os.name == "nt", reason="directory symlinks need privileges on Windows")
def test_relocation_refuses_a_file_reached_through_a_symlinked_directory(tmp_path: Path) -> None:
    """The second line of defence behind the unpacker's link rules: box.json naming ``lib/config.txt``
    where ``lib`` is a link to a directory outside the box must not rewrite the outside file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "config.txt"
    victim.write_text(f"prefix={PLACEHOLDER}\n")
    box = tmp_path / "box"
    box.mkdir()
    (box / "lib").symlink_to(outside, target_is_directory=True)
    info = RelocationInfo(placeholder=PLACEHOLDER, files=[PrefixFile(path="lib/config.txt", mode="text")])
    with pytest.raises(IntegrityError, match="not a regular file inside the box"):
        relocate(box, info, "/srv/box")
    assert victim.read_text() == f"prefix={PLACEHOLDER}\n"


def _python_shebang_of_length(length: int) -> tuple[bytes, bytes, bytes, bytes]:
    """(old_line, new_line, placeholder, new_prefix) where new_line is exactly ``length`` bytes."""
    placeholder = PLACEHOLDER.encode()
    tail = b"/venv/bin/python3"
    new_prefix = b"/" + b"d" * (length - len(b"#!") - len(tail) - 1)
    old_line, new_line = b"#!" + placeholder + tail, b"#!" + new_prefix + tail
    assert len(new_line) == length
    return old_line, new_line, placeholder, new_prefix


def test_shebang_of_exactly_127_bytes_is_kept() -> None:
    assert MAX_SHEBANG == 127
    old_line, new_line, placeholder, new_prefix = _python_shebang_of_length(127)
    assert fix_shebang(old_line, new_line, placeholder, new_prefix) == new_line


def test_shebang_of_128_bytes_becomes_the_sh_trampoline() -> None:
    """ "A shebang that becomes longer than 127 bytes ... is replaced by the #!/bin/sh + '''exec
    trampoline" (the kernel would truncate it)."""
    old_line, new_line, placeholder, new_prefix = _python_shebang_of_length(128)
    fixed = fix_shebang(old_line, new_line, placeholder, new_prefix)
    interpreter = new_prefix + b"/venv/bin/python3"
    assert fixed == b"#!/bin/sh\n'''exec' " + interpreter + b' "$0" "$@"\n' + b"' '''"  # plain words: unquoted
