"""plan_build: where a build puts everything, and the refusal to cross-build."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.build.plan import plan_build
from scrollcase.errors import HostError
from tests.unit.build.test_pipeline import recipe_dir


def test_plan_build_paths_and_assets() -> None:
    plan = plan_build(recipe_dir(), out_dir=Path("out"), state_dir=Path("st"), host=("linux", "x86_64"))
    assert plan.archive_path == Path("out/m-2.0.0-linux-x86_64-cuda12.4.tar.zst")
    assert plan.release_path == Path("out/m-2.0.0-linux-x86_64-cuda12.4.release.json")
    assert plan.work_dir == Path("st/work/m-linux-x86_64-cuda12.4")
    assert plan.junit_path == Path("st/reports/selftest-m-linux-x86_64-cuda12.4.xml")
    assert plan.assets[0].url == "https://assets.example.org/boxes/w.bin"
    assert plan.assets[0].box_path == "model-cache/m/w.bin"
    assert plan.prune == ("venv/share/doc",) and plan.bundled


@pytest.mark.parametrize("host", [("osx", "arm64"), ("windows", "x86_64"), ("linux", "aarch64")])
def test_cross_build_is_a_host_error(host: tuple[str, str]) -> None:
    with pytest.raises(HostError) as caught:
        plan_build(recipe_dir(), host=host)
    assert caught.value.exit_code == 11
    assert "linux-x86_64-cuda12.4" in caught.value.message and caught.value.problems[0].fix
