"""doctor's report: the recipe's pixi.toml findings and this machine's checks for its target, as one model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrollcase.errors import Problem
from scrollcase.host.facts import HostCheck, HostFacts, host_checks
from scrollcase.recipe.model import Recipe


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
