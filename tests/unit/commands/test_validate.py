"""pixi.toml's rules reported by `validate` (and `lock-check`) for every recipe at once, located at pixi.toml lines.

Through the commands' own functions on real folders (tmp_path): ``validate_paths`` and ``check_folder``
are what ``scrollcase validate`` and ``scrollcase lock-check`` run for each recipe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scrollcase.commands.lock_check import check_folder
from scrollcase.commands.validate import validate_paths
from scrollcase.errors import Problem
from scrollcase.lock.rules import recipe_manifest_problems
from scrollcase.recipe.loader import parse_recipe
from tests.recipe_samples import cpu_recipe, cuda_recipe, pixi_toml, to_text
from tests.support.corpus import corpus_root, skip_without

REPO = Path(__file__).resolve().parents[3]
CORPUS = corpus_root()

TORCH_CUDA = 'pytorch = { version = "2.*", build = "cuda*" }'
SYSTEM_CUDA = '[system-requirements]\ncuda = "12.4"\n\n'


def write(root: Path, data: dict[str, Any], manifest: str) -> Path:
    """recipes/<recipeId>/ with recipe.json, pixi.toml and the parity script; returns recipe.json."""
    folder = root / "recipes" / str(data["recipeId"])
    (folder / "checks").mkdir(parents=True)
    (folder / "checks" / "parity.py").write_text("# fixture\n", encoding="utf-8")
    (folder / "pixi.toml").write_text(manifest, encoding="utf-8")
    (folder / "recipe.json").write_text(to_text(data), encoding="utf-8")
    return folder / "recipe.json"


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: dict[str, Any], manifest: str) -> list[Problem]:
    """The problems `validate` reports for one recipe, named as the CLI names them (relative to the cwd)."""
    monkeypatch.chdir(tmp_path)
    file = write(tmp_path, data, manifest).relative_to(tmp_path)
    (outcome,) = validate_paths([file])
    return list(outcome.problems)


CUDA_GOOD = pixi_toml(cuda_recipe())
CPU_GOOD = pixi_toml(cpu_recipe())
MANIFEST = "recipes/my-model-linux-x86_64-cuda12.4/pixi.toml"

# (case, pixi.toml for the CUDA 12.4 recipe, key, text of the line the problem must name, message)
CUDA_CASES = [
    (
        "pytorch without a cuda build",
        CUDA_GOOD.replace(TORCH_CUDA, 'pytorch = "2.*"'),
        "dependencies.pytorch",
        'pytorch = "2.*"',
        "pytorch must be pinned to a CUDA build",
    ),
    (
        "cuda-version of another CUDA",
        CUDA_GOOD.replace('cuda-version = "12.4.*"', 'cuda-version = "12.8.*"'),
        "dependencies.cuda-version",
        'cuda-version = "12.8.*"',
        "cuda-version must pin CUDA 12.4",
    ),
    (
        "no system-requirements cuda, table kept",
        CUDA_GOOD.replace('cuda = "12.4"\n', ""),
        "system-requirements.cuda",
        "[system-requirements]",
        "the CUDA version is not declared as a system requirement",
    ),
    (
        "no system-requirements table at all",
        CUDA_GOOD.replace(SYSTEM_CUDA, ""),
        "system-requirements.cuda",
        "platforms = ",
        "the CUDA version is not declared as a system requirement",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "key", "needle", "message"), [c[1:] for c in CUDA_CASES], ids=[c[0] for c in CUDA_CASES]
)
def test_validate_reports_a_cuda_recipes_pixi_toml_rule_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest: str, key: str, needle: str, message: str
) -> None:
    (problem,) = validated(tmp_path, monkeypatch, cuda_recipe(), manifest)
    assert (problem.file, problem.key) == (MANIFEST, key)
    assert problem.line == line_of(manifest, needle)
    assert message in problem.message and problem.fix


def test_validate_reports_a_cpu_recipe_that_declares_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = CPU_GOOD.replace("[dependencies]", SYSTEM_CUDA + "[dependencies]")
    (problem,) = validated(tmp_path, monkeypatch, cpu_recipe(), manifest)
    assert problem.file == "recipes/my-model-linux-x86_64-cpu/pixi.toml"
    assert (problem.key, problem.line) == ("system-requirements.cuda", line_of(manifest, 'cuda = "12.4"'))
    assert problem.message == "a cpu target must not require CUDA" and problem.value == "12.4"
    assert problem.fix == "remove cuda from [system-requirements]"


def test_validate_reports_every_rule_of_one_file_in_line_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = (
        CUDA_GOOD.replace(SYSTEM_CUDA, "")
        .replace(TORCH_CUDA, 'pytorch = "2.*"')
        .replace('cuda-version = "12.4.*"', 'cuda-version = "12.8.*"')
    )
    problems = validated(tmp_path, monkeypatch, cuda_recipe(), manifest)
    assert [(p.key, p.line) for p in problems] == [
        ("system-requirements.cuda", line_of(manifest, "platforms")),
        ("dependencies.pytorch", line_of(manifest, "pytorch")),
        ("dependencies.cuda-version", line_of(manifest, "cuda-version")),
    ]


def test_validate_passes_manifests_that_follow_the_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert validated(tmp_path, monkeypatch, cuda_recipe(), CUDA_GOOD) == []
    (tmp_path / "recipes").rename(tmp_path / "cuda")
    assert validated(tmp_path, monkeypatch, cpu_recipe(), CPU_GOOD) == []


def test_validate_locates_a_pixi_toml_that_is_not_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (problem,) = validated(tmp_path, monkeypatch, cuda_recipe(), CUDA_GOOD.replace("[dependencies]", "[dependencies"))
    assert problem.file == MANIFEST and problem.line == line_of(CUDA_GOOD, "[dependencies]")
    assert problem.fix == "fix the TOML syntax at that position"


def test_invalid_recipe_json_leaves_pixi_toml_unjudged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a valid target there is nothing to check pixi.toml against: only recipe.json's problem."""
    data = cuda_recipe()
    data["target"]["cudaVersion"] = "12.x"
    problems = validated(tmp_path, monkeypatch, data, "not toml [")
    assert problems and all(p.file and p.file.endswith("recipe.json") for p in problems)


