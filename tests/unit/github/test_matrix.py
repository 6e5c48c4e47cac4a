from __future__ import annotations

import json

import pytest

from scrollcase.errors import GitHubError, UsageError
from scrollcase.github.matrix import (
    MAX_JOBS,
    RecipeEntry,
    parse_runner_map,
    plan_matrix,
    runner_labels,
    select,
)
from tests.github_helpers import recipe


def entry(box: str, target: str) -> RecipeEntry:
    r = recipe(box, target)
    return RecipeEntry(path=f"recipes/{r.recipeId}", recipe=r)


ENTRIES = [
    entry("tiny-mlp", t)
    for t in (
        "linux-x86_64-cuda12.4",
        "linux-x86_64-cpu",
        "windows-x86_64-cpu",
        "osx-arm64-metal",
        "windows-x86_64-cuda12.4",
    )
]


def test_default_labels_per_target() -> None:
    labels = {e.recipe.target_id: runner_labels(e.recipe) for e in ENTRIES}
    assert labels["linux-x86_64-cuda12.4"] == ["self-hosted", "linux", "x64", "gpu", "cuda-12.4"]
    assert labels["windows-x86_64-cuda12.4"] == ["self-hosted", "windows", "x64", "gpu", "cuda-12.4"]
    assert labels["linux-x86_64-cpu"] == ["ubuntu-24.04"]
    assert labels["windows-x86_64-cpu"] == ["windows-2022"]
    assert labels["osx-arm64-metal"] == ["macos-15"]


def test_entry_fields_and_order() -> None:
    plan = plan_matrix(ENTRIES)
    ids = [e["recipeId"] for e in plan.include]
    assert ids == sorted(ids)
    cuda = next(e for e in plan.include if e["accelerator"] == "cuda" and e["platform"] == "linux")
    assert cuda == {
        "recipeId": "tiny-mlp-linux-x86_64-cuda12.4",
        "boxId": "tiny-mlp",
        "targetId": "linux-x86_64-cuda12.4",
        "version": "1.0.0",
        "platform": "linux",
        "arch": "x86_64",
        "accelerator": "cuda",
        "cudaVersion": "12.4",
        "runs-on": ["self-hosted", "linux", "x64", "gpu", "cuda-12.4"],
        "selfHosted": True,
        "parity": False,
        "recipePath": "recipes/tiny-mlp-linux-x86_64-cuda12.4",
    }
    assert json.loads(json.dumps(plan.matrix())) == {"include": list(plan.include)}
    assert not plan.empty


def test_runner_map_overrides_defaults_first_match_wins() -> None:
    runner_map = parse_runner_map(
        'version: 1\nrunners:\n  "linux-*-cuda*": [self-hosted, h100, "cuda-{cudaVersion}"]\n'
        '  "*-cpu": [my-cpu-pool]\n',
        "runners.yml",
    )
    by_target = {e["targetId"]: e["runs-on"] for e in plan_matrix(ENTRIES, runner_map=runner_map).include}
    assert by_target["linux-x86_64-cuda12.4"] == ["self-hosted", "h100", "cuda-12.4"]
    assert by_target["windows-x86_64-cpu"] == ["my-cpu-pool"]
    assert by_target["windows-x86_64-cuda12.4"][0:2] == ["self-hosted", "windows"]  # default kept


def test_runner_map_is_validated_with_file_and_key() -> None:
    with pytest.raises(UsageError) as info:
        parse_runner_map("version: 2\nrunners:\n  linux-x86_64-cpu: []\nextra: 1\n", "map.yml")
    keys = {p.key for p in info.value.problems}
    assert {"version", "runners.linux-x86_64-cpu", "extra"} <= keys
    assert all(p.file == "map.yml" and p.fix for p in info.value.problems)
    with pytest.raises(UsageError) as bad:
        parse_runner_map("runners: [unclosed\n", "map.yml")
    # The YAML reader reports where it stopped: the end of the one-line text, line 2.
    assert (bad.value.problems[0].file, bad.value.problems[0].line) == ("map.yml", 2)


def test_changed_files_select_only_their_recipes() -> None:
    changed = ["recipes/tiny-mlp-linux-x86_64-cpu/pixi.lock", "README.md", "recipes/README.md"]
    selected, reason = select(ENTRIES, changed)
    assert [e.recipe.recipeId for e in selected] == ["tiny-mlp-linux-x86_64-cpu"]
    assert "1 recipe" in reason


def test_prefix_of_another_recipe_folder_is_not_a_match() -> None:
    a, b = entry("tiny", "linux-x86_64-cpu"), entry("tiny-mlp", "linux-x86_64-cpu")
    selected, _ = select([a, b], [f"{b.path}/recipe.json"])
    assert selected == [b]


def test_global_change_selects_everything() -> None:
    """By default only the workflows affect every recipe: an adopter's repository has no scrollcase/ or
    actions/, and its pyproject.toml (if any) builds no box."""
    for name in (".github/workflows/boxes.yml", ".github/workflows/nested/x.yaml"):
        selected, reason = select(ENTRIES, [name])
        assert len(selected) == len(ENTRIES) and name in reason
    for name in ("scrollcase/github/matrix.py", "pyproject.toml", "actions/build/action.yml", ".github/CODEOWNERS"):
        assert select(ENTRIES, [name])[0] == []
    scrollcase_own = ["pyproject.toml", "scrollcase/*", "actions/*"]
    for name in ("scrollcase/github/matrix.py", "pyproject.toml", "actions/build/action.yml"):
        assert len(select(ENTRIES, [name], global_patterns=scrollcase_own)[0]) == len(ENTRIES)
    selected, _ = select(ENTRIES, [".github/runners.yml"], global_patterns=[".github/runners.yml"])
    assert len(selected) == len(ENTRIES)
    assert select(ENTRIES, [".github/workflows/boxes.yml"], global_patterns=[])[0] == []


def test_no_relevant_change_gives_explicit_empty_matrix() -> None:
    plan = plan_matrix(ENTRIES, changed=["docs/index.md"])
    assert plan.empty and plan.matrix() == {"include": []}


def test_hosted_only_leaves_out_self_hosted_jobs() -> None:
    plan = plan_matrix(ENTRIES, hosted_only=True)
    assert plan.include and not any(e["selfHosted"] for e in plan.include)
    assert "self-hosted job(s) left out" in plan.reason


def test_more_than_256_jobs_is_a_clear_error() -> None:
    many = [RecipeEntry(path=f"recipes/b{i}", recipe=recipe(f"b{i}", "linux-x86_64-cpu")) for i in range(MAX_JOBS + 1)]
    assert len(plan_matrix(many[:MAX_JOBS]).include) == MAX_JOBS
    with pytest.raises(GitHubError) as info:
        plan_matrix(many)
    assert "257 jobs" in info.value.message and "256" in info.value.message and info.value.fix
