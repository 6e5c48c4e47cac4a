"""console.invocation / command_line: the commands scrollcase prints (the demo's "next:") run as printed,
whether scrollcase was started from a venv not on PATH, from PATH, or as ``python -m scrollcase``."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from scrollcase import console
from scrollcase.console import invocation


def nowhere(_: str) -> str | None:
    return None


def test_a_venv_script_not_on_path_is_named_by_the_path_it_was_run_by() -> None:
    assert invocation(".venv/bin/scrollcase", "/usr/bin/python3", nowhere) == [".venv/bin/scrollcase"]


def test_the_script_path_finds_is_plain_scrollcase(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "scrollcase"
    script.parent.mkdir()
    script.write_text("", encoding="utf-8")
    assert invocation(str(script), "/usr/bin/python3", lambda _: str(script)) == ["scrollcase"]


def test_another_scrollcase_on_path_does_not_count(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "a" / "scrollcase", tmp_path / "b" / "scrollcase"
    for path in (ours, theirs):
        path.parent.mkdir()
        path.write_text("", encoding="utf-8")
    assert invocation(str(ours), "/usr/bin/python3", lambda _: str(theirs)) == [str(ours)]


def test_windows_launcher_names_count_as_the_script() -> None:
    assert invocation(r"C:\v\Scripts\scrollcase.exe", r"C:\v\Scripts\python.exe", nowhere) == [
        r"C:\v\Scripts\scrollcase.exe"
    ]


def test_python_dash_m_is_named_by_its_interpreter() -> None:
    main = "/repo/scrollcase/__main__.py"
    assert invocation(main, "/opt/py/bin/python3", nowhere) == ["/opt/py/bin/python3", "-m", "scrollcase"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX shell quoting")
def test_command_line_quotes_each_word_for_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/my venv/bin/scrollcase"])
    monkeypatch.setattr("shutil.which", nowhere)
    line = console.command_line("verify", "w/it's here.release.json", "--self-test")
    assert shlex.split(line) == ["/my venv/bin/scrollcase", "verify", "w/it's here.release.json", "--self-test"]