def test_validate_reports_every_recipe_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    files = [
        write(tmp_path, cuda_recipe(), CUDA_GOOD.replace(TORCH_CUDA, 'pytorch = "2.*"')),
        write(tmp_path, cpu_recipe(), CPU_GOOD.replace("[dependencies]", SYSTEM_CUDA + "[dependencies]")),
    ]
    outcomes = validate_paths([f.relative_to(tmp_path) for f in files])
    assert [(o.recipe_id, [p.key for p in o.problems]) for o in outcomes] == [
        ("my-model-linux-x86_64-cuda12.4", ["dependencies.pytorch"]),
        ("my-model-linux-x86_64-cpu", ["system-requirements.cuda"]),
    ]


def test_lock_check_reports_the_same_rule_beside_its_lock_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule, one message: lock-check's finding is validate's, and the lock's own problem comes with it."""
    manifest = CUDA_GOOD.replace(TORCH_CUDA, 'pytorch = "2.*"')
    (from_validate,) = validated(tmp_path, monkeypatch, cuda_recipe(), manifest)
    outcome = check_folder(Path("recipes/my-model-linux-x86_64-cuda12.4"), {})
    assert from_validate in outcome.problems
    assert [p.file for p in outcome.problems] == [MANIFEST, "recipes/my-model-linux-x86_64-cuda12.4/pixi.lock"]


def test_the_example_recipes_follow_the_rules() -> None:
    """Users copy recipes/: every example passes validate's pixi.toml rules."""
    files = sorted((REPO / "recipes").glob("*/recipe.json"))
    assert len(files) >= 6
    outcomes = validate_paths(files)
    assert [(o.recipe_id, o.problems) for o in outcomes if o.problems] == []


@skip_without(CORPUS)
def test_every_finding_on_real_world_manifests_lands_on_a_line_of_its_key(tmp_path: Path) -> None:
    """Real workspaces (multi-platform, features, TOML 1.1 tables, [project]) checked as a CUDA 12.4 recipe's
    pixi.toml: each finding names the file and a line that sets its key or opens the table it belongs in."""
    recipe = parse_recipe(to_text(cuda_recipe()))
    files = sorted(CORPUS.glob("*/pixi.toml"))
    assert len(files) >= 10
    for file in files:
        lines = file.read_text(encoding="utf-8").splitlines()
        problems = recipe_manifest_problems(file, recipe)
        assert problems, file.parent.name  # none of them is a one-target recipe
        assert not [p for p in problems if p.message.startswith("must be")], file.parent.name  # all readable
        for problem in problems:
            assert problem.file and problem.file.endswith(f"{file.parent.name}/pixi.toml")
            assert problem.line is not None, (file.parent.name, problem.key)
            text = lines[problem.line - 1]
            name = (problem.key or "").rsplit(".", 1)[-1]
            assert name in text or text.lstrip().startswith("[") or "platforms" in text, (file.parent.name, text)


