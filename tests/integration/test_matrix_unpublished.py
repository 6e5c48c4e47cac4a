"""``scrollcase matrix --unpublished --store STORE`` through the real CLI (issue 30), against a real store
holding one published release: a directory, the same directory over HTTP, and SeaweedFS over S3.  The
recipe whose (boxId, version, target) the store holds is left out (and named in the output and the step
summary) while its pixi.lock is the one it was built from; a changed lock puts it back with a warning."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from scrollcase.format.release import ReleaseManifest
from scrollcase.store.base import Store
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.store.s3 import S3Store
from tests.github_helpers import write_recipe
from tests.integration.action_harness import ROOT, Harness, scrollcase_venv, standard_uses
from tests.support.httpstore import serve
from tests.support.outputs import read_outputs
from tests.support.releases import write_release
from tests.support.s3servers import S3Server, s3_client
from tests.support.tools import run_isolated

REPO = Path(__file__).resolve().parents[2]
CPU, CUDA = "tiny-mlp-linux-x86_64-cpu", "tiny-mlp-linux-x86_64-cuda12.4"


def matrix(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_isolated("matrix", "--recipes", "recipes", *args, cwd=cwd, env=env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Two recipes of one box, each with its committed pixi.lock."""
    root = tmp_path / "repo"
    for target in ("linux-x86_64-cpu", "linux-x86_64-cuda12.4"):
        folder = write_recipe(root / "recipes", "tiny-mlp", target)
        (folder / "pixi.lock").write_text(f"version: 6\n# {target}\n", encoding="utf-8")
    return root


def publish_cuda_release(repo: Path, store: Store, tmp_path: Path) -> ReleaseManifest:
    """Publish tiny-mlp 1.0.0 for CUDA 12.4 as built from the CUDA recipe's pixi.lock."""
    built = write_release(tmp_path / "dist", box_id="tiny-mlp", version="1.0.0", cuda="12.4")
    lock = hashlib.sha256((repo / "recipes" / CUDA / "pixi.lock").read_bytes()).hexdigest()
    manifest = built.manifest.model_copy(
        update={"builtBy": built.manifest.builtBy.model_copy(update={"lockSha256": lock})}
    )
    publish(store, manifest, built.archive_path)
    return manifest


