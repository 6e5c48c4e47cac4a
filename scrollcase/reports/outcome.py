"""What one check (``validate``, ``lock-check``) found for one recipe: the shared result model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scrollcase.errors import Problem
from scrollcase.reports.junit import JUnitCase

D = TypeVar("D")


@dataclass(frozen=True)
class RecipeOutcome(Generic[D]):
    """One recipe's problems, and ``detail``: what the check learned besides them (None when it could
    not get that far, e.g. a file did not parse)."""

    path: str
    recipe_id: str | None
    problems: tuple[Problem, ...]
    detail: D | None = None

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_json(self, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The outcome as JSON; ``facts`` (the check's own, rendered from ``detail``) go before the problems."""
        return {
            "path": self.path,
            "recipeId": self.recipe_id,
            "ok": self.ok,
            **(facts or {}),
            "problems": [p.to_json() for p in self.problems],
        }


def failures(outcomes: Sequence[RecipeOutcome[D]]) -> list[RecipeOutcome[D]]:
    """The outcomes with at least one error."""
    return [o for o in outcomes if not o.ok]


def junit_cases(outcomes: Sequence[RecipeOutcome[D]], check: str, checked_file: str) -> list[JUnitCase]:
    """JUnit cases for a check's outcomes: one passed case per sound recipe, one failed case per error.

    A case per error, not per recipe, because a JUnit case has one file and line, and each error is
    annotated where it is (``scrollcase report junit``); its fix goes into the case's details.
    ``checked_file`` names the file a passed case stands for (e.g. ``pixi.lock``).
    """
    cases: list[JUnitCase] = []
    for outcome in outcomes:
        recipe = outcome.recipe_id or outcome.path
        errors = [p for p in outcome.problems if p.severity == "error"]
        if not errors:
            notes = "\n".join(p.render() for p in outcome.problems)
            file = f"{outcome.path.rstrip('/')}/{checked_file}"
            cases.append(JUnitCase(name=check, classname=recipe, passed=True, output=notes, file=file))
        for number, problem in enumerate(errors, 1):
            message = f"{problem.key}: {problem.message}" if problem.key else problem.message
            if problem.value is not None:
                message += f" (got {problem.value})"
            details = f"fix: {problem.fix}" if problem.fix else ""
            name = f"{check} [{number}/{len(errors)}]" if len(errors) > 1 else check
            cases.append(
                JUnitCase(
                    name=name,
                    classname=recipe,
                    passed=False,
                    message=message,
                    output=details,
                    file=problem.file or outcome.path,
                    line=problem.line,
                )
            )
    return cases
