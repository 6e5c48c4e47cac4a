"""``scrollcase doctor --recipe ID``: can this machine build this recipe?  It shows pixi.toml's rules too.

The rules are ``validate``'s and ``lock-check``'s (machine-independent, all recipes at once, run in CI);
doctor runs the same function for one recipe so its report is complete, and adds what only the build
machine can tell: its platform, NVIDIA driver, free disk and pixi."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import (
    CommandArgs,
    SubParsers,
    add_command,
    add_recipes_root,
    fail_after_result,
    handler,
)
from scrollcase.console import Console
from scrollcase.errors import HostError, ManifestError, describe_path
from scrollcase.host.doctor import diagnose
from scrollcase.host.facts import HostProbes, gather_facts
from scrollcase.lock.rules import recipe_manifest_problems
from scrollcase.recipe.loader import resolve_recipe

NAME = "doctor"
HELP = "check this machine against the recipe's target (and show the pixi.toml rules)"
DESCRIPTION = (
    "Host checks for one recipe (native platform/arch, NVIDIA driver version for CUDA targets, "
    "free disk space, pixi version), after the pixi.toml rules that `validate` and `lock-check` "
    "enforce for every recipe (platforms, CUDA system requirement and cuda-version pin, pytorch "
    "build, python).  Each check is pass/warn/fail/skip; exit 3 on a pixi.toml failure, 11 on a host "
    "failure."
)


@dataclass(frozen=True)
class DoctorArgs(CommandArgs):
    recipe: str
    recipes_root: Path
    workdir: Path
    min_free_gb: float | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("--recipe", required=True, metavar="ID", help="recipe ID (folder under --recipes-root) or path")
    add_recipes_root(p)
    p.add_argument("--workdir", type=Path, default=Path(), help="where the build will write (disk check)")
    p.add_argument(
        "--min-free-gb",
        type=float,
        default=None,
        help="warn below this much free disk (default: 20 for CUDA targets, 5 otherwise)",
    )
    p.set_defaults(handler=handler(DoctorArgs, run))


def run(args: DoctorArgs, console: Console) -> int:
    recipe_dir = resolve_recipe(args.recipe, args.recipes_root)
    recipe = recipe_dir.recipe
    findings = recipe_manifest_problems(recipe_dir.manifest_file, recipe)
    console.progress(f"checking this machine for {recipe.target_id} ...")
    facts = gather_facts(HostProbes(), args.workdir, recipe.target.spec.kind)
    report = diagnose(recipe, findings, facts, args.min_free_gb, describe_path(recipe_dir.recipe_file))
    console.result(report.to_json(), report.text())
    if report.manifest:
        error: ManifestError | HostError = ManifestError(
            f"{recipe_dir.manifest_file} does not follow the rules for {recipe.target_id}",
            problems=report.manifest,
        )
        fail_after_result(console, error)
    if report.host_failures:
        fail_after_result(
            console, HostError(f"this machine cannot build {recipe.target_id}", problems=report.host_failures)
        )
    return 0
