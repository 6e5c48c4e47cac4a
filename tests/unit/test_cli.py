import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase import cli, commands

ROOT = Path(__file__).resolve().parents[2]


def _subcommands() -> list[str]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)  # type: ignore[arg-type]


def test_top_level_help_lists_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert "exit codes: 0 ok" in capsys.readouterr().out


@pytest.mark.parametrize("command", _subcommands())
def test_every_command_has_help_and_json(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    assert "--json" in capsys.readouterr().out


def test_module_entry_point_runs_as_a_program():
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "scrollcase", "--version"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith("scrollcase ")


def test_json_flag_works_before_and_after_the_command():
    assert "demo" in _subcommands()  # a removed command fails here, never skips
    for argv in (["--json", "demo"], ["demo", "--json"]):
        assert cli.build_parser(argv).parse_args(argv).json is True
    assert cli.build_parser(["demo"]).parse_args(["demo"]).json is False


def test_an_interrupt_while_the_commands_load_is_exit_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during start-up (importing the command modules) is an interruption, not a traceback."""
    from scrollcase import cli

    def interrupted(*_: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["validate"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted" and "Traceback" not in err


def _run_with(handler: object, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    real_parse = cli._Parser.parse_args

    def parse(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
        ns = real_parse(self, args, namespace)
        ns.handler = handler
        return ns

    monkeypatch.setattr(cli._Parser, "parse_args", parse)
    return cli.main(argv)


@pytest.mark.parametrize("json_mode", [True, False])
def test_a_failure_after_the_result_prints_once_and_exits_with_its_code(
    json_mode: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: the printed result is the one document (no error object, no error line); text: the error
    is rendered as every error is."""
    from scrollcase.errors import ParityError

    def handler(args: object, console: object) -> int:
        console.result({"ok": False}, "the table")  # type: ignore[attr-defined]
        commands.fail_after_result(console, ParityError("parity failed: 1 failure(s)"))  # type: ignore[arg-type]

    argv = ["verify", "x.release.json", *(["--json"] if json_mode else [])]
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert _run_with(handler, argv, monkeypatch) == 7
    out, err = capsys.readouterr()
    if json_mode:
        assert out == '{\n  "ok": false\n}\n' and err == ""
    else:
        assert out == "the table\n" and err == "error: parity failed: 1 failure(s)\n"


def test_command_args_are_built_from_the_namespace_frozen() -> None:
    import argparse
    import dataclasses

    from scrollcase.commands.validate import ValidateArgs

    args = ValidateArgs.from_namespace(argparse.Namespace(paths=["a", "b"], recipes_root=Path("r"), json=True))
    assert args == ValidateArgs(paths=("a", "b"), recipes_root=Path("r"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.paths = ()  # type: ignore[misc]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals: os.kill of SIGTERM terminates on Windows")
def test_a_repeated_sigterm_does_not_cut_the_clean_up_short() -> None:
    """The first SIGTERM raises (the clean-up runs as for Ctrl-C); more of them while it runs are ignored:
    an unpack's reader thread can report bytes, and a supervisor can signal, more than once."""
    import os
    import signal

    restore = cli._terminate_like_interrupt()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # during the clean-up: nothing raised
        sum(range(1000))
    finally:
        restore()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals: os.kill of SIGINT terminates on Windows")
@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM"])
def test_after_the_first_signal_neither_cuts_the_clean_up_short(first: str) -> None:
    """CI once left an unpack's temp folder: the reader thread's second SIGINT interrupted the rmtree the
    first one started.  Any signal after the first, of either kind, is ignored until the command ends."""
    import os
    import signal

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where the suite runs in a background job (nohup ... &)
    restore = cli._terminate_like_interrupt()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), getattr(signal, first))
        for repeat in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
            os.kill(os.getpid(), repeat)
        sum(range(1000))
    finally:
        restore()
    assert signal.getsignal(signal.SIGINT) is before


def test_only_the_named_command_is_loaded() -> None:
    assert cli.named_command(["--json", "lock-check", "recipes/x"]) == "lock-check"
    assert cli.named_command(["-q", "matrix", "--help"]) == "matrix"
    assert cli.named_command(["--help"]) is None  # the overview: every command from the table, none imported
    assert cli.named_command(["bild"]) is None  # argparse's error names the real choices


def test_the_command_table_names_every_command_module() -> None:
    import pkgutil

    modules = sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    assert sorted(commands.module_of(name).rsplit(".", 1)[1] for name in commands.COMMANDS) == modules
    assert list(commands.COMMANDS) == sorted(commands.COMMANDS)  # the overview lists them as before: sorted


@pytest.mark.parametrize("command", sorted(commands.COMMANDS))
def test_the_overview_is_the_same_whichever_command_is_loaded(command: str) -> None:
    """The table's help line is the module's own: the overview with ``command`` really registered (its
    module imported) is the overview built from the table alone, and ``command`` parses with its own parser."""
    light = cli.build_parser([]).format_help()
    loaded = cli.build_parser([command])
    assert loaded.format_help() == light
    action = next(a for a in loaded._actions if a.dest == "command")
    assert "--json" in action.choices[command].format_help()  # type: ignore[index]


def test_version_and_the_overview_import_no_command_module() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from scrollcase import cli\n"
        "for argv in (['--version'], ['--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        cli.main(argv)\n"
        "print(sorted(m for m in sys.modules if m.startswith('scrollcase.commands.')))\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_matrix_command_imports_nothing_heavy(tmp_path: Path) -> None:
    """The matrix job only prints JSON: no numpy, boto3 or rattler (about a second) is imported for it."""
    from tests.github_helpers import write_recipe

    write_recipe(tmp_path / "recipes", "tiny-mlp", "linux-x86_64-cpu")
    code = (
        "import sys\n"
        "from scrollcase import cli\n"
        "assert cli.main(['matrix', '--json', '--recipes', 'recipes']) == 0\n"
        "heavy = {'numpy', 'boto3', 'botocore', 'rattler', 'zstandard', 'github'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
    assert json.loads(done.stdout)["include"][0]["recipeId"] == "tiny-mlp-linux-x86_64-cpu"
