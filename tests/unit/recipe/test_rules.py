"""The cross-field rules: one rule, one message, whichever path a document takes to them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from scrollcase.recipe.loader import recipe_problems
from scrollcase.recipe.model import Recipe
from scrollcase.recipe.rules import recipe_rules
from scrollcase.targets.vocabulary import SUPPORTED, TargetSpec, accelerator_names
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


# Every rule holds for every accelerator, not only cpu and cuda: one valid recipe per supported target, then
# one thing broken at a time.
def recipe_for(spec: TargetSpec) -> dict[str, Any]:
    data = cuda_recipe()
    target: dict[str, Any] = {"platform": spec.platform, "arch": spec.arch, "accelerator": spec.accelerator}
    if spec.cuda_version:
        target["cudaVersion"] = spec.cuda_version
    else:
        del data["compatibility"]["minNvidiaDriverVersion"]
    data["target"] = target
    data["recipeId"] = f"my-model-{spec.target_id}"
    data["pythonEntryPoint"] = "venv/python.exe" if spec.is_windows else "venv/bin/python"
    data["parity"]["accelerators"] = ["cpu"] if spec.accelerator == "cpu" else ["cpu", spec.accelerator]
    return data


TARGETS = [
    TargetSpec(platform, arch, accelerator, "12.4" if accelerator == "cuda" else None)
    for (platform, arch), accelerators in SUPPORTED.items()
    for accelerator in accelerators
]
NOT_CUDA = [t for t in TARGETS if not t.is_cuda]
NOT_CPU = [t for t in TARGETS if t.accelerator != "cpu"]


def findings(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in v.path), v.message) for v in recipe_rules(data)]


@pytest.mark.parametrize("spec", TARGETS, ids=lambda t: t.target_id)
def test_a_valid_recipe_of_every_target_passes(spec: TargetSpec) -> None:
    assert recipe_rules(recipe_for(spec)) == []


@pytest.mark.parametrize("spec", NOT_CUDA, ids=lambda t: t.target_id)
def test_cuda_fields_are_refused_on_every_target_that_is_not_cuda(spec: TargetSpec) -> None:
    driver = recipe_for(spec)
    driver["compatibility"]["minNvidiaDriverVersion"] = "550.54.14"
    assert findings(driver) == [
        ("compatibility.minNvidiaDriverVersion", "minNvidiaDriverVersion is only meaningful for CUDA targets")
    ]
    cuda = recipe_for(spec)
    cuda["target"]["cudaVersion"] = "12.4"
    assert findings(cuda) == [
        ("target.cudaVersion", f"cudaVersion is only allowed for CUDA targets, not {spec.accelerator!r}")
    ]


@pytest.mark.parametrize("spec", NOT_CPU, ids=lambda t: t.target_id)
def test_parity_must_run_the_targets_own_accelerator(spec: TargetSpec) -> None:
    data = recipe_for(spec)
    data["parity"]["accelerators"] = ["cpu"]
    assert findings(data) == [
        ("parity.accelerators", f"parity must exercise the target's accelerator {spec.accelerator!r}")
    ]


@pytest.mark.parametrize("spec", TARGETS, ids=lambda t: t.target_id)
def test_every_accelerator_the_platform_lacks_is_refused_as_target_and_in_parity(spec: TargetSpec) -> None:
    allowed = SUPPORTED[(spec.platform, spec.arch)]
    for other in (a for a in accelerator_names() if a not in allowed):
        data = recipe_for(spec)
        data["target"]["accelerator"] = other
        data["target"].pop("cudaVersion", None)
        if other == "cuda":
            data["target"]["cudaVersion"] = "12.4"
        assert [path for path, _ in findings(data)] == ["target.accelerator"], other
        parity = recipe_for(spec)
        parity["parity"]["accelerators"] = [*parity["parity"]["accelerators"], other]
        assert findings(parity) == [
            (
                "parity.accelerators.2" if spec.accelerator != "cpu" else "parity.accelerators.1",
                f"{other!r} cannot run on {spec.platform}-{spec.arch}",
            )
        ], other


@pytest.mark.parametrize("spec", TARGETS, ids=lambda t: t.target_id)
def test_the_entry_point_follows_the_targets_platform(spec: TargetSpec) -> None:
    data = recipe_for(spec)
    data["pythonEntryPoint"] = "venv/bin/python" if spec.is_windows else "venv/python.exe"
    [(path, message)] = findings(data)
    assert path == "pythonEntryPoint"
    assert ("python.exe at the env root" if spec.is_windows else "only runs on Windows targets") in message


@pytest.mark.parametrize("spec", TARGETS, ids=lambda t: t.target_id)
def test_the_recipe_id_names_every_targets_own_id(spec: TargetSpec) -> None:
    data = recipe_for(spec)
    data["recipeId"] = "my-model-linux-x86_64-cuda12.8" if spec.target_id != "linux-x86_64-cuda12.8" else "x"
    [(path, message)] = findings(data)
    assert path == "recipeId" and f"'my-model-{spec.target_id}'" in message


def test_two_assets_with_one_path_are_refused() -> None:
    """Two names for one path would write the second asset over the first in the box."""
    data = cuda_recipe()
    data["assets"][1]["path"] = data["assets"][0]["path"]
    assert findings(data) == [("assets.1.path", "asset path 'my-model/weights.bin' is already used by assets[0]")]
    _, problems = recipe_problems(to_text(data), file="recipe.json")
    [problem] = problems
    assert (
        problem.key == "assets[1].path"
        and problem.fix == "give each asset path a unique value or remove the duplicate entry"
    )
