"""Prefix relocation: boxes are built under a fixed placeholder prefix and rewritten on unpack.

The placeholder stands for the *box root*: the build installs the environment ``venv/`` as if it lived
at ``BOX_PREFIX_PLACEHOLDER + "/venv"`` (py-rattler's ``alternative_target_prefix``), so the packed
tree never names the build directory and unpacking replaces the placeholder with DEST.  At build time
:func:`scan_prefix_files` lists every file that embeds the placeholder; the list is stored in
``box.json`` under ``"relocation"``; at unpack time :func:`relocate` rewrites those files for the
box's real location.

Rewriting rules are conda's, made exact (docs/archive.md#relocation has them byte for byte):

* text files: plain replacement of every occurrence.  A shebang line (the first line, from ``#!``
  to the ``\n``, a CR included) that becomes longer than 127 bytes or whose new prefix holds a blank
  no longer works (the kernel truncates it / splits it).  Its words (interpreter and arguments, split
  on blanks *before* the prefix is put in, each with the prefix replaced) are then run by the
  ``#!/bin/sh`` + ``'''exec'`` trampoline for a Python interpreter (``python*``, or ``env`` running
  ``python*``), every word sh-quoted, or by ``#!/usr/bin/env [-S] NAME ARGS...`` for any other one.
* binary files: the placeholder is replaced inside each C string (up to the next NUL or the end of
  the file) and the string is padded with NULs, so every offset in the file stays the same.  That
  only works when the new prefix is not longer than the placeholder, which is why the placeholder is
  long (~200 characters).

Windows: the placeholder is matched in its forward-slash form only; a backslash form (as Windows
tools may write it) is not rewritten.  Windows boxes need no shebang handling.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from scrollcase.errors import BuildError, IntegrityError
from scrollcase.format import paths
from scrollcase.io.documents import MAX_BOX_JSON_BYTES, load_json
from scrollcase.io.files import write_atomic

BOX_PREFIX_PLACEHOLDER = "/opt/scrollcase/" + "_placehold" * 18  # 196 characters
MAX_SHEBANG = 127  # Linux's BINPRM_BUF_SIZE - 1 before 5.1; still what portable scripts must assume
_SCAN_CHUNK = 4 << 20


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PrefixFile(_Model):
    path: str  # relative to the box root, POSIX separators
    mode: Literal["text", "binary"]


class RelocationInfo(_Model):
    placeholder: str
    files: list[PrefixFile]


# ---------------------------------------------------------------- scanning (build time)


def scan_prefix_files(root: Path, prefix: str, clean: Container[str] = ()) -> list[PrefixFile]:
    """Every regular file under ``root`` that embeds ``prefix``, sorted by path; the files named in
    ``clean`` (root-relative) are known not to and are not read.

    conda-meta/*.json ``paths_data`` (``file_mode``) decides text vs binary for the files it lists;
    every other file is found by a byte scan and called binary when it contains a NUL byte.
    """
    needle = prefix.encode("utf-8")
    declared = _declared_modes(root)
    found: list[PrefixFile] = []
    for rel, full in _regular_files(root):
        if rel in clean:
            continue
        hit, has_nul = _scan_file(full, needle)
        if hit:
            mode = declared.get(rel) or ("binary" if has_nul else "text")
            found.append(PrefixFile(path=rel, mode=mode))
    return found


def _regular_files(root: Path) -> Iterator[tuple[str, str]]:
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        base = Path(directory).relative_to(root).as_posix()
        for name in sorted(files):
            full = os.path.join(directory, name)  # noqa: PTH118 - hot path over every file
            if not os.path.islink(full):  # noqa: PTH114
                yield (name if base == "." else f"{base}/{name}"), full


def _scan_file(path: str, needle: bytes) -> tuple[bool, bool]:
    """(file contains needle, file contains a NUL byte), reading in chunks with an overlap."""
    hit = has_nul = False
    tail = b""
    with open(path, "rb") as f:  # noqa: PTH123 - hot loop over many files
        while chunk := f.read(_SCAN_CHUNK):
            data = tail + chunk
            hit = hit or needle in data
            has_nul = has_nul or b"\x00" in chunk
            if hit and has_nul:
                break
            tail = data[-(len(needle) - 1) :] if len(needle) > 1 else b""
    return hit, has_nul


def _declared_modes(root: Path) -> dict[str, Literal["text", "binary"]]:
    """file_mode of every prefix-carrying file named by conda-meta/*.json of any env under root."""
    modes: dict[str, Literal["text", "binary"]] = {}
    for meta in sorted(root.glob("**/conda-meta")):
        env = meta.parent.relative_to(root).as_posix()
        for record in sorted(meta.glob("*.json")):
            for rel, mode in _paths_data_modes(record):
                modes[rel if env == "." else f"{env}/{rel}"] = mode
    return modes


