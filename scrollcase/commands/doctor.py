"""``scrollcase doctor --recipe ID``: can this machine build this recipe, and is its pixi.toml right?"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollcase.console import Console
from scrollcase.errors import HostError, ManifestError, Problem, describe_path
from scrollcase.host.facts import HostCheck, HostFacts, HostProbes, gather_facts, host_checks
from scrollcase.pixi.manifest import load_manifest
from scrollcase.pixi.rules import manifest_problems
from scrollcase.recipe.loader import resolve_recipe
from scrollcase.recipe.model import Recipe

NAME = "doctor"


@dataclass(frozen=True)
class DoctorReport:
    recipe: Recipe
    manifest: tuple[Problem, ...]
    host: tuple[HostCheck, ...]
    recipe_file: str | None = None

    @property
    def checks(self) -> list[HostCheck]:
        """The manifest findings as checks, then the host checks."""
        if not self.manifest:
            ok = HostCheck(
                "pixi.toml",
                "pass",
                f"platforms, CUDA declarations, pytorch build and python follow the rules for {self.recipe.target_id}",
            )
            return [ok, *self.host]
        failed = [
            HostCheck(
                f"pixi.toml {p.key or ''}".strip(),
                "fail",
                f"{p.location()}: {p.message}" + (f" (got {p.value})" if p.value else ""),
                p.fix,
            )
            for p in self.manifest
        ]
        return [*failed, *self.host]

    @property
    def host_failures(self) -> list[Problem]:
        # Host findings belong to no file; they point at recipe.json, whose target they concern.
        return [
            Problem(message=c.message, file=self.recipe_file, key=c.name, fix=c.fix)
            for c in self.host
            if c.status == "fail"
        ]

    @property
    def ok(self) -> bool:
        return not self.manifest and not self.host_failures

    def to_json(self) -> dict[str, Any]:
        return {
            "recipeId": self.recipe.recipeId,
            "targetId": self.recipe.target_id,
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
        }

    def text(self) -> str:
        width = max(len(c.name) for c in self.checks)
        lines = [f"doctor {self.recipe.recipeId} (target {self.recipe.target_id})"]
        for check in self.checks:
            lines.append(f"  {check.status:<5} {check.name:<{width}}  {check.message}")
            if check.fix and check.status != "pass":
                lines.append(f"  {'':<5} {'':<{width}}  fix: {check.fix}")
        counts = {s: sum(c.status == s for c in self.checks) for s in ("pass", "warn", "fail", "skip")}
        lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
        return "\n".join(lines)


def diagnose(
    recipe: Recipe,
    manifest_findings: list[Problem],
    facts: HostFacts,
    min_free_gb: float | None = None,
    recipe_file: str | None = None,
) -> DoctorReport:
    """Combine manifest findings and host facts into the report (pure)."""
    checks = tuple(host_checks(facts, recipe, min_free_gb))
    return DoctorReport(recipe, tuple(manifest_findings), checks, recipe_file)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        NAME,
        parents=[common],
        help="check pixi.toml against the recipe and this machine against the target",
        description="Static checks of the recipe's pixi.toml (platforms, CUDA system requirement and "
        "cuda-version pin, pytorch build, python) and host checks (native platform/arch, NVIDIA driver "
        "version for CUDA targets, free disk space, pixi version).  Each check is pass/warn/fail/skip; exit "
        "3 on a pixi.toml failure, 11 on a host failure.",
    )
    p.add_argument("--recipe", required=True, metavar="ID", help="recipe ID (folder under --recipes-root) or path")
    p.add_argument("--recipes-root", type=Path, default=Path("recipes"), help="where recipes live (default: recipes)")
    p.add_argument("--workdir", type=Path, default=Path(), help="where the build will write (disk check)")
    p.add_argument(
        "--min-free-gb",
        type=float,
        default=None,
        help="warn below this much free disk (default: 20 for CUDA targets, 5 otherwise)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    recipe_dir = resolve_recipe(args.recipe, args.recipes_root)
    recipe = recipe_dir.recipe
    findings = manifest_problems(load_manifest(recipe_dir.manifest_file), recipe)
    console.progress(f"checking this machine for {recipe.target_id} ...")
    facts = gather_facts(HostProbes(), args.workdir, recipe.target.spec.is_cuda)
    report = diagnose(recipe, findings, facts, args.min_free_gb, describe_path(recipe_dir.recipe_file))
    if console.json_mode:
        console.result(report.to_json())
        if report.manifest:
            return ManifestError.exit_code
        return HostError.exit_code if report.host_failures else 0
    console.result(None, report.text())
    if report.manifest:
        raise ManifestError(
            f"{recipe_dir.manifest_file} does not follow the rules for {recipe.target_id}",
            problems=report.manifest,
        )
    if report.host_failures:
        raise HostError(f"this machine cannot build {recipe.target_id}", problems=report.host_failures)
    return 0
