"""``scrollcase verify RELEASE --gpu-proof BUNDLE`` as a user runs it (#34): a real packed release, the predicate
``--gpu-proof-predicate`` writes signed into a bundle by tests/support/fakesigstore.py as ``actions/attest``
would (subject: the archive's sha256), then checked by the CLI in a subprocess: exit codes and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.release import ReleaseManifest, dump_release
from scrollcase.trust.proof import PREDICATE_TYPE, dump_statement, statement_of
from tests.support.fakesigstore import FakeSigstore, workflow_identity
from tests.support.releases import box_json_for, make_manifest
from tests.support.tools import run_isolated

WORKFLOW = "acme/boxes/.github/workflows/release.yml"


def scrollcase(cwd: Path, *argv: str) -> tuple[int, str, str]:
    run = run_isolated(*argv, cwd=cwd, env={"SCROLLCASE_CACHE_DIR": str(cwd / "cache")})
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, run.stdout, run.stderr


def packed_release(work: Path, version: str = "1.0.0") -> tuple[ReleaseManifest, Path]:
    """A small box as `scrollcase build` leaves it in dist/: archive (with an executable interpreter) and manifest."""
    draft = make_manifest(version=version, cuda="12.4", size=0, sha256="0" * 64)
    tree = work / f"tree-{version}"
    (tree / "venv" / "bin").mkdir(parents=True)
    (tree / "venv" / "bin" / "python").write_text("#!/bin/sh\n")
    (tree / "venv" / "bin" / "python").chmod(0o755)
    (tree / "box.json").write_bytes(dump_box_json(box_json_for(draft)))
    packed = pack_tree(tree, work / "dist" / draft.archive.name, level=1)
    manifest = draft.model_copy(
        update={"archive": draft.archive.model_copy(update={"size": packed.size, "sha256": packed.sha256})}
    )
    path = packed.path.with_name(manifest.archive.name.removesuffix(".tar.zst") + ".release.json")
    path.write_bytes(dump_release(manifest))
    return manifest, path


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ReleaseManifest, Path, FakeSigstore]:
    """The release, its predicate written by the CLI, and the bundle the fake instance signed over it."""
    work = tmp_path_factory.mktemp("gpu-proof")
    manifest, release = packed_release(work)
    code, out, err = scrollcase(work, "verify", str(release), "--gpu-proof-predicate", "proof/predicate.json", "--json")
    assert code == 0, err
    assert json.loads(out)["gpuProofPredicate"] == "proof/predicate.json"
    predicate = json.loads((work / "proof" / "predicate.json").read_bytes())
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": manifest.archive.name, "digest": {"sha256": manifest.archive.sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
    # what actions/attest signs from subject-path and predicate-path is the statement the library makes
    assert json.loads(dump_statement(statement_of(manifest))) == statement
    instance = FakeSigstore("cli")
    bundle = json.dumps(instance.attest(json.dumps(statement).encode(), workflow_identity("acme/boxes")))
    (work / "box.gpu-proof.sigstore.json").write_text(bundle)
    instance.write_trusted_root(work / "trusted_root.json")
    return work, manifest, release, instance


def verify(work: Path, release: Path, *extra: str) -> tuple[int, str, str]:
    proof = ("--gpu-proof", "box.gpu-proof.sigstore.json", "--sigstore-root", "trusted_root.json")
    return scrollcase(work, "verify", str(release), *proof, *extra)


def test_a_signed_proof_verifies(signed: tuple[Path, ReleaseManifest, Path, FakeSigstore]) -> None:
    work, manifest, release, _ = signed
    code, out, err = verify(work, release, "--signer-workflow", WORKFLOW, "--json")
    assert code == 0, err
    proof = json.loads(out)["gpuProof"]
    assert proof["signer"] == f"https://github.com/{WORKFLOW}@refs/tags/release-1"
    assert proof["subject"] == [{"name": manifest.archive.name, "digest": {"sha256": manifest.archive.sha256}}]
    assert "checking the GPU proof box.gpu-proof.sigstore.json offline" in err
    code, out, _ = verify(work, release, "--signer-workflow", WORKFLOW)
    assert code == 0 and f"GPU proof: signed by https://github.com/{WORKFLOW}@refs/tags/release-1" in out


def test_another_signer_is_exit_13(signed: tuple[Path, ReleaseManifest, Path, FakeSigstore]) -> None:
    work, _, release, _ = signed
    code, _, err = verify(work, release, "--signer-workflow", "acme/boxes/.github/workflows/ci.yml")
    assert code == 13
    assert "not by the workflow acme/boxes/.github/workflows/ci.yml (any ref)" in err


def test_the_proof_of_another_release_is_exit_13_before_unpacking(
    signed: tuple[Path, ReleaseManifest, Path, FakeSigstore], tmp_path: Path
) -> None:
    work, _, _, _ = signed
    _, other = packed_release(tmp_path, version="1.0.1")
    for name in ("box.gpu-proof.sigstore.json", "trusted_root.json"):
        (tmp_path / name).write_bytes((work / name).read_bytes())
    (tmp_path / "dist" / other.name.replace(".release.json", ".tar.zst")).unlink()  # never reached
    code, _, err = verify(tmp_path, other, "--signer-workflow", WORKFLOW)
    assert code == 13, err
    assert "is a GPU proof of demo-box-1.0.0-linux-x86_64-cuda12.4.tar.zst" in err
    assert "not of demo-box-1.0.1-linux-x86_64-cuda12.4.tar.zst" in err


def test_a_proof_without_its_root_or_signer_is_a_usage_error(
    signed: tuple[Path, ReleaseManifest, Path, FakeSigstore],
) -> None:
    work, _, release, _ = signed
    code, _, err = scrollcase(work, "verify", str(release), "--gpu-proof", "box.gpu-proof.sigstore.json")
    assert code == 2
    assert "--gpu-proof needs --sigstore-root and one of --signer-workflow or --cert-identity" in err
    code, _, err = scrollcase(work, "verify", "--installed", "somewhere", "--gpu-proof", "x.json")
    assert code == 2 and "about a release, not an installed box" in err


def test_no_predicate_is_written_for_a_release_that_does_not_verify(tmp_path: Path) -> None:
    manifest, release = packed_release(tmp_path)
    archive = release.parent / manifest.archive.name
    data = bytearray(archive.read_bytes())
    data[-40] ^= 0xFF  # same size, other bytes: the sha256 differs
    archive.write_bytes(bytes(data))
    code, _, err = scrollcase(tmp_path, "verify", str(release), "--gpu-proof-predicate", "predicate.json")
    assert code == 8, err
    assert not (tmp_path / "predicate.json").exists()
    assert [p.name for p in tmp_path.iterdir() if "predicate" in p.name] == []  # no temp left either