def runner(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    output, summary = tmp_path / "github-output", tmp_path / "github-summary"
    output.unlink(missing_ok=True)
    summary.unlink(missing_ok=True)
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    return env, output, summary


def assert_cuda_left_out(done: subprocess.CompletedProcess[str], output: Path, summary: Path, store: str) -> None:
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(output.read_text(encoding="utf-8"))
    assert [e["recipeId"] for e in json.loads(outputs["matrix"])["include"]] == [CPU]
    assert json.loads(outputs["published"]) == [CUDA] and outputs["count"] == "1"
    assert f"1 recipe(s) left out, already published: {CUDA} 1.0.0" in done.stderr
    text = summary.read_text(encoding="utf-8")
    assert f"| {CUDA} | 1.0.0 | left out: already published in {store} |" in text, text
    assert f"| {CPU} | 1.0.0 | build |" in text


def test_a_directory_store_holding_one_release_leaves_it_out(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    publish_cuda_release(repo, LocalStore(store), tmp_path)
    env, output, summary = runner(tmp_path)
    done = matrix("--unpublished", "--store", str(store), cwd=repo, env=env)
    assert_cuda_left_out(done, output, summary, str(store))
    assert f"  {CUDA:<48} left out: 1.0.0 already published" in done.stdout

    # Another version of the recipe is not published yet: built.
    write_recipe(repo / "recipes", "tiny-mlp", "linux-x86_64-cuda12.4", version="1.0.1")
    bumped = matrix("--unpublished", "--store", str(store), "--json", cwd=repo)
    assert bumped.returncode == 0, bumped.stderr
    assert [e["recipeId"] for e in json.loads(bumped.stdout)["include"]] == [CPU, CUDA]


def test_a_lock_changed_without_a_version_bump_is_built_with_a_warning(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    publish_cuda_release(repo, LocalStore(store), tmp_path)
    (repo / "recipes" / CUDA / "pixi.lock").write_text("version: 6\n# relocked\n", encoding="utf-8")
    env, output, _ = runner(tmp_path)
    done = matrix("--unpublished", "--store", str(store), cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(output.read_text(encoding="utf-8"))
    assert [e["recipeId"] for e in json.loads(outputs["matrix"])["include"]] == [CPU, CUDA]
    assert json.loads(outputs["published"]) == []
    warning = next(line for line in done.stdout.splitlines() if line.startswith("::warning"))
    assert f"file=recipes/{CUDA}/recipe.json,line=8" in warning, warning
    assert "is already published" in warning and "pixi.lock changed since" in warning
    assert "bump `version`" in warning


def test_the_same_store_over_http_and_an_empty_store(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    publish_cuda_release(repo, LocalStore(store), tmp_path)
    with serve(store) as server:
        env, output, summary = runner(tmp_path)
        done = matrix("--unpublished", "--store", server.url, cwd=repo, env=env)
        assert_cuda_left_out(done, output, summary, server.url)
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = matrix("--unpublished", "--store", str(empty), "--json", cwd=repo)
    assert nothing.returncode == 0, nothing.stderr
    assert len(json.loads(nothing.stdout)["include"]) == 2


def test_seaweedfs_store_and_the_store_from_the_environment(
    repo: Path, tmp_path: Path, weed: S3Server, weed_bucket: str
) -> None:
    publish_cuda_release(repo, S3Store(s3_client(weed), weed_bucket, "prod", endpoint_url=weed.endpoint), tmp_path)
    credentials = {
        **weed.credentials_env(),
        "SCROLLCASE_STORE": f"s3://{weed_bucket}/prod",  # --store's default
    }
    env, output, summary = runner(tmp_path)
    done = matrix("--unpublished", "--endpoint-url", weed.endpoint, cwd=repo, env={**env, **credentials})
    assert_cuda_left_out(done, output, summary, f"s3://{weed_bucket}/prod")
    refused = matrix("--unpublished", "--store", f"s3://{weed_bucket}/prod", "--endpoint-url", weed.endpoint, cwd=repo)
    assert refused.returncode == 9, refused.stderr  # no credentials: a StoreError, never every recipe silently
    assert "credentials" in refused.stderr.lower()


def test_store_options_without_each_other_are_usage_errors(repo: Path) -> None:
    alone = matrix("--store", "somewhere", cwd=repo)
    assert alone.returncode == 2 and "only read with --unpublished" in alone.stderr
    missing = matrix("--unpublished", cwd=repo)
    assert missing.returncode == 2 and "no --store and no $SCROLLCASE_STORE" in missing.stderr
    empty = matrix("--unpublished", "--store", "", cwd=repo)
    assert empty.returncode == 2 and "--store is empty" in empty.stderr


@pytest.mark.slow
def test_the_matrix_action_passes_unpublished_store_through_env(repo: Path, tmp_path: Path) -> None:
    """actions/matrix run step by step as the runner does: the input reaches the CLI as --unpublished
    --store (through env:), and the action's `published` output names what was left out."""
    store = tmp_path / "store"
    publish_cuda_release(repo, LocalStore(store), tmp_path)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    scrollcase_venv(temp)
    harness = Harness(workspace=repo, runner_temp=temp, uses_outputs=standard_uses())
    result = harness.run(ROOT / "actions" / "matrix", {"unpublished-in": str(store)})
    assert not result.failed, result.log()
    assert [e["recipeId"] for e in json.loads(result.outputs["matrix"])["include"]] == [CPU]
    assert json.loads(result.outputs["published"]) == [CUDA] and result.outputs["count"] == "1"
    step = result.step("Compute the matrix")
    assert step.env["INPUT_UNPUBLISHED_IN"] == str(store)
    off = harness.run(ROOT / "actions" / "matrix", {})
    assert len(json.loads(off.outputs["matrix"])["include"]) == 2 and off.outputs["published"] == ""
