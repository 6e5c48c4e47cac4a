"""Property tests of relocation (issue #17): for generated shebangs, text and binary files and DESTs, no
placeholder survives, text is the plain replacement, binaries keep their length (or a too-long DEST is
refused), and a sample of relocated scripts runs the intended interpreter with the intended argv."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from scrollcase.errors import BuildError
from scrollcase.format import relocate
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, MAX_SHEBANG, PrefixFile, RelocationInfo

P = BOX_PREFIX_PLACEHOLDER.encode()
# letters plus every character sh or Python source could act on; no "/" (it separates components)
HOSTILE = "abcXYZ019_-. \"$`\\'()*;&|<>{}~!#%"
COMPONENT = st.text(alphabet=HOSTILE, min_size=1, max_size=40).filter(lambda c: c not in (".", ".."))
DESTS = st.lists(COMPONENT, min_size=1, max_size=8).map(lambda parts: "/" + "/".join(parts))
LINE_ENDS = st.sampled_from([b"\n", b"\r\n"])
# words a package could put after the interpreter; "@" stands for the placeholder
PYTHON_OPTIONS = st.lists(
    st.sampled_from(["-s", "-E", "-B", "-O", "-X k1=@/x", "-X k2=@", "-Xk3=a"]), max_size=4, unique=True
)
OTHER_WORDS = st.lists(st.sampled_from(["-e", "--init-file", "@/rc", "@", "x=@/y", "[%s]"]), max_size=3)


@st.composite
def shebangs(draw: st.DrawFn) -> bytes:
    """``#!`` lines that name the placeholder: python or another interpreter, direct or through env."""
    if draw(st.booleans()):
        interpreter = [f"@/venv/bin/{draw(st.sampled_from(['python', 'python3.11', 'pythonw']))}"]
        words = draw(PYTHON_OPTIONS)
    elif draw(st.booleans()):
        interpreter = [f"@/venv/bin/{draw(st.sampled_from(['bash', 'perl', 'sh']))}"]
        words = draw(OTHER_WORDS)
    else:
        env = ["/usr/bin/env", *draw(st.sampled_from([[], ["-S"], ["-i"]]))]
        interpreter = [*env, draw(st.sampled_from(["python3", "bash", "printf"]))]
        words = [*draw(OTHER_WORDS), "@/z"]  # an env line names the placeholder in its arguments only
    line = " ".join([*interpreter, *" ".join(words).split()])
    return b"#!" + line.replace("@", BOX_PREFIX_PLACEHOLDER).encode()


def _body(draw: st.DrawFn, *, nul: bool) -> bytes:
    """Bytes with the placeholder at the start, in the middle and/or at the end."""
    pieces = draw(st.lists(st.binary(max_size=30), min_size=1, max_size=4))
    out = b""
    for piece in pieces:
        piece = piece if nul else piece.replace(b"\x00", b"")
        out += (P if draw(st.booleans()) else b"") + piece
    return out + (P + draw(st.sampled_from([b"", b"/lib", b"/lib\x00"])) if draw(st.booleans()) else b"")


@st.composite
def files(draw: st.DrawFn) -> tuple[str, bytes]:
    mode = draw(st.sampled_from(["text", "binary", "script"]))
    if mode == "script":
        return "text", draw(shebangs()) + draw(LINE_ENDS) + _body(draw, nul=False)
    data = _body(draw, nul=mode == "binary")
    return mode, (b"\x00" + data if mode == "binary" else data)


def _c_string_model(data: bytes, new: bytes) -> bytes:
    """The NUL rule restated per C string: each string holding the placeholder gets its padding at its end."""
    pad = len(P) - len(new)
    return b"\x00".join(s.replace(P, new) + b"\x00" * (pad * s.count(P)) for s in data.split(b"\x00"))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dest=DESTS, recorded=st.lists(files(), min_size=1, max_size=5))
@example(dest="/ ", recorded=[("text", b"#!")])  # a shebang without the placeholder, a blank in DEST: left alone
def test_relocation_leaves_no_placeholder_and_keeps_every_rule(dest: str, recorded: list[tuple[str, bytes]]) -> None:
    new = dest.encode()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, (_, data) in enumerate(recorded):
            (root / f"f{i}").write_bytes(data)
        info = RelocationInfo(
            placeholder=BOX_PREFIX_PLACEHOLDER,
            files=[PrefixFile(path=f"f{i}", mode=mode) for i, (mode, _) in enumerate(recorded)],  # type: ignore[arg-type]
        )
        binary = any(mode == "binary" for mode, _ in recorded)
        if binary and len(new) > len(P):
            with pytest.raises(BuildError, match="shorter path"):
                relocate.relocate(root, info, dest)
            assert [(root / f"f{i}").read_bytes() for i in range(len(recorded))] == [d for _, d in recorded]
            return
        relocate.relocate(root, info, dest)
        for i, (mode, data) in enumerate(recorded):
            out = (root / f"f{i}").read_bytes()
            assert P not in out
            if mode == "binary":
                assert len(out) == len(data) and out == _c_string_model(data, new)
            elif data.startswith(b"#!"):
                first, newline, rest = data.partition(b"\n")
                tail = newline + rest.replace(P, new)  # a script of one line, no newline: no tail
                assert out.endswith(tail)
                _check_shebang(first, out[: len(out) - len(tail)], new)
            else:
                assert out == data.replace(P, new)


