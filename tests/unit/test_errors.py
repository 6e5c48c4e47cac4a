import sys
from pathlib import Path

import pytest

from scrollcase.errors import (
    EXIT_CODES,
    RECIPE_ID,
    ConflictError,
    LockError,
    Problem,
    RecipeError,
    ScrollcaseError,
    StoreError,
    about_recipe,
    collect,
    describe_path,
)


def test_problem_renders_location_key_value_and_fix():
    p = Problem(
        message="not a semantic version",
        file="recipes/x/recipe.json",
        line=7,
        column=14,
        key="version",
        value='"1.0"',
        fix='write MAJOR.MINOR.PATCH, e.g. "1.0.0"',
    )
    text = p.render()
    assert text.startswith('recipes/x/recipe.json:7:14: error: version: not a semantic version (got "1.0")')
    assert "fix: write MAJOR.MINOR.PATCH" in text


def test_error_renders_every_problem_and_serialises():
    err = RecipeError(
        "recipe.json has 2 problem(s)",
        problems=[Problem(message="a", file="f", line=2), Problem(message="b", file="f", line=1)],
    )
    rendered = err.render()
    assert "f:2: error: a" in rendered and "f:1: error: b" in rendered
    data = err.to_json()
    assert data["exitCode"] == 3 and data["error"] == "RecipeError"
    assert [p["message"] for p in data["problems"]] == ["a", "b"]  # type: ignore[index,union-attr]


def test_exit_codes_distinguish_failure_kinds():
    assert EXIT_CODES["ScrollcaseError"] == 1
    assert EXIT_CODES["UsageError"] == 2
    assert issubclass(ConflictError, StoreError) and ConflictError.exit_code != StoreError.exit_code
    special = {k: v for k, v in EXIT_CODES.items() if k not in ("ManifestError", "SolveError")}
    assert len(set(special.values())) == len(special)


def test_errors_are_exceptions_with_message():
    err = ScrollcaseError("boom", fix="do the thing")
    assert str(err) == "boom\nfix: do the thing"


def test_collect_sorts_by_file_then_line():
    ps = collect([Problem("x", file="b", line=1), Problem("y", file="a", line=9), Problem("z", file="a", line=2)])
    assert [(p.file, p.line) for p in ps] == [("a", 2), ("a", 9), ("b", 1)]


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_describe_path_keeps_relative_paths_as_given_and_shortens_absolute_ones(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path / "link")
    assert describe_path(None) is None
    assert describe_path("../x/recipe.json") == str(Path("../x/recipe.json"))
    assert describe_path(tmp_path / "link" / "a" / "b.json") == str(Path("a/b.json"))
    assert describe_path(tmp_path / "real" / "c.json") == "c.json"  # inside the cwd through the symlink
    assert describe_path(tmp_path / "elsewhere.json") == str(tmp_path / "elsewhere.json")


@pytest.mark.skipif(sys.platform == "win32", reason="Windows cannot delete a working folder in use")
def test_describe_path_in_a_deleted_working_folder_gives_the_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert describe_path(tmp_path / "box.tar.zst") == (tmp_path / "box.tar.zst").as_posix()


def test_a_command_names_its_recipe_where_a_fix_was_written_without_it() -> None:
    unknown = f"run `scrollcase lock {RECIPE_ID}` and commit pixi.lock"
    with pytest.raises(LockError) as caught, about_recipe("my-model-linux-x86_64-cpu"):
        raise LockError("pixi.lock is missing", problems=[Problem("no lock", fix=unknown), Problem("x")], fix=unknown)
    error = caught.value
    assert error.fix == "run `scrollcase lock my-model-linux-x86_64-cpu` and commit pixi.lock"
    assert [p.fix for p in error.problems] == [error.fix, None]
    assert RECIPE_ID not in error.render()
