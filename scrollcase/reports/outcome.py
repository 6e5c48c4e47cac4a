"""What one check (``validate``, ``lock-check``) found for one recipe: the shared result model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scrollcase.errors import Problem

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
