"""Command line entry point: parse, dispatch, render errors.  The only place that exits."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from scrollcase import __version__, commands
from scrollcase.console import Console
from scrollcase.errors import EXIT_CODES, ScrollcaseError

EPILOG = "exit codes: 0 ok; " + "; ".join(f"{code} {name}" for name, code in sorted(
    EXIT_CODES.items(), key=lambda item: item[1])) + "; 130 interrupted"


def _common_options(default: object) -> argparse.ArgumentParser:
    # Sub-commands get SUPPRESS defaults so `scrollcase --json CMD` is not reset by CMD's own default.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=default, help="print machine-readable JSON on stdout")
    common.add_argument("-q", "--quiet", action="store_true", default=default, help="no progress output on stderr")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="scrollcase",
        description="Build, prove and publish self-contained Python boxes for ML model runtimes.",
        epilog=EPILOG,
        parents=[_common_options(False)],
    )
    parser.add_argument("--version", action="version", version=f"scrollcase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub, common)
    return parser


def _render_error(error: ScrollcaseError, console: Console) -> None:
    console.end_status()  # a live progress line must not swallow the error's first line
    if console.json_mode:
        console.result(error.to_json())
    print(f"error: {error.render()}", file=sys.stderr)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from scrollcase.github import report

        # Workflow commands on stderr in --json mode keep stdout parseable; GitHub reads both.
        report.annotate_error(error, stream=sys.stderr if console.json_mode else sys.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(json_mode=args.json, quiet=args.quiet)
    try:
        code: int = args.handler(args, console)
    except ScrollcaseError as error:
        _render_error(error, console)
        return error.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return code


def main_exit() -> None:
    """Console-script entry point."""
    sys.exit(main())
