"""The build action's cache folders and keys (github/buildcache.py) and `scrollcase report build-cache`."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase import cli
from scrollcase.github.buildcache import build_cache
from tests.github_helpers import write_recipe
from tests.support.outputs import read_outputs


def test_keys_follow_the_lock_and_restore_from_the_recipe_then_the_platform(tmp_path: Path) -> None:
    user, state = tmp_path / "user", tmp_path / "ws" / ".scrollcase" / "cache"
    one = build_cache("m-linux-x86_64-cpu", b"lock one", "Linux", "X64", user, state)
    assert (
        one.key.startswith("scrollcase-build-v1-Linux-X64-m-linux-x86_64-cpu-") and len(one.key.rsplit("-", 1)[1]) == 20
    )
    assert one.restore_keys == ("scrollcase-build-v1-Linux-X64-m-linux-x86_64-cpu-", "scrollcase-build-v1-Linux-X64-")
    assert build_cache("m-linux-x86_64-cpu", b"lock one", "Linux", "X64", user, state).key == one.key
    assert build_cache("m-linux-x86_64-cpu", b"lock two", "Linux", "X64", user, state).key != one.key
    assert build_cache("m-linux-x86_64-cpu", b"lock one", "Linux", "ARM64", user, state).key != one.key
    assert build_cache("m-linux-x86_64-cpu", None, "Linux", "X64", user, state).key.endswith("-no-lock")
    assert one.paths == (user / "wheels", user / "packframes", user / "pyc", state / "pkgs", state / "assets")
    outputs = one.outputs()
    assert outputs["path"] == "\n".join(str(p) for p in one.paths)
    assert str(outputs["restore-keys"]).splitlines() == list(one.restore_keys)


def test_the_command_writes_the_outputs_for_actions_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_recipe(tmp_path / "recipes", "tiny-mlp", "linux-x86_64-cpu")
    (folder / "pixi.lock").write_bytes(b"version: 6\n")
    output = tmp_path / "output"
    monkeypatch.chdir(tmp_path)
    for name, value in {
        "GITHUB_OUTPUT": str(output),
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "X64",
        "SCROLLCASE_CACHE_DIR": str(tmp_path / "user-cache"),
    }.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["report", "build-cache", "tiny-mlp-linux-x86_64-cpu"]) == 0
    outputs = read_outputs(output.read_text(encoding="utf-8"))
    expected = build_cache(
        "tiny-mlp-linux-x86_64-cpu",
        b"version: 6\n",
        "Linux",
        "X64",
        tmp_path / "user-cache",
        (tmp_path / ".scrollcase" / "cache").resolve(),
    )
    assert outputs == {k: str(v) for k, v in expected.outputs().items()}
    assert all(
        Path(p).is_absolute() for p in outputs["path"].splitlines()
    )  # actions/cache reads them from the workspace
    assert cli.main(["report", "build-cache", "no-such-recipe"]) != 0