@skip_without(CORPUS)
def test_a_real_world_cuda_workspace_fails_validate_on_its_own_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytorch-gpu-pixi-example's pixi.toml, cut down to linux-64 for a CUDA 12.4 recipe: its unpinned pytorch
    build and its CUDA 12.0 requirement are exactly what validate must catch on a CPU runner."""
    source = (CORPUS / "matthewfeickert__pytorch-gpu-pixi-example" / "pixi.toml").read_text(encoding="utf-8")
    manifest = source.replace('platforms = ["linux-64", "osx-arm64", "win-64"]', 'platforms = ["linux-64"]')
    assert manifest != source
    problems = validated(tmp_path, monkeypatch, cuda_recipe(), manifest)
    by_key = {p.key: p for p in problems}
    assert by_key["dependencies.pytorch"].line == line_of(manifest, "pytorch = ")
    assert by_key["system-requirements.cuda"].line == line_of(manifest, 'cuda = "12.0"')
    assert all(p.file == MANIFEST for p in problems)


def test_entries_scrollcase_cannot_read_are_all_located_and_validate_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dependency that is a number (also in a [target.*] table, read only when the rules run), a version
    that is not text, a platforms entry that is neither subdir nor table: each at its line, in one run,
    beside the other recipe's findings (validate used to stop at the first with no file and no line)."""
    monkeypatch.chdir(tmp_path)
    cuda = (
        CUDA_GOOD.replace('cuda-version = "12.4.*"', "cuda-version = { version = 12 }")
        + "\n[target.linux-64.dependencies]\nnumpy = 5\n"
    )
    cpu = CPU_GOOD.replace('platforms = ["linux-64"]', "platforms = [5]") + "scipy = 3\n"
    files = [write(tmp_path, cuda_recipe(), cuda), write(tmp_path, cpu_recipe(), cpu)]
    outcomes = validate_paths([f.relative_to(tmp_path) for f in files])
    found = [(p.file, p.key, p.line, p.value) for o in outcomes for p in o.problems]
    cpu_file = "recipes/my-model-linux-x86_64-cpu/pixi.toml"
    assert found == [
        (MANIFEST, "dependencies.cuda-version", line_of(cuda, "cuda-version"), "{'version': 12}"),
        (MANIFEST, "target.linux-64.dependencies.numpy", line_of(cuda, "numpy"), "5"),
        (cpu_file, "workspace.platforms", line_of(cpu, "platforms"), "5"),
        (cpu_file, "dependencies.scipy", line_of(cpu, "scipy"), "3"),
    ]
    fixes = [p.fix or "" for o in outcomes for p in o.problems]
    assert fixes[1] == 'write numpy = "1.*" or numpy = { version = "1.*", build = "..." }'
    assert "platforms = [" in fixes[2]


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('platforms = ["linux-64"]', 'platforms = "linux-64"', "workspace.platforms"),
        ("[dependencies]\n", "[other]\n", "dependencies"),
        ("[workspace]\n", 'system-requirements = "cuda"\n[workspace]\n', "system-requirements"),
    ],
    ids=["platforms a string", "dependencies a string", "system-requirements a string"],
)
def test_a_table_or_list_written_as_a_string_is_located(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, key: str
) -> None:
    manifest = CPU_GOOD.replace(old, new)
    if key == "dependencies":  # [dependencies] renamed away, then set at the top level as a string
        manifest = 'dependencies = "python"\n' + manifest
    assert manifest != CPU_GOOD
    problems = validated(tmp_path, monkeypatch, cpu_recipe(), manifest)
    assert [(p.key, p.line) for p in problems] == [(key, line_of(manifest, key.split(".")[-1] + " ="))]
    assert problems[0].message in ("must be a list", "must be a table")


def test_validate_inside_the_recipe_folder_names_pixi_toml_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = CUDA_GOOD.replace(TORCH_CUDA, 'pytorch = "2.*"')
    folder = write(tmp_path, cuda_recipe(), manifest).parent
    monkeypatch.chdir(folder)
    for typed in (Path("recipe.json"), Path(".")):
        (outcome,) = validate_paths([typed])
        assert [(p.file, p.line) for p in outcome.problems] == [("pixi.toml", line_of(manifest, "pytorch"))]
    monkeypatch.chdir(tmp_path)
    (outcome,) = validate_paths([folder])  # absolute, inside the working directory: shown relative to it
    assert [p.file for p in outcome.problems] == [MANIFEST]
