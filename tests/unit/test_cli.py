import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase import cli

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
    parser = cli.build_parser()
    assert "demo" in _subcommands()  # a removed command fails here, never skips
    for argv in (["--json", "demo"], ["demo", "--json"]):
        assert parser.parse_args(argv).json is True
    assert parser.parse_args(["demo"]).json is False


def test_an_interrupt_while_the_commands_load_is_exit_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during start-up (importing the command modules) is an interruption, not a traceback."""
    from scrollcase import cli

    def interrupted() -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["validate"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted" and "Traceback" not in err
