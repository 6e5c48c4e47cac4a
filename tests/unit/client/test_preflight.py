"""The checks before a byte is extracted (scrollcase/client/preflight.py): the digest to expect from a
manifest, an option or a sidecar; the GPU check and its refusal, with nvidia-smi faked by probes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from scrollcase.client.preflight import (
    check_gpu,
    expected_digest,
    read_manifest,
    refuse,
    release_gpu_check,
)
from scrollcase.errors import UsageError
from scrollcase.format.release import dump_release
from scrollcase.host.facts import HostProbes
from scrollcase.io.proc import RunResult
from scrollcase.targets.hostgpu import GpuFacts
from tests.support.releases import make_manifest

SHA = "ab" * 32


def _probes(asked: list[str], stdout: str = "550.54.14, 8.6, NVIDIA RTX\n") -> HostProbes:
    def run(argv: Sequence[str]) -> RunResult:
        asked.append(Path(argv[0]).name)
        return RunResult(tuple(argv), 0, stdout, "", 0.0)

    return HostProbes(run=run, which=lambda name: f"/usr/bin/{name}", platform=lambda: ("linux", "x86_64"))


def test_a_manifest_names_the_archive_beside_it_and_its_digest(tmp_path: Path) -> None:
    manifest = make_manifest(size=123, sha256=SHA)
    source = tmp_path / "demo.release.json"
    source.write_bytes(dump_release(manifest))
    assert read_manifest(source) == manifest
    assert expected_digest(source, None, None) == (tmp_path / manifest.archive.name, 123, SHA)
    with pytest.raises(UsageError, match="conflict with a release manifest"):
        expected_digest(source, SHA, None, manifest)


def test_a_bare_archive_takes_its_digest_from_the_option_or_the_sidecar(tmp_path: Path) -> None:
    archive = tmp_path / "box.tar.zst"
    archive.write_bytes(b"12345")
    assert read_manifest(archive) is None
    with pytest.raises(UsageError, match="no sha256 for"):
        expected_digest(archive, None, None)
    assert expected_digest(archive, SHA.upper(), None) == (archive, 5, SHA)
    (tmp_path / "box.tar.zst.sha256").write_text(f"{SHA}  box.tar.zst\n")
    assert expected_digest(archive, None, 9) == (archive, 9, SHA)
    with pytest.raises(UsageError, match="64 hex digits"):
        expected_digest(archive, "abc", None)


def test_nvidia_smi_is_asked_only_for_a_cuda_box_not_skipped(tmp_path: Path) -> None:
    asked: list[str] = []
    source = tmp_path / "r.release.json"
    assert check_gpu(None, source, False, _probes(asked)).status == "skip"
    assert check_gpu(make_manifest(cuda=None, size=1, sha256=SHA), source, False, _probes(asked)).status == "skip"
    skipped = check_gpu(make_manifest(size=1, sha256=SHA), source, True, _probes(asked))
    assert (skipped.status, [p.severity for p in skipped.problems]) == ("skip", ["warning"])
    assert asked == []
    assert check_gpu(make_manifest(size=1, sha256=SHA), source, False, _probes(asked)).status == "pass"
    assert asked == ["nvidia-smi"]


def test_a_failed_check_is_refused_saying_what_was_not_done() -> None:
    manifest = make_manifest(size=1, sha256=SHA)
    result = release_gpu_check(manifest, GpuFacts(), False, "store/r.release.json")
    assert result.errors
    error = refuse(manifest, result, "downloaded", "another target (--target)")
    assert error.exit_code == 11 and error.problems == result.problems
    assert "nothing was downloaded" in error.message and "another target (--target)" in (error.fix or "")
    assert "nothing was extracted" in refuse(manifest, result).message
