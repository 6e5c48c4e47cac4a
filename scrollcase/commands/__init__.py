"""One module per CLI command.

Each module defines ``register(subparsers, common)`` which adds its sub-parser and sets
``handler=handler(ITS_ARGS, run)``: argparse's Namespace becomes the command's typed, frozen arguments in
one place (:meth:`CommandArgs.from_namespace`), then ``run(args, console) -> int`` parses nothing more,
makes its library call and renders.  :data:`COMMANDS` names every command with its one-line help, so
``scrollcase --help`` and ``--version`` import no command module (their imports cost about a second): a
command's module is imported only when it is run or its own ``--help`` is asked for.  Adding a command
means its module and one line there, never editing ``cli.py``.  What several commands share (options,
arguments, renderings) lives here, so no command imports another.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Self, TypeAlias, TypeVar

from scrollcase.errors import ResultShownError, ScrollcaseError, UsageError

if TYPE_CHECKING:  # the commands that use these import them; matrix, report and lock-check need none
    from scrollcase.console import Console
    from scrollcase.format.archive.unpack import UnpackResult
    from scrollcase.targets.gpucheck import GpuCheckResult

# Every command and its one-line help (the module's HELP; tests/unit/test_cli.py holds them equal), in the
# order `scrollcase --help` lists them.  The module is commands/<name with _ for ->.py.
COMMANDS: dict[str, str] = {
    "build": "build a box archive and its release manifest",
    "cache": "show, prune or empty the user cache (wheels, unpacked wheels, frames, bytecode)",
    "demo": "run the whole lifecycle offline on an example recipe",
    "doctor": "check this machine against the recipe's target (and show the pixi.toml rules)",
    "inspect": "report the torch build and accelerator of every environment/platform in a pixi.lock",
    "install": "install the release of a box that fits this machine from a store",
    "lock": "solve a recipe for its target and write its pixi.lock",
    "lock-check": "check committed pixi.lock files against pixi.toml and the recipe's target",
    "matrix": "emit the GitHub Actions job matrix for the recipes",
    "parity": "prove the box computes the same on every accelerator (the parity gate)",
    "publish": "publish a release to a directory or S3 bucket",
    "report": "render results for GitHub (annotations, summary, checks)",
    "schema": "print the JSON Schema of recipe.json, *.release.json or a box index",
    "trust": "set up, re-sign and rotate the keys of a store's signed metadata (TUF)",
    "unpack": "verify and unpack a box archive into a folder",
    "upgrade": "upgrade an installed box, downloading only what changed",
    "validate": "check recipes (recipe.json + folder) and report every problem",
    "verify": "verify a built release (archive digest, layout, self-test) or an installed box (--installed)",
}


def module_of(command: str) -> str:
    """The dotted name of ``command``'s module (``lock-check`` -> ``scrollcase.commands.lock_check``)."""
    return f"{__name__}.{command.replace('-', '_')}"


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


STORE_ENV = "SCROLLCASE_STORE"


@dataclass(frozen=True)
class ReleaseArgs(CommandArgs):
    """What install and upgrade both read: the store, and which of its releases may be chosen."""

    store: str | None
    endpoint_url: str | None
    version: str | None
    pre: bool
    skip_gpu_check: bool
    trusted_root: Path | None
    trust_state: Path | None


def add_trust_options(p: argparse.ArgumentParser) -> None:
    """--trusted-root and --trust-state: install and upgrade check the store against its signed metadata."""
    p.add_argument(
        "--trusted-root",
        metavar="FILE",
        type=Path,
        default=None,
        help="the store's TUF root.json shipped with the host: refuse anything the store's signed metadata does not "
        "sign, before the archive is downloaded (exit 13) (default: $SCROLLCASE_TRUSTED_ROOT)",
    )
    p.add_argument(
        "--trust-state",
        metavar="DIR",
        type=Path,
        default=None,
        help="the folder of what this host trusts of the store (default: one per store URL in the user cache)",
    )


def store_location(option: str | None) -> str:
    """--store, else $SCROLLCASE_STORE."""
    location = option if option is not None else os.environ.get(STORE_ENV)
    if location is None:
        raise UsageError(
            "install needs --store",
            fix=f"pass --store DIRECTORY|s3://bucket/prefix|https://host/path or set ${STORE_ENV}",
        )
    return location


def report_gpu(console: Console, result: GpuCheckResult) -> None:
    """The GPU check's findings on stderr: warnings always, the summary and notices as progress."""
    console.progress(f"gpu check: {result.status}: {result.summary}")
    for problem in result.problems:
        if problem.severity == "warning":
            print(problem.render(), file=console.stderr, flush=True)
        elif problem.severity == "notice":
            console.progress(problem.render())


def unpack_json(result: UnpackResult, archive: Path, seconds: float) -> dict[str, object]:
    """An unpack's result as unpack and install report it."""
    return {
        "archive": str(archive),
        "dest": str(result.dest),
        "size": result.size,
        "sha256": result.sha256,
        "files": result.files,
        "entries": result.entries,
        "uncompressedBytes": result.uncompressed_bytes,
        "relocatedFiles": result.relocated_files,
        "seconds": round(seconds, 3),
    }
