"""``scrollcase verify RELEASE.json``: check size/sha256, unpack into a temp folder, check the layout,
optionally re-run the self-test with the box's own interpreter.  ``scrollcase verify --installed DEST``:
report every file of an installed box added, removed or changed (content or mode) since install, and a box
moved away from where it was installed (exit 8 when any)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import CommandArgs, SubParsers, add_command, fail_after_result, handler
from scrollcase.console import Console
from scrollcase.errors import IntegrityError, UsageError
from scrollcase.io.pathcheck import require_file_path

NAME = "verify"
HELP = "verify a built release (archive digest, layout, self-test) or an installed box (--installed)"
DESCRIPTION = (
    "Check the archive's size and sha256 against the release manifest before "
    "extracting, extract safely into a fresh temporary folder, check box.json "
    "and the interpreter, and with --self-test re-run the self-test with the "
    "box's own interpreter.  The temporary folder is removed afterwards.  "
    "With --installed DEST instead: hash every file of the box installed in DEST and report each one "
    "added, removed or changed (content or mode: an executable, setuid, setgid or sticky bit) since install, "
    "and a box moved away from the folder it was installed in (exit code 8 when any is)."
)


@dataclass(frozen=True)
class VerifyArgs(CommandArgs):
    release: Path | None
    installed: Path | None
    self_test: bool
    junit: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("release", type=Path, nargs="?", help="the .release.json written by `scrollcase build`")
    p.add_argument(
        "--installed", type=Path, default=None, metavar="DEST", help="verify the box installed in DEST instead"
    )
    p.add_argument("--self-test", action="store_true", help="re-run the recipe's self-test in the unpacked box")
    p.add_argument("--junit", type=Path, default=None, help="write the self-test as JUnit XML to PATH")
    p.set_defaults(handler=handler(VerifyArgs, run))


def run(args: VerifyArgs, console: Console) -> int:
    if (args.release is None) == (args.installed is None):
        raise UsageError(
            "verify needs either RELEASE.json or --installed DEST (one of them)",
            fix="`scrollcase verify dist/BOX.release.json` or `scrollcase verify --installed DEST`",
        )
    if args.installed is not None:
        return run_installed(args.installed, console)
    assert args.release is not None
    from scrollcase.build.verify import verify_release

    if args.junit is not None:
        require_file_path(args.junit, "--junit")
    console.progress(f"verifying {args.release}")
    report = verify_release(args.release, self_test=args.self_test, junit=args.junit)
    lines = [f"ok: {report.archive.name}"] + [f"  ok  {check}" for check in report.layout_checks]
    if report.self_test is not None:
        lines += [f"  ok  self-test: {c.name} ({c.durationSeconds:.2f}s)" for c in report.self_test.checks]
    console.result(report.to_json(), "\n".join(lines))
    return 0


def run_installed(dest: Path, console: Console) -> int:
    from scrollcase.format.receipt import verify_installed

    console.progress(f"hashing the box installed in {dest}")
    report = verify_installed(dest)
    head = f"{report.box.boxId} {report.box.version} {report.box.targetId} in {dest}: {report.checked} entries"
    unchecked = "" if report.modes_checked else " (its receipt records no modes: not checked)"
    if report.passed:
        console.result(report.to_json(), f"ok: {head}, none changed since install{unchecked}")
        return 0
    lines = [
        f"{c.change:<8} {c.path}"
        + (f" ({c.expected} -> {c.found})" if c.change == "mode" else "")
        + (f" (a shared file: changed in {', '.join(c.sharedWith)})" if c.sharedWith else "")
        for c in report.changes
    ]
    moved = [f"moved    installed in {report.installed_at}, now in {dest}"] if report.moved else []
    summary = f"{head}, {len(report.changes)} changed since install{unchecked}" + (", moved" if report.moved else "")
    console.result(report.to_json(), "\n".join([f"{summary}:", *moved, *lines]))
    fail_after_result(console, installed_error(len(report.changes), report.moved, dest, report.installed_at))


def installed_error(changed: int, moved: bool, dest: Path, installed_at: str) -> IntegrityError:
    """The one error of a failed ``verify --installed``: the files changed, and the box moved, with the fix."""
    if not moved:
        return IntegrityError(
            f"{changed} file(s) of the box in {dest} changed since install",
            fix="reinstall the box (or restore those files from its archive)",
        )
    also = f"; {changed} file(s) changed since install" if changed else ""
    return IntegrityError(
        f"the box in {dest} was installed in {installed_at}: its relocated files still name that folder{also}",
        fix=f"run `scrollcase unpack` (or `scrollcase install`) again into {dest}, or move it back to {installed_at}",
    )
