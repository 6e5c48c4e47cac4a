"""Results as GitHub shows them: a release as step outputs, JUnit results as a summary table."""

from __future__ import annotations

from pathlib import Path

from scrollcase.format.release import ReleaseManifest, object_keys
from scrollcase.github.report import release_outputs, summary_table
from scrollcase.reports.junit import JUnitResult, tally
from tests.github_helpers import recipe_data

SHA = "ab" * 32


def manifest() -> ReleaseManifest:
    data = recipe_data("tiny-mlp", "linux-x86_64-cuda12.4")
    archive = "tiny-mlp-1.0.0-linux-x86_64-cuda12.4.tar.zst"
    return ReleaseManifest.model_validate(
        {
            "boxId": "tiny-mlp",
            "modelId": data["modelId"],
            "runtimeId": data["runtimeId"],
            "version": "1.0.0",
            "sourceRevision": "r1",
            "recipeId": data["recipeId"],
            "recipeVersion": "1.0.0",
            "target": data["target"],
            "targetId": "linux-x86_64-cuda12.4",
            "compatibility": data["compatibility"],
            "archive": {"name": archive, "size": 123, "sha256": SHA},
            "pythonEntryPoint": "venv/bin/python",
            "modelCacheSubdir": "model-cache/tiny-mlp",
            "weights": "bundled",
            "assets": [],
            "keys": object_keys("tiny-mlp", "1.0.0", "linux-x86_64-cuda12.4", archive).model_dump(),
            "builtBy": {"scrollcase": "0.1.0", "pixi": "0.73.0", "lockSha256": SHA, "pythonVersion": "3.11"},
            "selfTest": {"passed": True, "checks": []},
        }
    )


def test_release_outputs_name_the_archive_next_to_the_manifest() -> None:
    out = release_outputs(manifest(), Path("/dist/tiny-mlp-1.0.0-linux-x86_64-cuda12.4.release.json"))
    assert out["archive"] == str(Path("/dist/tiny-mlp-1.0.0-linux-x86_64-cuda12.4.tar.zst"))
    assert out["sha256"] == SHA and out["size"] == 123 and out["target-id"] == "linux-x86_64-cuda12.4"
    prefix = "boxes/tiny-mlp/1.0.0/linux-x86_64-cuda12.4/"
    assert out["archive-key"] == prefix + "tiny-mlp-1.0.0-linux-x86_64-cuda12.4.tar.zst"
    assert out["self-test"] == "passed" and out["parity"] == "not run"


def result(status: str, name: str = "c") -> JUnitResult:
    return JUnitResult(suite="s", name=name, classname="k", status=status, message=f"{name} {status}")


def test_summary_table_lists_failures_first() -> None:
    rows = summary_table("T", [result("passed", "a"), result("skipped", "b"), result("failed", "c")], tally([])).rows
    assert [r[1] for r in rows] == ["k.c", "k.a", "k.b"]
    assert rows[0][2] == "❌ failed" and rows[0][4] == "c failed"
