"""`scrollcase report release --to STORE`: the publish action's "Describe the release" step lists each object's
key in the store, the store's prefix included, and its URL, as publish's own outputs name them (issue 30).

Through the CLI in this process, with the runner's output and summary files in tmp_path: the step outputs are
parsed as the runner parses them, the summary is the markdown GitHub shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase import cli
from scrollcase.commands.publish import publish_outputs
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from tests.support.outputs import read_outputs
from tests.support.releases import write_release


def report_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[dict[str, str], str]:
    output, summary = tmp_path / "output", tmp_path / "summary"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cli.main(["report", "release", *args]) == 0
    return read_outputs(output.read_text(encoding="utf-8")), summary.read_text(encoding="utf-8")


def test_an_s3_store_gives_every_key_its_prefix_and_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = write_release(tmp_path / "dist", sbom=b'{"bomFormat": "CycloneDX"}')
    keys, sbom = release.manifest.keys, release.manifest.sbom
    assert sbom is not None
    outputs, summary = report_release(
        tmp_path, monkeypatch, str(release.manifest_path), "--to", "s3://models/team/prod/"
    )
    folder = keys.release.rsplit("/", 1)[0]
    expected = {
        "archive": f"team/prod/{keys.archive}",
        "release": f"team/prod/{keys.release}",
        "sbom": f"team/prod/{folder}/{sbom.name}",
        "index": "team/prod/boxes/demo-box/index.json",
    }
    for kind, key in expected.items():
        assert outputs[f"{kind}-key"] == key, kind
        assert outputs[f"{kind}-url"] == f"s3://models/{key}", kind
    assert outputs["store"] == "s3://models/team/prod"
    # The summary a person reads lists the same keys; the manifest's own, prefix-less keys are not shown.
    assert f"| archive-key | team/prod/{keys.archive} |" in summary, summary
    assert f"| archive-url | s3://models/team/prod/{keys.archive} |" in summary, summary
    assert f"| {keys.archive} |" not in summary and f"| {keys.release} |" not in summary, summary
    assert outputs["sha256"] == release.manifest.archive.sha256  # the manifest's facts are still there


def test_a_folder_store_gives_the_keys_and_paths_publish_then_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is written by the report; publish then puts every object at exactly the reported key and URL."""
    release = write_release(tmp_path / "dist")
    store = tmp_path / "store"
    outputs, _ = report_release(tmp_path, monkeypatch, str(release.manifest_path), "--to", str(store))
    assert not store.exists()
    assert outputs["sbom-key"] == outputs["sbom-url"] == ""  # this release has no SBOM
    result = publish(LocalStore(store), release.manifest, release.archive_path)
    published = publish_outputs(result, LocalStore(store))
    for name in ("archive-key", "archive-url", "release-key", "release-url", "index-key", "index-url", "store"):
        assert outputs[name] == published[name], name
    assert Path(outputs["archive-url"]).read_bytes() == release.archive_path.read_bytes()
    assert Path(outputs["index-url"]).is_file()


def test_without_to_the_keys_are_the_manifests_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build action knows no store: it reports the keys relative to any store, and no URLs."""
    release = write_release(tmp_path / "dist")
    outputs, _ = report_release(tmp_path, monkeypatch, str(release.manifest_path))
    assert outputs["archive-key"] == release.manifest.keys.archive
    assert "archive-url" not in outputs and "store" not in outputs


def test_an_empty_to_is_a_usage_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unset CI variable for the publish action's `to`: refused before anything is described."""
    release = write_release(tmp_path / "dist")
    assert cli.main(["report", "release", str(release.manifest_path), "--to", ""]) == 2
    assert "--to is empty" in capsys.readouterr().err
