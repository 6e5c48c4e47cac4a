"""`scrollcase publish` end to end through the real CLI (a subprocess), to a directory and to S3."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from scrollcase.format.release import dump_release
from scrollcase.store.index import parse_index
from tests.support.outputs import read_outputs
from tests.support.releases import write_release
from tests.support.s3servers import S3Server, s3_client
from tests.support.tools import run_isolated

REPO = Path(__file__).resolve().parents[2]


def scrollcase(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_isolated("publish", *args, cwd=cwd, env=env)


def test_default_store_is_a_local_directory(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    done = scrollcase(str(release.manifest_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = tmp_path / ".scrollcase" / "store"
    keys = release.manifest.keys
    assert (store / keys.archive).read_bytes() == release.archive_path.read_bytes()
    assert (store / keys.release).read_bytes() == dump_release(release.manifest)
    assert (store / keys.sha256).read_text().endswith(f"  {release.manifest.archive.name}\n")
    index = parse_index((store / "boxes/demo-box/index.json").read_bytes(), "index.json")
    assert "linux-x86_64-cuda12.4" in index.versions["1.0.0"]
    assert "uploaded" in done.stdout and keys.archive in done.stdout


def test_sidecar_verifies_with_sha256sum(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    assert scrollcase(str(release.manifest_path), "--to", str(tmp_path / "s"), cwd=tmp_path).returncode == 0
    folder = (tmp_path / "s" / release.manifest.keys.archive).parent
    if not any((Path(p) / "sha256sum").exists() for p in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip("sha256sum is not installed")
    check = subprocess.run(
        ["sha256sum", "-c", Path(release.manifest.keys.sha256).name], cwd=folder, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_env_store_republish_json_and_conflict_exit_code(tmp_path: Path) -> None:
    env = {"SCROLLCASE_STORE": str(tmp_path / "env-store")}
    release = write_release(tmp_path / "dist")
    assert scrollcase(str(release.manifest_path), cwd=tmp_path, env=env).returncode == 0
    again = scrollcase(str(release.manifest_path), "--json", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["uploaded"] == [] and data["indexWritten"] is False
    assert [u["action"] for u in data["uploads"]] == ["skip", "skip", "skip"]
    rebuilt = write_release(tmp_path / "rebuilt")
    refused = scrollcase(str(rebuilt.manifest_path), "--json", cwd=tmp_path, env=env)
    assert refused.returncode == 10
    error = json.loads(refused.stdout)
    assert error["error"] == "ConflictError" and "demo-box 1.0.0 linux-x86_64-cuda12.4" in error["message"]
    assert "Traceback" not in refused.stderr


def test_republish_says_the_index_was_not_written(tmp_path: Path) -> None:
    """Defect 9: publish printed "updating …/index.json" even when the index already listed the release
    and was not written."""
    release = write_release(tmp_path / "dist")
    store = str(tmp_path / "store")
    first = scrollcase(str(release.manifest_path), "--to", store, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "updated " in first.stderr and "index.json" in first.stderr
    again = scrollcase(str(release.manifest_path), "--to", store, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "updating" not in again.stderr and "updated" not in again.stderr, again.stderr
    assert "index.json already lists this release" in again.stderr


def test_tampered_archive_exit_code_and_nothing_written(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    release.archive_path.write_bytes(release.archive_path.read_bytes()[:-1])
    done = scrollcase(str(release.manifest_path), "--to", str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 8
    assert "does not match" in done.stderr and "fix:" in done.stderr
    assert not (tmp_path / "s").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    done = scrollcase(str(release.manifest_path), "--to", str(tmp_path / "s"), "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "dry run" in done.stdout and "would upload" in done.stdout
    assert release.manifest.keys.release in done.stdout
    assert not (tmp_path / "s").exists()


def test_missing_manifest_is_a_usage_error(tmp_path: Path) -> None:
    done = scrollcase(str(tmp_path / "nope.release.json"), cwd=tmp_path)
    assert done.returncode == 2 and "cannot read release manifest" in done.stderr


def test_help_documents_the_options(tmp_path: Path) -> None:
    done = scrollcase("--help", cwd=tmp_path)
    assert done.returncode == 0
    for option in ("--to", "--endpoint-url", "--dry-run", "--json", "--archive"):
        assert option in done.stdout


def test_publish_to_s3_with_standard_credentials(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    bucket = weed_bucket
    release = write_release(tmp_path / "dist", size=10_000)
    env = weed.credentials_env()
    args = (str(release.manifest_path), "--to", f"s3://{bucket}/team", "--endpoint-url", weed.endpoint, "--json")
    done = scrollcase(*args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["store"] == f"s3://{bucket}/team"
    key = f"team/{release.manifest.keys.archive}"
    body = s3_client(weed).get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == release.archive_path.read_bytes()
    wrong = scrollcase(*args, cwd=tmp_path, env={**env, "AWS_SECRET_ACCESS_KEY": "wrong"})
    assert wrong.returncode == 9 and "access denied" in wrong.stderr and "Traceback" not in wrong.stderr
    missing = scrollcase(*args, cwd=tmp_path, env={})
    assert missing.returncode == 9 and "no AWS credentials" in missing.stderr


# ------------------------------------------------------------ issue 15: publish plans everything first


def stored_files(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()) if store.exists() else []


def test_defect1_cpu_box_relabelled_as_cuda_is_refused_with_nothing_written(tmp_path: Path) -> None:
    """A self-consistent manifest that relabels a CPU box as linux-x86_64-cuda12.4 published with exit 0."""
    from scrollcase.format.release import object_keys
    from scrollcase.recipe.model import Target

    cpu = write_release(tmp_path / "dist", cuda=None)
    tid = "linux-x86_64-cuda12.4"
    m = cpu.manifest
    forged = m.model_copy(
        update={
            "target": Target(platform="linux", arch="x86_64", accelerator="cuda", cudaVersion="12.4"),
            "targetId": tid,
            "compatibility": m.compatibility.model_copy(update={"minNvidiaDriverVersion": "550.54"}),
            "keys": object_keys(m.boxId, m.version, tid, m.archive.name),
        }
    )
    cpu.manifest_path.write_bytes(dump_release(forged))
    store = tmp_path / "store"
    for extra in ((), ("--dry-run",)):
        done = scrollcase(str(cpu.manifest_path), "--to", str(store), "--json", *extra, cwd=tmp_path)
        assert done.returncode == 8, done.stderr
        error = json.loads(done.stdout)
        assert error["error"] == "IntegrityError"
        assert {"target", "targetId", "gpu"} <= {p.get("key") for p in error["problems"]}
        assert "Traceback" not in done.stderr
    assert stored_files(store) == []


def test_defect2_index_conflict_is_found_before_any_upload_and_by_dry_run(tmp_path: Path) -> None:
    """The index lists this release with other bytes (its files were removed): nothing may be uploaded."""
    original = write_release(tmp_path / "a")
    store = tmp_path / "store"
    assert scrollcase(str(original.manifest_path), "--to", str(store), cwd=tmp_path).returncode == 0
    keys = original.manifest.keys
    for key in (keys.archive, keys.sha256, keys.release):
        (store / key).unlink()
    rebuilt = write_release(tmp_path / "b")  # same release, other bytes
    for extra in (("--dry-run",), ()):
        done = scrollcase(str(rebuilt.manifest_path), "--to", str(store), "--json", *extra, cwd=tmp_path)
        assert done.returncode == 10, done.stdout + done.stderr
        assert json.loads(done.stdout)["error"] == "ConflictError"
        assert stored_files(store) == ["boxes/demo-box/index.json"]


def test_defect3_empty_to_is_a_usage_error_not_the_default_store(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    done = scrollcase(str(release.manifest_path), "--to", "", "--json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["error"] == "UsageError" and "--to is empty" in done.stderr
    assert not (tmp_path / ".scrollcase").exists()


def test_defect4_index_of_another_box_is_refused_and_dangling_entries_reported(tmp_path: Path) -> None:
    store = tmp_path / "store"
    old = write_release(tmp_path / "old", version="0.9.0")
    assert scrollcase(str(old.manifest_path), "--to", str(store), cwd=tmp_path).returncode == 0
    (store / old.manifest.keys.archive).unlink()  # deleted by hand: the index entry now dangles
    release = write_release(tmp_path / "dist")
    done = scrollcase(str(release.manifest_path), "--to", str(store), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = json.loads(done.stdout)["warnings"]
    assert len(warnings) == 1 and "0.9.0" in warnings[0] and old.manifest.keys.archive in warnings[0]
    assert "warning:" in done.stderr
    index = store / "boxes/demo-box/index.json"
    index.write_text(index.read_text().replace('"boxId": "demo-box"', '"boxId": "someone-else"'))
    before = stored_files(store)
    other = write_release(tmp_path / "v2", version="2.0.0")
    refused = scrollcase(str(other.manifest_path), "--to", str(store), "--json", cwd=tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert "someone-else" in json.loads(refused.stdout)["message"]
    assert stored_files(store) == before


def test_defect7_silent_endpoint_fails_within_a_minute_naming_it(tmp_path: Path) -> None:
    """An endpoint that accepts connections and never answers made publish wait 481 s."""
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # accept, read nothing, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    release = write_release(tmp_path / "dist")
    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "us-east-1"}
    start = time.monotonic()
    try:
        done = scrollcase(
            str(release.manifest_path),
            "--to",
            "s3://bucket/p",
            "--endpoint-url",
            endpoint,
            "--json",
            cwd=tmp_path,
            env=env,
        )
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    assert time.monotonic() - start < 60
    assert done.returncode == 9, done.stderr
    assert endpoint in json.loads(done.stdout)["message"]
    assert "still waiting for s3://bucket/p: 5 s" in done.stderr  # not a silent minute


# ------------------------------------------------------------ issue 30: outputs and summary for the publish action


def runner_files(tmp_path: Path, name: str) -> tuple[dict[str, str], Path, Path]:
    output, summary = tmp_path / f"{name}.output", tmp_path / f"{name}.summary"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    return env, output, summary


def test_outputs_name_the_real_keys_under_the_store_prefix(weed: S3Server, weed_bucket: str, tmp_path: Path) -> None:
    """archive-key/release-key include the store's prefix: the bucket serves them under exactly that key."""
    bucket = weed_bucket
    release = write_release(tmp_path / "dist", size=10_000)
    env = weed.credentials_env()
    args = (str(release.manifest_path), "--to", f"s3://{bucket}/team/boxes-prod", "--endpoint-url", weed.endpoint)
    runner, output, summary = runner_files(tmp_path, "first")
    done = scrollcase(*args, cwd=tmp_path, env={**env, **runner})
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(output.read_text(encoding="utf-8"))
    client = s3_client(weed)
    assert outputs["archive-key"] == f"team/boxes-prod/{release.manifest.keys.archive}"
    assert client.get_object(Bucket=bucket, Key=outputs["archive-key"])["Body"].read() == (
        release.archive_path.read_bytes()
    )
    assert json.loads(client.get_object(Bucket=bucket, Key=outputs["release-key"])["Body"].read()) == json.loads(
        dump_release(release.manifest)
    )
    assert client.head_object(Bucket=bucket, Key=outputs["index-key"])["ContentLength"] > 0
    assert outputs["archive-url"] == f"s3://{bucket}/{outputs['archive-key']}"
    assert outputs["store"] == f"s3://{bucket}/team/boxes-prod" and outputs["published"] == "true"
    assert {o["status"] for o in json.loads(outputs["objects"])} == {"uploaded"}
    text = summary.read_text(encoding="utf-8")
    size = release.manifest.archive.size
    assert f"| archive | `s3://{bucket}/{outputs['archive-key']}` | uploaded | {size} |" in text, text
    assert "| index |" in text and "| updated |" in text
    # The publish action describes the release first (`report release --to`): the same keys and URLs.
    runner, described, _ = runner_files(tmp_path, "described")
    store = f"s3://{bucket}/team/boxes-prod"
    done = run_isolated("report", "release", str(release.manifest_path), "--to", store, cwd=tmp_path, env=runner)
    assert done.returncode == 0, done.stderr
    description = read_outputs(described.read_text(encoding="utf-8"))
    for kind in ("archive", "release", "index"):
        assert description[f"{kind}-key"] == outputs[f"{kind}-key"], kind
        assert description[f"{kind}-url"] == outputs[f"{kind}-url"], kind

    runner, output, summary = runner_files(tmp_path, "again")
    again = scrollcase(*args, cwd=tmp_path, env={**env, **runner})
    assert again.returncode == 0, again.stderr
    outputs = read_outputs(output.read_text(encoding="utf-8"))
    assert outputs["published"] == "already"
    assert {o["status"] for o in json.loads(outputs["objects"])} == {"already there"}
    text = summary.read_text(encoding="utf-8")
    assert "already published with identical bytes: nothing was written" in text
    assert "| uploaded |" not in text and "| already lists this release |" in text, text


def test_summary_of_a_dry_run_and_a_folder_store(tmp_path: Path) -> None:
    release = write_release(tmp_path / "dist")
    store = tmp_path / "store"
    runner, output, summary = runner_files(tmp_path, "dry")
    done = scrollcase(str(release.manifest_path), "--to", str(store), "--dry-run", cwd=tmp_path, env=runner)
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(output.read_text(encoding="utf-8"))
    assert outputs["published"] == "dry-run" and not store.exists()
    assert outputs["archive-key"] == release.manifest.keys.archive  # a folder store has no prefix
    assert outputs["archive-url"] == str(store / release.manifest.keys.archive)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith(f"### scrollcase publish demo-box 1.0.0 linux-x86_64-cuda12.4 -> {store}")
    assert "dry run: would send" in text and text.count("| would upload |") == 3, text
