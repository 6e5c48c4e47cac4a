"""``scrollcase verify RELEASE.json``: check size/sha256, unpack into a temp folder, check the layout,
optionally re-run the self-test with the box's own interpreter."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.io.pathcheck import require_file_path

NAME = "verify"
HELP = "verify a built release (archive digest, layout, self-test)"
DESCRIPTION = (
    "Check the archive's size and sha256 against the release manifest before "
    "extracting, extract safely into a fresh temporary folder, check box.json "
    "and the interpreter, and with --self-test re-run the self-test with the "
    "box's own interpreter.  The temporary folder is removed afterwards."
)


@dataclass(frozen=True)
class VerifyArgs(CommandArgs):
    release: Path
    self_test: bool
    junit: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("release", type=Path, help="the .release.json written by `scrollcase build`")
    p.add_argument("--self-test", action="store_true", help="re-run the recipe's self-test in the unpacked box")
    p.add_argument("--junit", type=Path, default=None, help="write the self-test as JUnit XML to PATH")
    p.set_defaults(handler=handler(VerifyArgs, run))


def run(args: VerifyArgs, console: Console) -> int:
    from scrollcase.box.verify import verify_release

    if args.junit is not None:
        require_file_path(args.junit, "--junit")
    console.progress(f"verifying {args.release}")
    report = verify_release(args.release, self_test=args.self_test, junit=args.junit)
    lines = [f"ok: {report.archive.name}"] + [f"  ok  {check}" for check in report.layout_checks]
    if report.self_test is not None:
        lines += [f"  ok  self-test: {c.name} ({c.durationSeconds:.2f}s)" for c in report.self_test.checks]
    console.result(report.to_json(), "\n".join(lines))
    return 0
