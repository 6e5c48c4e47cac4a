"""``scrollcase inspect PATH/TO/pixi.lock``: which torch each (environment, platform) locks, and for what."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import describe_path
from scrollcase.lock.read import LockFile, load_lock
from scrollcase.targets.classify import classify_torch

NAME = "inspect"
HELP = "report the torch build and accelerator of every environment/platform in a pixi.lock"
DESCRIPTION = (
    "Read a pixi.lock (format versions 3 to 7, conda and PyPI records) and report, for every "
    "(environment, platform), the torch provider, version, build and the accelerator the build targets "
    "(cudaX.Y or cpu).  Needs no network and no pixi."
)


@dataclass(frozen=True)
class InspectArgs(CommandArgs):
    lock: Path
    environment: tuple[str, ...] | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("lock", type=Path, metavar="PATH", help="a pixi.lock, or a folder holding one")
    p.add_argument(
        "-e", "--environment", action="append", default=None, help="only this environment (repeatable; default: all)"
    )
    p.set_defaults(handler=handler(InspectArgs, run))


def report(lock: LockFile) -> dict[str, Any]:
    """The ``--json`` document: one entry per (environment, platform), in lock order."""
    rows: list[dict[str, Any]] = []
    for env in lock.environments.values():
        for platform, packages in env.packages.items():
            rows.append(
                {
                    "environment": env.name,
                    "platform": platform,
                    "subdir": lock.subdir_of(platform),
                    "torch": classify_torch(packages).to_json(),
                }
            )
    return {"lockVersion": lock.version, "environments": rows}


def render(data: dict[str, Any], file: str) -> str:
    lines = [f"{file}: lock format v{data['lockVersion']}"]
    for row in data["environments"]:
        torch = row["torch"]
        where = row["platform"]
        if where != row["subdir"]:
            where += f" ({row['subdir']})"
        if torch["provider"] is None:
            what = "no torch"
        else:
            build = f" {torch['build']}" if torch["build"] else ""
            what = f"{torch['accelerator']:<9} torch {torch['version']}{build} [{torch['provider']}]"
        lines.append(f"  {row['environment']:<24} {where:<24} {what}")
    return "\n".join(lines)


def run(args: InspectArgs, console: Console) -> int:
    path: Path = args.lock / "pixi.lock" if args.lock.is_dir() else args.lock
    lock = load_lock(path)
    data = report(lock)
    if args.environment:
        data["environments"] = [r for r in data["environments"] if r["environment"] in args.environment]
    console.result(data, render(data, describe_path(path) or str(path)))
    return 0
