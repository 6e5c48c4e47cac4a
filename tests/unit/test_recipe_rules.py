"""The cross-field rules: one rule, one message, whichever path a document takes to them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from scrollcase.recipe.loader import recipe_problems
from scrollcase.recipe.model import Recipe
from scrollcase.recipe.rules import recipe_rules
from tests.recipe_samples import cpu_recipe, cuda_recipe, to_text


def _osx_cuda(data: dict[str, Any]) -> None:
    data["target"] = {"platform": "osx", "arch": "arm64", "accelerator": "cuda", "cudaVersion": "12.4"}


def _recipe_id(data: dict[str, Any]) -> None:
    data["recipeId"] = "my-model-linux-x86_64-cuda12.8"


def _duplicate_asset(data: dict[str, Any]) -> None:
    data["assets"][1]["name"] = "weights"


def _parity_without_target(data: dict[str, Any]) -> None:
    data["parity"]["accelerators"] = ["cpu"]


def _driver_on_cpu(data: dict[str, Any]) -> None:
    data["compatibility"]["minNvidiaDriverVersion"] = "550.54.14"


CASES: list[tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]] = [
    (cuda_recipe, _osx_cuda),
    (cuda_recipe, _recipe_id),
    (cuda_recipe, _duplicate_asset),
    (cuda_recipe, _parity_without_target),
    (cpu_recipe, _driver_on_cpu),
]


@pytest.mark.parametrize(("base", "mutate"), CASES, ids=[m.__name__.strip("_") for _, m in CASES])
def test_file_and_code_get_the_same_message_and_fix(
    base: Callable[[], dict[str, Any]], mutate: Callable[[dict[str, Any]], None]
) -> None:
    data = base()
    mutate(data)
    [violation] = recipe_rules(data)
    recipe, [problem] = recipe_problems(to_text(data), file="recipe.json")
    assert recipe is None
    assert (problem.message, problem.fix) == (violation.message, violation.fix)
    with pytest.raises(ValidationError) as info:
        Recipe.model_validate(data)  # built in code: the model's validators run the same rule
    [error] = info.value.errors()
    assert error["msg"].endswith(f": {violation.message}") and error["ctx"]["fix"] == violation.fix


def test_every_cross_field_finding_comes_beside_a_field_error() -> None:
    data = cuda_recipe()
    _osx_cuda(data)
    _duplicate_asset(data)
    data["compatibility"]["minRamGb"] = "lots"
    _, problems = recipe_problems(to_text(data), file="recipe.json")
    assert {p.key for p in problems} == {"target.accelerator", "assets[1].name", "compatibility.minRamGb"}