def _paths_data_modes(record: Path) -> Iterable[tuple[str, Literal["text", "binary"]]]:
    try:
        data = json.loads(record.read_bytes())
        entries = data.get("paths_data", {}).get("paths", [])
    except (ValueError, AttributeError, OSError):
        return []  # not a package record: the byte scan still finds its files
    out: list[tuple[str, Literal["text", "binary"]]] = []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("prefix_placeholder"):
            mode = entry.get("file_mode", "text")
            out.append((str(entry.get("_path", "")), "binary" if mode == "binary" else "text"))
    return out


# ---------------------------------------------------------------- rewriting (pure)


def replace_text(data: bytes, placeholder: bytes, new_prefix: bytes) -> bytes:
    """Plain replacement, then a shebang fix-up if the first line became unusable."""
    line_end = data.find(b"\n")
    first = data if line_end < 0 else data[:line_end]
    replaced = data.replace(placeholder, new_prefix)
    if not (first.startswith(b"#!") and placeholder in first):
        return replaced
    new_first = first.replace(placeholder, new_prefix)
    return fix_shebang(first, new_first, placeholder, new_prefix) + replaced[len(new_first) :]


def fix_shebang(old_line: bytes, new_line: bytes, placeholder: bytes, new_prefix: bytes) -> bytes:
    """``new_line`` when the kernel can still run it, else a portable replacement.

    ``old_line`` is the first line without its ``\n`` (a CR before it is kept, not an argument).
    The kernel can run ``new_line`` when it is at most :data:`MAX_SHEBANG` bytes and the new prefix
    adds no blank (the placeholder has none, so the words of the line stay the words the package
    wrote).  Otherwise the interpreter and its words, each with the prefix replaced, are run by the
    sh trampoline (a Python script) or by ``/usr/bin/env`` (any other interpreter).
    """
    if len(new_line) <= MAX_SHEBANG and not _BLANKS.search(new_prefix):
        return new_line
    body, cr = (old_line[:-1], b"\r") if old_line.endswith(b"\r") else (old_line, b"")
    words = [w.replace(placeholder, new_prefix) for w in body[2:].split()]
    if _runs_python(words):
        return sh_trampoline(words) + cr
    return env_shebang(words) + cr


_BLANKS = re.compile(rb"[ \t\r\n]")  # what ends a shebang word (the kernel splits on blanks)
_SH_SAFE = re.compile(rb"[A-Za-z0-9_@%+=:,./-]+")


def _runs_python(words: list[bytes]) -> bool:
    """A Python script: the interpreter is python*, or env whose command (first word that is not an
    option or an assignment) is."""
    names = [w.rsplit(b"/", 1)[-1] for w in words]
    if names[0] == b"env":
        names = [n for w, n in zip(words[1:], names[1:], strict=True) if not w.startswith(b"-") and b"=" not in w][:1]
    return bool(names) and names[0].startswith(b"python")


def sh_trampoline(argv: list[bytes]) -> bytes:
    """conda's ``'''exec'`` trampoline: sh execs ``argv`` + the script and its arguments; Python
    reads the two lines as a string.  Each word is sh-quoted so that no character of a prefix is
    special to sh (no expansion, no command substitution) and the line stays valid Python source."""
    quoted = b" ".join(sh_quote(w) for w in argv)
    return b"#!/bin/sh\n'''exec' " + quoted + b' "$0" "$@"\n' + b"' '''"


def sh_quote(word: bytes) -> bytes:
    """``word`` in sh single quotes; ``'`` written ``'"'"'`` and ``\\`` written ``'\\\\'`` (outside the
    quotes).  sh reads it back as ``word``; Python, reading it inside ``'''...'''``, meets neither
    ``'''`` nor an invalid escape (a lone backslash)."""
    if _SH_SAFE.fullmatch(word):
        return word
    return b"'" + word.replace(b"'", b"'\"'\"'").replace(b"\\", b"'\\\\'") + b"'"


def env_shebang(words: list[bytes]) -> bytes:
    """``#!/usr/bin/env NAME`` (NAME found on PATH, as conda does); with arguments ``env -S`` splits
    them (GNU coreutils 8.30+, macOS, the BSDs), each quoted for env's own syntax."""
    if words[0].rsplit(b"/", 1)[-1] == b"env":
        interpreter = b"/usr/bin/env" if _BLANKS.search(words[0]) else words[0]
        rest = words[1:]
    else:
        interpreter, rest = b"/usr/bin/env", [words[0].rsplit(b"/", 1)[-1], *words[1:]]
    if rest[:1] == [b"-S"]:
        rest = rest[1:]
    if len(rest) <= 1 and all(_SH_SAFE.fullmatch(w) for w in rest):
        return b"#!" + b" ".join([interpreter, *rest])
    return b"#!" + interpreter + b" -S " + b" ".join(env_quote(w) for w in rest)


def env_quote(word: bytes) -> bytes:
    """``word`` for ``env -S``: in single quotes, where only ``\\\\`` and ``\\'`` are escapes."""
    if _SH_SAFE.fullmatch(word):
        return word
    return b"'" + word.replace(b"\\", b"\\\\").replace(b"'", b"\\'") + b"'"


