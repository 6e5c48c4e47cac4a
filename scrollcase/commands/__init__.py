"""One module per CLI command.

Each module defines ``register(subparsers, common)`` which adds its sub-parser and sets
``handler=handler(ITS_ARGS, run)``: argparse's Namespace becomes the command's typed, frozen arguments in
one place (:meth:`CommandArgs.from_namespace`), then ``run(args, console) -> int`` parses nothing more,
makes its library call and renders.  The CLI discovers every module here, so adding a command never means
editing ``cli.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Self, TypeAlias, TypeVar

from scrollcase.errors import ResultShownError, ScrollcaseError

if TYPE_CHECKING:
    from scrollcase.console import Console

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler: TypeAlias = "Callable[[argparse.Namespace, Console], int]"


@dataclass(frozen=True)
class CommandArgs:
    """Base of each command's arguments: one field per option it reads, named as argparse stores it."""

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace) -> Self:
        """The fields from ``namespace``; repeatable and ``nargs`` lists become tuples (frozen all the way)."""
        values = {f.name: getattr(namespace, f.name) for f in fields(cls)}
        return cls(**{name: tuple(v) if isinstance(v, list) else v for name, v in values.items()})


A = TypeVar("A", bound=CommandArgs)


def add_command(
    sub: SubParsers,
    common: argparse.ArgumentParser,
    name: str,
    help: str,
    description: str,
    *,
    raw: bool = False,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """A command's parser with the common options; ``raw`` keeps the description's line breaks."""
    formatter = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter
    return sub.add_parser(
        name, parents=[common], help=help, description=description, epilog=epilog, formatter_class=formatter
    )


def add_recipes_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recipes-root", type=Path, default=Path("recipes"), help="where recipes live (default: recipes)")


def add_recipe_list(p: argparse.ArgumentParser, dest: str, metavar: str, what: str) -> None:
    """Positional recipes (``what``), every recipe under --recipes-root when none is given."""
    p.add_argument(dest, nargs="*", metavar=metavar, help=f"{what} (default: every recipe under --recipes-root)")


def add_channel_override(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--channel-override", action="append", default=[], metavar="NAME=URL", help=help)


def handler(args_type: type[A], run: Callable[[A, Console], int]) -> Handler:
    """What a sub-parser stores as ``handler``: build ``args_type`` from the Namespace, then ``run`` it."""

    def handle(namespace: argparse.Namespace, console: Console) -> int:
        return run(args_type.from_namespace(namespace), console)

    return handle


def fail_after_result(console: Console, error: ScrollcaseError) -> NoReturn:
    """The one policy for a failure whose result is already printed: under ``--json`` the result is the
    report (no second document, no error line); otherwise ``error`` is rendered as every error is."""
    if console.json_mode:
        raise ResultShownError(error)
    raise error
