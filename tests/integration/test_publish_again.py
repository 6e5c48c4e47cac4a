"""A second release tag through the real CLI (issue 30): the unchanged recipe's archive, rebuilt byte for
byte by the later tag's run, is already published (exit 0, nothing written, a notice naming the provenance
the store keeps); other archive bytes under the same version are refused (exit 10) naming both digests.
To a directory store and to a real S3 API server (SeaweedFS on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scrollcase.format.provenance import BuildProvenance
from scrollcase.format.release import dump_release
from tests.integration.test_publish_cli import REPO, scrollcase
from tests.support.outputs import read_outputs
from tests.support.releases import SyntheticRelease, write_release
from tests.support.s3servers import S3Server, s3_client

FIRST = BuildProvenance(repository="octo/boxes", ref="refs/tags/v1.0.0", commit="a" * 40, runId="101")
SECOND = BuildProvenance(repository="octo/boxes", ref="refs/tags/v1.0.1", commit="b" * 40, runId="202")
SBOM = b'{"bomFormat": "CycloneDX"}\n'


def two_tags(tmp_path: Path) -> tuple[SyntheticRelease, SyntheticRelease]:
    """The release as tag v1.0.0's run built it, and the same archive and SBOM as v1.0.1's run built them."""
    built = write_release(tmp_path / "v1.0.0", sbom=SBOM)
    runs = []
    for folder, provenance in (("v1.0.0", FIRST), ("v1.0.1", SECOND)):
        dist = tmp_path / folder
        if folder != "v1.0.0":
            shutil.copytree(tmp_path / "v1.0.0", dist)
        manifest = built.manifest.model_copy(update={"provenance": provenance})
        path = dist / built.manifest_path.name
        path.write_bytes(dump_release(manifest))
        runs.append(SyntheticRelease(manifest, path, dist / built.archive_path.name))
    return runs[0], runs[1]


def other_bytes(tmp_path: Path) -> SyntheticRelease:
    """Another build of the same version: other payload bytes, so another archive."""
    return write_release(tmp_path / "rebuilt-other", sbom=SBOM)


def actions_env(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    output, summary = tmp_path / "output", tmp_path / "summary"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    return env, output, summary


def files_of(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def test_a_second_tag_is_already_published_in_a_directory_store(tmp_path: Path) -> None:
    first, second = two_tags(tmp_path)
    store = tmp_path / "store"
    assert scrollcase(str(first.manifest_path), "--to", str(store), cwd=tmp_path).returncode == 0
    before = files_of(store)
    env, output, summary = actions_env(tmp_path)
    done = scrollcase(str(second.manifest_path), "--to", str(store), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert files_of(store) == before  # nothing written, nothing touched
    kept = "octo/boxes refs/tags/v1.0.0 at aaaaaaaaaaaa (run 101)"
    notice = next(line for line in done.stdout.splitlines() if line.startswith("::notice"))
    assert "title=scrollcase publish" in notice and kept in notice and "refs/tags/v1.0.1" in notice
    assert (
        f"demo-box 1.0.0 linux-x86_64-cuda12.4 is already published: the store keeps the release built by {kept}"
        in (done.stdout)
    )
    assert "differs only in provenance: nothing to do" in done.stdout
    assert "different bytes" not in done.stdout + done.stderr
    assert f"already published: the store keeps the release built by {kept}" in summary.read_text(encoding="utf-8")
    assert read_outputs(output.read_text(encoding="utf-8"))["published"] == "already"
    stored = json.loads((store / first.manifest.keys.release).read_bytes())
    assert stored["provenance"]["ref"] == "refs/tags/v1.0.0"


def test_a_second_tag_reports_already_published_in_json(tmp_path: Path) -> None:
    first, second = two_tags(tmp_path)
    store = tmp_path / "store"
    assert scrollcase(str(first.manifest_path), "--to", str(store), cwd=tmp_path).returncode == 0
    done = scrollcase(str(second.manifest_path), "--to", str(store), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["alreadyPublished"] is True and result["keptProvenance"]["runId"] == "101"
    assert result["uploaded"] == [] and result["indexWritten"] is False
    assert {u["action"] for u in result["uploads"]} == {"skip"}


def test_other_archive_bytes_under_a_published_version_are_refused_naming_both_digests(tmp_path: Path) -> None:
    first, _ = two_tags(tmp_path)
    store = tmp_path / "store"
    assert scrollcase(str(first.manifest_path), "--to", str(store), cwd=tmp_path).returncode == 0
    before = files_of(store)
    other = other_bytes(tmp_path)
    done = scrollcase(str(other.manifest_path), "--to", str(store), "--json", cwd=tmp_path)
    assert done.returncode == 10, done.stderr
    error = json.loads(done.stdout)
    assert (
        f"holds {first.manifest.archive.size} bytes with sha256 {first.manifest.archive.sha256} (stored)"
        in (error["message"])
    )
    assert f"sha256 {other.manifest.archive.sha256} (new)" in error["message"]
    assert "bump `version` in recipes/demo-box-linux-x86_64-cuda12.4/recipe.json (now 1.0.0)" in error["fix"]
    assert files_of(store) == before


def test_a_second_tag_and_other_bytes_against_seaweedfs(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    first, second = two_tags(tmp_path)
    env = weed.credentials_env()
    to = ("--to", f"s3://{weed_bucket}/prod", "--endpoint-url", weed.endpoint)
    assert scrollcase(str(first.manifest_path), *to, cwd=tmp_path, env=env).returncode == 0
    client = s3_client(weed)

    def objects() -> dict[str, str]:
        listed = client.list_objects_v2(Bucket=weed_bucket)["Contents"]
        return {o["Key"]: f"{o['ETag']} {o['LastModified'].isoformat()}" for o in listed}

    before = objects()
    assert len(before) == 5  # archive, sidecar, SBOM, manifest, index
    done = scrollcase(str(second.manifest_path), *to, "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["keptProvenance"]["ref"] == "refs/tags/v1.0.0"
    assert json.loads(done.stdout)["alreadyPublished"] is True and json.loads(done.stdout)["uploaded"] == []
    assert objects() == before
    manifest = client.get_object(Bucket=weed_bucket, Key=f"prod/{first.manifest.keys.release}")["Body"].read()
    assert manifest == dump_release(first.manifest)

    other = other_bytes(tmp_path)
    refused = scrollcase(str(other.manifest_path), *to, "--json", cwd=tmp_path, env=env)
    assert refused.returncode == 10, refused.stderr
    message = json.loads(refused.stdout)["message"]
    assert f"sha256 {first.manifest.archive.sha256} (stored)" in message
    assert f"sha256 {other.manifest.archive.sha256} (new)" in message
    assert objects() == before


# ------------------------------------------------------------------ real builds at two tags (the demo box)


def build_at(workspace: Path, tag: str, run_id: str, out: Path) -> Path:
    """`scrollcase build` of the demo recipe as a tag's GitHub Actions run does it; its release manifest."""
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "octo/boxes",
        "GITHUB_REF": f"refs/tags/{tag}",
        "GITHUB_SHA": hashlib.sha1(tag.encode()).hexdigest(),
        "GITHUB_RUN_ID": run_id,
    }
    done = run_cli(["build", "scrollcase-demo-linux-x86_64-cpu", "--out", str(out), "--json"], workspace, env)
    assert done.returncode == 0, done.stderr
    return workspace / str(json.loads(done.stdout)["release"])


