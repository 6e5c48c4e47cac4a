"""recipe.json validation: a table of bad recipes, each checked for JSON path, line, value and fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scrollcase.errors import Problem, RecipeError
from scrollcase.recipe.loader import (
    MAX_RECIPE_BYTES,
    folder_problems,
    load_recipe,
    parse_recipe,
    read_recipe_bytes,
    recipe_problems,
)
from scrollcase.recipe.model import Recipe, recipe_rules
from tests.recipe_samples import cpu_recipe, cuda_recipe, to_text

Mutation = Callable[[dict[str, Any]], None]


def line_containing(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line containing ``needle`` (computed independently)."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(hits) >= occurrence, f"{needle!r} not in text"
    return hits[occurrence - 1]


@dataclass(frozen=True)
class Bad:
    id: str
    mutate: Mutation
    key: str | None
    needle: str  # a text fragment on the line the problem must point at
    message: str = ""  # a fragment the message must contain
    fix: str = ""  # a fragment the fix must contain
    value: str | None = None  # a fragment the rendered bad value must contain
    base: Callable[[], dict[str, Any]] = cuda_recipe
    occurrence: int = 1


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _delete(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[part]
        del node[last]

    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        for m in mutations:
            m(data)

    return mutate


def _osx_cuda(data: dict[str, Any]) -> None:
    data["target"] = {"platform": "osx", "arch": "arm64", "accelerator": "cuda", "cudaVersion": "12.4"}


BAD: list[Bad] = [
    Bad(
        "unknown-key-top",
        _set("pythonVersoin", "3.11"),
        "pythonVersoin",
        '"pythonVersoin"',
        "did you mean 'pythonVersion'",
        "rename 'pythonVersoin' to 'pythonVersion'",
    ),
    Bad(
        "unknown-key-nested",
        _set("target.cudaversion", "12.4"),
        "target.cudaversion",
        '"cudaversion"',
        "did you mean 'cudaVersion'",
        "cudaVersion",
    ),
    Bad(
        "unknown-key-selftest",
        _set("selfTest.pythoncode", "x"),
        "selfTest.pythoncode",
        '"pythoncode"',
        "did you mean 'pythonCode'",
        "pythonCode",
    ),
    Bad("unknown-key-no-match", _set("zzz", 1), "zzz", '"zzz"', "unknown field 'zzz'", "fields allowed here"),
    Bad("osx-cuda", _osx_cuda, "target.accelerator", '"accelerator": "cuda"', "use metal", "metal", '"cuda"'),
    Bad(
        "cuda-missing-version",
        _delete("target.cudaVersion"),
        "target.cudaVersion",
        '"target": {',
        "required for a CUDA target",
        "cudaVersion",
    ),
    Bad(
        "cuda-version-on-cpu",
        _set("target.cudaVersion", "12.4"),
        "target.cudaVersion",
        '"cudaVersion"',
        "only allowed for CUDA",
        "remove target.cudaVersion",
        '"12.4"',
        base=cpu_recipe,
    ),
    Bad(
        "cuda-version-format",
        _set("target.cudaVersion", "12"),
        "target.cudaVersion",
        '"cudaVersion"',
        "MAJOR.MINOR",
        "12.4",
        '"12"',
    ),
    Bad(
        "metal-on-linux",
        _both(_set("target.accelerator", "metal"), _delete("target.cudaVersion")),
        "target.accelerator",
        '"accelerator"',
        "not available on linux-x86_64",
        "cpu, cuda",
        '"metal"',
    ),
    Bad(
        "unsupported-arch",
        _set("target.arch", "arm64"),
        "target.arch",
        '"arch"',
        "not a supported",
        "linux/x86_64",
        '"arm64"',
    ),
    Bad(
        "platform-alias",
        _set("target.platform", "macos"),
        "target.platform",
        '"platform"',
        "",
        "did you mean 'osx'",
        '"macos"',
    ),
    Bad("semver-version", _set("version", "1.0"), "version", '"version"', "semantic version", "1.0.0", '"1.0"'),
    Bad(
        "semver-recipe-version",
        _set("recipeVersion", "v1.0.0"),
        "recipeVersion",
        '"recipeVersion"',
        "semantic version",
        "MAJOR.MINOR.PATCH",
        '"v1.0.0"',
    ),
    Bad(
        "semver-host-app",
        _set("compatibility.minHostAppVersion", "latest"),
        "compatibility.minHostAppVersion",
        '"minHostAppVersion"',
        "semantic version",
        "MAJOR.MINOR.PATCH",
    ),
    Bad(
        "uppercase-box-id",
        _set("boxId", "My-Model"),
        "boxId",
        '"boxId"',
        "lowercase",
        "'my-model'",
        '"My-Model"',
    ),
    Bad("model-id-spaces", _set("modelId", "my model"), "modelId", '"modelId"', "lowercase", "'my-model'"),
    Bad(
        "recipe-id-mismatch",
        _set("recipeId", "my-model-linux-x86_64-cuda12.8"),
        "recipeId",
        '"recipeId"',
        "<boxId>-<targetId>",
        "my-model-linux-x86_64-cuda12.4",
        "cuda12.8",
    ),
    Bad(
        "tolerance-zero",
        _set("parity.tolerances.absolute", 0),
        "parity.tolerances.absolute",
        '"absolute"',
        "greater than 0",
        "greater than 0",
        "0",
    ),
    Bad(
        "tolerance-negative",
        _set("parity.tolerances.relative", -0.1),
        "parity.tolerances.relative",
        '"relative"',
        "greater than 0",
        "greater than 0",
        "-0.1",
    ),
    Bad(
        "cosine-above-one",
        _set("parity.tolerances.minimumCosine", 1.5),
        "parity.tolerances.minimumCosine",
        '"minimumCosine"',
        "less than or equal to 1",
        "at most 1",
        "1.5",
    ),
    Bad(
        "cosine-zero",
        _set("parity.tolerances.minimumCosine", 0),
        "parity.tolerances.minimumCosine",
        '"minimumCosine"',
        "greater than 0",
        "greater than 0",
    ),
    Bad(
        "duplicate-asset",
        _set("assets.1.name", "weights"),
        "assets[1].name",
        '"name": "weights"',
        "already used by assets[0]",
        "unique",
        '"weights"',
        occurrence=2,
    ),
    Bad(
        "bad-sha256",
        _set("assets.0.sha256", "ABC123"),
        "assets[0].sha256",
        '"sha256"',
        "sha256",
        "64 lowercase hex",
        '"ABC123"',
    ),
    Bad(
        "negative-asset-size",
        _set("assets.1.size", -1),
        "assets[1].size",
        '"size": -1',
        "greater than or equal",
        "at least 0",
        "-1",
    ),
    Bad(
        "entry-point-dotdot",
        _set("pythonEntryPoint", "../python"),
        "pythonEntryPoint",
        '"pythonEntryPoint"',
        "escapes its root",
        "relative path",
        '"../python"',
    ),
    Bad(
        "cache-absolute",
        _set("modelCacheSubdir", "/var/cache/model"),
        "modelCacheSubdir",
        '"modelCacheSubdir"',
        "absolute",
        "relative path",
        '"/var/cache/model"',
    ),
    Bad(
        "prune-windows-absolute",
        _set("prunePaths.1", "C:/venv/doc"),
        "prunePaths[1]",
        '"C:/venv/doc"',
        "absolute",
        "relative path",
    ),
    Bad(
        "prune-backslash",
        _set("prunePaths.0", "venv\\share\\doc"),
        "prunePaths[0]",
        "venv\\\\share",
        "'\\'",
        "venv/share/doc",
    ),
    Bad(
        "parity-script-escapes",
        _set("parity.script", "../../etc/parity.py"),
        "parity.script",
        '"script"',
        "escapes",
        "relative path",
    ),
    Bad(
        "selftest-file-escapes",
        _set("selfTest.files.0", "model-cache/../../x"),
        "selfTest.files[0]",
        '"model-cache/../../x"',
        "escapes",
        "relative path",
    ),
    Bad(
        "wrong-type-string-for-number",
        _set("compatibility.minRamGb", "16"),
        "compatibility.minRamGb",
        '"minRamGb"',
        "valid number",
        "without quotes",
        '"16"',
    ),
    Bad(
        "wrong-type-object-for-list",
        _set("assets", {}),
        "assets",
        '"assets"',
        "valid list",
        "JSON array",
        "{}",
    ),
    Bad("wrong-type-list-for-object", _set("target", ["linux"]), "target", '"target"', "", "JSON object"),
    Bad(
        "schema-version-string",
        _set("schemaVersion", "1"),
        "schemaVersion",
        '"schemaVersion"',
        "integer 1",
        '"schemaVersion": 1',
        '"1"',
    ),
    Bad(
        "schema-version-bool",
        _set("schemaVersion", True),
        "schemaVersion",
        '"schemaVersion"',
        "integer 1",
        '"schemaVersion": 1',
        "true",
    ),
    Bad("schema-version-2", _set("schemaVersion", 2), "schemaVersion", '"schemaVersion"', "", "1", "2"),
    Bad("missing-model-id", _delete("modelId"), "modelId", "{", "'modelId' is missing", "add the required"),
    Bad(
        "python-version-patch",
        _set("pythonVersion", "3.11.4"),
        "pythonVersion",
        '"pythonVersion"',
        "MAJOR.MINOR",
        "3.11",
        '"3.11.4"',
    ),
    Bad(
        "asset-base-url-scheme",
        _set("assetBaseUrl", "assets.example.org"),
        "assetBaseUrl",
        '"assetBaseUrl"',
        "URL",
        "https://",
        '"assets.example.org"',
    ),
    Bad(
        "driver-on-cpu",
        _set("compatibility.minNvidiaDriverVersion", "550.54.14"),
        "compatibility.minNvidiaDriverVersion",
        '"minNvidiaDriverVersion"',
        "only meaningful for CUDA",
        "remove",
        '"550.54.14"',
        base=cpu_recipe,
    ),
    Bad(
        "driver-not-dotted",
        _set("compatibility.minNvidiaDriverVersion", "latest"),
        "compatibility.minNvidiaDriverVersion",
        '"minNvidiaDriverVersion"',
        "driver version",
        "550.54.14",
    ),
    Bad(
        "windows-entry-point",
        _both(_set("target.platform", "windows"), _set("recipeId", "my-model-windows-x86_64-cuda12.4")),
        "pythonEntryPoint",
        '"pythonEntryPoint"',
        "python.exe",
        "venv/python.exe",
        '"venv/bin/python"',
    ),
    Bad(
        "parity-misses-target",
        _set("parity.accelerators", ["cpu"]),
        "parity.accelerators",
        '"accelerators"',
        "exercise the target's accelerator 'cuda'",
        '["cpu", "cuda"]',
    ),
    Bad(
        "parity-impossible-accelerator",
        _set("parity.accelerators", ["cpu", "cuda", "metal"]),
        "parity.accelerators[2]",
        '"metal"',
        "cannot run on linux-x86_64",
        "use only",
    ),
    Bad(
        "parity-twice",
        _set("parity.accelerators", ["cpu", "cuda", "cuda"]),
        "parity.accelerators[2]",
        '"cuda"',
        "listed twice",
        "once",
        occurrence=3,
    ),
    Bad(
        "bad-import-name",
        _set("selfTest.imports", ["torch nn"]),
        "selfTest.imports[0]",
        '"torch nn"',
        "module name",
        "torch.nn",
    ),
    Bad(
        "empty-source-revision",
        _set("sourceRevision", ""),
        "sourceRevision",
        '"sourceRevision"',
        "",
        "non-empty",
    ),
    Bad(
        "nan-tolerance-as-string",
        _set("parity.tolerances.absolute", "NaN"),
        "parity.tolerances.absolute",
        '"absolute"',
        "valid number",
        "without quotes",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_recipe_is_located_and_fixable(case: Bad) -> None:
    data = case.base()
    case.mutate(data)
    text = to_text(data)
    recipe, problems = recipe_problems(text, file="recipes/x/recipe.json")
    assert recipe is None
    matching = [p for p in problems if p.key == case.key]
    assert matching, f"no problem at {case.key}; got {[(p.key, p.message) for p in problems]}"
    problem = matching[0]
    assert problem.file == "recipes/x/recipe.json"
    assert problem.line == line_containing(text, case.needle, case.occurrence), problem.render()
    assert problem.column is not None and problem.column >= 1
    assert case.message in problem.message
    assert problem.fix and case.fix in problem.fix, problem.render()
    if case.value is not None:
        assert problem.value is not None and case.value in problem.value
    # Every problem is actionable, not only the one this case looks at.
    assert all(p.fix for p in problems)


def test_table_covers_at_least_thirty_cases() -> None:
    assert len(BAD) >= 30


def test_valid_recipes_parse() -> None:
    for data in (cuda_recipe(), cpu_recipe()):
        recipe = parse_recipe(to_text(data), folder_name=data["recipeId"])
        assert recipe.recipeId == data["recipeId"]
    assert parse_recipe(to_text(cuda_recipe())).target_id == "linux-x86_64-cuda12.4"


def test_all_errors_of_a_file_are_reported_at_once() -> None:
    data = cuda_recipe()
    data["recipeId"] = "my-model-linux-x86_64-cuda12.8"  # cross-field rule
    data["compatibility"]["minRamGb"] = "lots"  # field type
    data["tolerances"] = {}  # unknown key
    data["parity"]["tolerances"]["minimumCosine"] = 2  # field range
    data["assets"][1]["name"] = "weights"  # cross-field duplicate
    text = to_text(data).replace('"boxId": "my-model",', '"boxId": "my-model",\n  "boxId": "my-model",')
    with pytest.raises(RecipeError) as info:
        parse_recipe(text, file="recipe.json", folder_name="some-folder")
    keys = {p.key for p in info.value.problems}
    assert {
        "recipeId",
        "compatibility.minRamGb",
        "tolerances",
        "parity.tolerances.minimumCosine",
        "assets[1].name",
        "boxId",
    } <= keys
    messages = " ".join(p.message for p in info.value.problems)
    assert "folder must be named after recipeId" in messages
    assert "more than once" in messages
    lines = [p.line or 0 for p in info.value.problems]
    assert 0 not in lines and lines == sorted(lines)
    assert info.value.exit_code == 3


def test_recipe_rules_never_fail_on_malformed_input() -> None:
    raw: object
    for raw in (
        None,
        [],
        "x",
        {"target": "linux"},
        {"target": {"platform": 1}},
        {"parity": {"accelerators": 3}},
        {"assets": [1, None, {"name": 2}]},
        {"prunePaths": "x"},
    ):
        assert recipe_rules(raw) == []


def test_model_refuses_cross_field_violations_built_in_code() -> None:
    data = cuda_recipe()
    data["recipeId"] = "wrong-linux-x86_64-cuda12.4"
    with pytest.raises(ValueError, match="recipeId"):
        Recipe.model_validate(data)


def test_recipe_is_frozen() -> None:
    recipe = parse_recipe(to_text(cuda_recipe()))
    with pytest.raises(ValueError):
        setattr(recipe, "boxId", "other")  # noqa: B010 -- assignment must fail at run time


# --- text-level problems ----------------------------------------------------------------------------


def _only(data: bytes | str) -> Problem:
    recipe, problems = recipe_problems(data, file="recipe.json")
    assert recipe is None and len(problems) == 1, problems
    assert problems[0].fix
    return problems[0]


def test_invalid_json_reports_line_and_column() -> None:
    text = to_text(cuda_recipe()).replace('"version": "1.0.0",', '"version": "1.0.0"')
    problem = _only(text)
    assert "invalid JSON" in problem.message
    assert problem.line == line_containing(text, '"sourceRevision"')
    assert problem.column == 3


def test_trailing_comma_is_invalid_json() -> None:
    text = '{\n  "schemaVersion": 1,\n}\n'
    problem = _only(text)
    assert (problem.line, problem.column) == (3, 1)


@pytest.mark.parametrize("data", [b"", b"   \n\n", ""])
def test_empty_file(data: bytes | str) -> None:
    problem = _only(data)
    assert "empty" in problem.message and problem.line == 1


def test_non_utf8_bytes_are_located() -> None:
    data = to_text(cuda_recipe()).replace("my-model-v1.2.0", "my-model-v1.2.0\udcff").encode("utf-8", "surrogateescape")
    problem = _only(data)
    assert "not valid UTF-8" in problem.message
    assert problem.line == line_containing(data.decode("utf-8", "replace"), "sourceRevision")
    assert problem.column == len('  "sourceRevision": "my-model-v1.2.0') + 1
    assert "UTF-8" in (problem.fix or "")


def test_utf8_bom_is_accepted_and_lines_stay_right() -> None:
    data = cuda_recipe()
    data["version"] = "1.0"
    text = to_text(data)
    problem = _only(b"\xef\xbb\xbf" + text.encode())
    assert problem.key == "version"
    assert (problem.line, problem.column) == (line_containing(text, '"version"'), 14)
    assert parse_recipe(b"\xef\xbb\xbf" + to_text(cuda_recipe()).encode()).boxId == "my-model"


def test_top_level_must_be_an_object() -> None:
    problem = _only("[1, 2]\n")
    assert problem.line == 1 and "object" in (problem.fix or "")


def test_duplicate_key_points_at_second_occurrence() -> None:
    text = to_text(cuda_recipe()).replace(
        '"pythonVersion": "3.11",', '"pythonVersion": "3.11",\n  "pythonVersion": "3.12",'
    )
    problem = _only(text)
    assert problem.key == "pythonVersion"
    assert problem.line == line_containing(text, '"3.12"')
    assert "more than once" in problem.message


def test_folder_name_must_match_recipe_id() -> None:
    text = to_text(cuda_recipe())
    _, problems = recipe_problems(text, file="recipe.json", folder_name="my-model")
    assert len(problems) == 1
    assert problems[0].key == "recipeId" and problems[0].line == line_containing(text, '"recipeId"')
    assert "rename the folder 'my-model' to 'my-model-linux-x86_64-cuda12.4'" in (problems[0].fix or "")


def test_folder_problems_check_parity_script_and_pixi_toml() -> None:
    recipe = parse_recipe(to_text(cuda_recipe()))
    text = to_text(cuda_recipe())
    present = {"pixi.toml", "checks/parity.py"}
    assert folder_problems(recipe, "recipe.json", present.__contains__, text) == []
    problems = folder_problems(recipe, "recipe.json", set().__contains__, text)
    assert [p.key for p in problems] == [None, "parity.script"]
    assert problems[1].line == line_containing(text, '"script"')
    # selfTest.files are paths inside the built box: never looked up in the recipe folder.
    assert all("selfTest" not in (p.key or "") for p in problems)


# --- reading from disk ------------------------------------------------------------------------------


def test_fifty_megabyte_file_is_refused_by_size_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "recipe.json"
    with big.open("wb") as handle:  # sparse: costs no disk
        handle.truncate(50 * 1024 * 1024)

    def no_open(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the file was opened although its size alone refuses it")

    monkeypatch.setattr(Path, "open", no_open)
    with pytest.raises(RecipeError, match=f"larger than {MAX_RECIPE_BYTES} bytes") as info:
        read_recipe_bytes(big)
    assert info.value.fix


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="does not exist"):
        read_recipe_bytes(tmp_path / "recipe.json")
    with pytest.raises(RecipeError, match="is a directory"):
        read_recipe_bytes(tmp_path)


def test_load_recipe_uses_folder_name(tmp_path: Path) -> None:
    folder = tmp_path / "my-model-linux-x86_64-cuda12.4"
    folder.mkdir()
    (folder / "recipe.json").write_text(to_text(cuda_recipe()), encoding="utf-8")
    assert load_recipe(folder).boxId == "my-model"
    wrong = tmp_path / "renamed"
    folder.rename(wrong)
    with pytest.raises(RecipeError) as info:
        load_recipe(wrong / "recipe.json")
    assert "folder" in info.value.problems[0].message


def test_problem_json_round_trips() -> None:
    data = cuda_recipe()
    data["boxId"] = "Bad"
    _, problems = recipe_problems(to_text(data), file="r.json")
    payload = json.loads(json.dumps([p.to_json() for p in problems]))
    assert payload[0]["key"] == "boxId" and payload[0]["line"] > 1 and payload[0]["fix"]