class PaddingError(ValueError):
    """The new prefix is longer than the placeholder: binary files cannot be rewritten in place."""


def replace_binary(data: bytes, placeholder: bytes, new_prefix: bytes) -> bytes:
    """conda's C-string rule: rewrite inside each C string that holds the placeholder and pad it with
    NULs.  The string runs from the placeholder to the next NUL or to the end of the file (as
    rattler does: a file may end without the terminator, e.g. a string table cut at its end)."""
    if len(new_prefix) > len(placeholder):
        raise PaddingError(len(new_prefix) - len(placeholder))
    pattern = re.compile(re.escape(placeholder) + b"[^\x00]*")

    def one(match: re.Match[bytes]) -> bytes:
        text = match.group()
        count = text.count(placeholder)
        padding = (len(placeholder) - len(new_prefix)) * count
        return text.replace(placeholder, new_prefix) + b"\x00" * padding

    out = pattern.sub(one, data)
    if len(out) != len(data):  # cannot happen with the padding above; a wrong offset would be fatal
        raise PaddingError(0)
    return out


# ---------------------------------------------------------------- applying (unpack time)


def relocate(root: Path, info: RelocationInfo, new_prefix: str) -> int:
    """Rewrite every file of ``info`` under ``root`` for ``new_prefix``; returns files changed.

    Each file is written to a temp file beside it and renamed over it (its mode kept), so a file is
    either old or new, never half-written.
    """
    placeholder = info.placeholder.encode("utf-8")
    target = new_prefix.encode("utf-8")
    check_dest_length(new_prefix, max_dest_bytes(info))
    if b"\n" in target or b"\r" in target:
        raise BuildError(
            f"cannot relocate the box to {new_prefix!r}: the path contains a line break, which no shebang "
            "line and few text formats can hold",
            fix="unpack into a path without line breaks",
        )
    changed = 0
    for item in info.files:
        path = _inside(root, item.path)
        data = path.read_bytes()
        new = (replace_binary if item.mode == "binary" else replace_text)(data, placeholder, target)
        if new != data:
            _rewrite(path, new)
            changed += 1
    return changed


def max_dest_bytes(info: RelocationInfo) -> int | None:
    """The longest DEST (UTF-8 bytes of :func:`prefix_text`) the box allows; None: any length.  Only
    binary files limit it (their C strings are padded in place); text files and shebangs take any length."""
    if any(f.mode == "binary" for f in info.files):
        return len(info.placeholder.encode("utf-8"))
    return None


def prefix_text(dest: Path) -> str:
    """DEST as relocation writes it into the files: POSIX form, the native form on Windows."""
    return dest.as_posix() if os.sep == "/" else str(dest)


def check_dest_length(new_prefix: str, limit: int | None, *, nothing_done: str = "") -> None:
    """BuildError when ``new_prefix`` is longer than ``limit`` bytes (:func:`max_dest_bytes`); an installer
    calls it before downloading (the limit is in the release manifest and the index), relocate() again."""
    size = len(new_prefix.encode("utf-8"))
    if limit is None or size <= limit:
        return
    raise BuildError(
        f"cannot relocate the box to {new_prefix}: the path is {size} bytes, longer than the "
        f"{limit}-byte build placeholder that binary files have room for{nothing_done}",
        fix=f"unpack into a shorter path (at most {limit} bytes)",
    )


def _inside(root: Path, rel: str) -> Path:
    """The regular file ``rel`` under ``root``; box.json naming anything else is an integrity error."""
    try:
        name = paths.normalise_member(rel)
    except paths.UnsafePath as exc:
        raise IntegrityError(
            f"box.json: relocation names an unsafe path: {exc.rule}",
            fix="rebuild the box; do not edit box.json by hand",
        ) from None
    path = root.joinpath(*name.split("/"))
    real_root = os.path.realpath(root)
    if path.is_symlink() or not path.is_file() or os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
        raise IntegrityError(
            f"box.json: relocation file {rel} is not a regular file inside the box",
            fix="rebuild the box; do not edit box.json by hand",
        )
    return path


def _rewrite(path: Path, data: bytes) -> None:
    write_atomic(path, data, mode=path.stat().st_mode & 0o7777)  # keep the exact mode bits


def read_relocation(box_json: bytes, file: str = "box.json") -> RelocationInfo | None:
    """The ``"relocation"`` entry of a box.json, or None when the box needs no relocation."""
    data = load_json(box_json, file=file, error=IntegrityError, fix="rebuild the box", max_bytes=MAX_BOX_JSON_BYTES)
    raw = data.get("relocation") if isinstance(data, dict) else None
    if raw is None:
        return None
    try:
        return RelocationInfo.model_validate(raw)
    except ValueError as exc:
        raise IntegrityError(f'{file}: "relocation" is invalid: {exc}', fix="rebuild the box") from None
