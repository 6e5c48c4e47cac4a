"""Command line entry point: parse, dispatch, render errors.  The only place that exits."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from scrollcase import commands
from scrollcase.console import Console
from scrollcase.errors import (
    EXIT_CODES,
    InternalError,
    ResultShownError,
    ScrollcaseError,
    UsageError,
    from_os_error,
    from_value_error,
)

EPILOG = (
    "exit codes: 0 ok; "
    + "; ".join(f"{code} {name}" for name, code in sorted(EXIT_CODES.items(), key=lambda item: item[1]))
    + "; 130 interrupted; 143 terminated"
)
DEBUG_ENV = "SCROLLCASE_DEBUG"  # set: also print the traceback of an OSError/ValueError turned into an error


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is a UsageError, so --json still gets its error object."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: {message}", fix=f"see `{self.prog} --help`")


class _Terminated(KeyboardInterrupt):  # SIGTERM, cleaned up exactly like SIGINT
    pass


def _common_options(default: object) -> argparse.ArgumentParser:
    # Sub-commands get SUPPRESS defaults so `scrollcase --json CMD` is not reset by CMD's own default.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=default, help="print machine-readable JSON on stdout")
    common.add_argument("-q", "--quiet", action="store_true", default=default, help="no progress output on stderr")
    return common


def named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs (or asks the --help of): the first word that is not an option, since the
    options before a command take no value; None when it names no known command."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in commands.COMMANDS else None


class _VersionAction(argparse.Action):
    """argparse's version action, but the version is looked up only when asked for (see scrollcase/version.py)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from scrollcase.version import package_version

        print(f"scrollcase {package_version()}")
        parser.exit()


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    common = _common_options(argparse.SUPPRESS)
    parser = _Parser(
        prog="scrollcase",
        description="Build, prove and publish self-contained Python boxes for ML model runtimes.",
        epilog=EPILOG,
        parents=[_common_options(False)],
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show scrollcase's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = named_command(argv)
    for name, help in commands.COMMANDS.items():
        if name == named:  # only the command that runs is imported (numpy, boto3, rattler: about a second)
            importlib.import_module(commands.module_of(name)).register(sub, common)
        else:  # the overview's line and a valid choice; never parsed with
            sub.add_parser(name, help=help)
    return parser


def _render_error(error: ScrollcaseError, console: Console, junit: Path | None = None) -> None:
    console.end_status()  # a live progress line must not swallow the error's first line
    if console.json_mode:
        console.result(error.to_json())
    print(f"error: {error.render()}", file=sys.stderr)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from scrollcase.github import report

        # Workflow commands on stderr in --json mode keep stdout parseable; GitHub reads both.
        report.annotate_error(error, stream=sys.stderr if console.json_mode else sys.stdout, junit=junit)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the error boundary: every failure becomes an exit code and, under --json, an
    error object on stdout.  An OSError/ValueError no command located is turned into a located error
    (:func:`~scrollcase.errors.from_os_error`); any other exception is a bug, shown with its traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    console = Console(json_mode="--json" in argv)  # until the arguments are parsed
    args: argparse.Namespace | None = None
    restore = _terminate_like_interrupt()
    try:
        args = build_parser(argv).parse_args(argv)
        console = Console(json_mode=args.json, quiet=args.quiet)
        code: int = args.handler(args, console)
    except ResultShownError as shown:
        return shown.exit_code
    except ScrollcaseError as error:
        return _fail(error, console, args)
    except _Terminated:
        console.end_status()
        print("terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        console.end_status()
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        return _fail(from_os_error(exc), console, args, exc if os.environ.get(DEBUG_ENV) else None)
    except ValueError as exc:
        return _fail(from_value_error(exc), console, args, exc if os.environ.get(DEBUG_ENV) else None)
    except Exception as exc:
        bug = InternalError(
            f"internal error: {type(exc).__name__}: {exc}",
            fix="this is a bug in scrollcase: please report it with the traceback above",
        )
        return _fail(bug, console, args, exc)
    finally:
        restore()
    return code


def _fail(
    error: ScrollcaseError, console: Console, args: argparse.Namespace | None, shown: BaseException | None = None
) -> int:
    if shown is not None:
        console.end_status()
        traceback.print_exception(shown, file=sys.stderr)
    _render_error(error, console, junit=getattr(args, "junit", None))
    return error.exit_code


def _terminate_like_interrupt() -> Callable[[], None]:
    """SIGTERM (a CI timeout, a container stop) raises like SIGINT, so the same clean-up runs; only the
    first of either raises: a repeat while the clean-up runs (a second Ctrl-C, a supervisor signalling
    again, an unpack's reader thread reporting bytes) must not cut it short and leave a temp folder."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return lambda: None

    fired = False

    def raise_once(error: type[KeyboardInterrupt]) -> Callable[[int, FrameType | None], None]:
        def handler(signum: int, frame: FrameType | None) -> None:
            nonlocal fired
            if fired:
                return
            fired = True
            raise error

        return handler

    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, raise_once(KeyboardInterrupt)),
        signal.SIGTERM: signal.signal(signal.SIGTERM, raise_once(_Terminated)),
    }

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    return restore


def main_exit() -> None:
    """Console-script entry point."""
    sys.exit(main())