def _check_shebang(old: bytes, new_line: bytes, dest: bytes) -> None:
    if P not in old:  # a first line that does not name the box's prefix is not touched, whatever DEST is
        assert new_line == old
        return
    plain = old.replace(P, dest)
    blank = any(c in dest for c in b" \t")
    if len(plain) <= MAX_SHEBANG and not blank:
        assert new_line == plain
    elif new_line.startswith(b"#!/bin/sh\n"):
        _, exec_line, last = new_line.split(b"\n")
        assert last in (b"' '''", b"' '''\r")
        words = [w.replace(P, dest).decode() for w in old.removesuffix(b"\r")[2:].split()]
        assert shlex.split(exec_line.decode()) == ["exec", *words, "$0", "$@"]  # what sh runs
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an invalid escape would warn on every run
            compile(new_line + b"\n", "trampoline", "exec")  # and Python reads it as one string
    else:
        assert new_line.startswith(b"#!/usr/bin/env") and b"\n" not in new_line
        assert b"env env" not in new_line.replace(b"-S ", b"")


# ---------------------------------------------------------------- the scripts really run

REPORT = (
    b"import json, sys\n"
    b"f = sys.flags\n"
    b"print(json.dumps([sys.executable, sys.argv[1:], [f.no_user_site, f.ignore_environment, f.dont_write_bytecode,"
    b" f.optimize], sys._xoptions]))\n"
)
USER_ARGS = ["a b", "$HOME", "`id`", "'\\\""]


def _expected(words: list[str], dest: str) -> tuple[list[int], dict[str, str]]:
    flags = [int("-s" in words), int("-E" in words), int("-B" in words), int("-O" in words)]
    xoptions: dict[str, str] = {}
    spelled = " ".join(words).replace("-X ", "-X").split()
    for word in spelled:
        if word.startswith("-X"):
            key, _, value = word[2:].partition("=")
            xoptions[key] = value.replace("@", dest)
    return flags, xoptions


@pytest.mark.skipif(sys.platform == "win32", reason="shebangs are a POSIX feature")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(COMPONENT, min_size=1, max_size=4),
    long=st.booleans(),
    via_env=st.booleans(),
    words=PYTHON_OPTIONS,
    line_end=LINE_ENDS,
)
def test_relocated_python_scripts_run_the_box_interpreter_with_the_intended_argv(
    parts: list[str], long: bool, via_env: bool, words: list[str], line_end: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        dest = base.joinpath(*parts, *(["d" * 60, "e" * 60] if long else []))
        words = [*words, "-X k9=@"] if via_env else words  # env lines name the placeholder in an argument
        interpreter = "/usr/bin/env python3" if via_env else "@/venv/bin/python"
        first = f"#!{' '.join([interpreter, *words])}".replace("@", BOX_PREFIX_PLACEHOLDER).encode()
        script = _box_with_script(dest, first + line_end + REPORT.replace(b"\n", line_end))
        new_first = script.read_bytes().split(b"\n")[0]
        kept = not new_first.startswith(b"#!/bin/sh")
        assume(not kept or (line_end == b"\n" and len(" ".join(words).split()) <= 1))  # what a kernel can run
        work = base / "cwd"
        work.mkdir()
        env = {"PATH": f"{dest}/venv/bin:/usr/bin:/bin"}
        done = subprocess.run(
            [str(script), *USER_ARGS], cwd=work, env=env, capture_output=True, timeout=60, check=False
        )
        assert done.returncode == 0, (script.read_bytes(), done.stderr)
        assert done.stderr == b""
        exe, args, flags, xoptions = json.loads(done.stdout)
        assert exe == str(dest / "venv" / "bin" / ("python3" if via_env else "python"))
        assert args == USER_ARGS
        assert (flags, xoptions) == _expected(words, str(dest))
        assert list(work.iterdir()) == [] and sorted(p.name for p in base.iterdir()) == sorted({parts[0], "cwd"})


def _box_with_script(dest: Path, data: bytes) -> Path:
    bin_dir = dest / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(os.path.realpath(sys.executable))
    script = bin_dir / "tool"
    script.write_bytes(data)
    script.chmod(0o755)
    info = RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[PrefixFile(path="venv/bin/tool", mode="text")])
    relocate.relocate(dest, info, str(dest))
    return script