def run_cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SCROLLCASE_", "GITHUB_"))}
    return subprocess.run(
        [sys.executable, "-m", "scrollcase", *args],
        cwd=cwd,
        env={**base, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_two_tags_build_the_same_archive_and_the_second_publishes_nothing(demo_workspace: Path, tmp_path: Path) -> None:
    """The premise, proven with real builds: a recipe that did not change, built by two tags' runs, gives
    the same archive bytes and manifests that differ only in provenance; the second publish is green and
    writes nothing, and the matrix of a third tag leaves the recipe out."""
    workspace = tmp_path / "workspace"
    shutil.copytree(demo_workspace, workspace, ignore=shutil.ignore_patterns(".scrollcase"))
    first = build_at(workspace, "v1.0.0", "101", tmp_path / "v1.0.0")
    second = build_at(workspace, "v1.0.1", "202", tmp_path / "v1.0.1")
    one, two = json.loads(first.read_bytes()), json.loads(second.read_bytes())
    assert one["archive"]["sha256"] == two["archive"]["sha256"]
    assert one["provenance"]["ref"] == "refs/tags/v1.0.0" and two["provenance"]["ref"] == "refs/tags/v1.0.1"
    assert {k: v for k, v in one.items() if k != "provenance"} == {k: v for k, v in two.items() if k != "provenance"}

    store = tmp_path / "store"
    assert run_cli(["publish", str(first), "--to", str(store)], workspace, {}).returncode == 0
    before = files_of(store)
    again = run_cli(["publish", str(second), "--to", str(store), "--json"], workspace, {})
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["alreadyPublished"] is True and result["keptProvenance"]["runId"] == "101"
    assert files_of(store) == before

    matrix = run_cli(["matrix", "--unpublished", "--store", str(store), "--json"], workspace, {})
    assert matrix.returncode == 0, matrix.stderr
    assert json.loads(matrix.stdout) == {"include": []}
    assert "left out, already published: scrollcase-demo-linux-x86_64-cpu 1.0.0" in matrix.stderr
