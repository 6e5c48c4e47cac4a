"""GPU evidence: the probe's answer, the files' answer, and the verdict against the target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.errors import BuildError
from scrollcase.targets.evidence import (
    FrameworkEvidence,
    GpuEvidence,
    RuntimePackage,
    arch_list,
    evidence_problems,
    make_evidence,
    parse_probe,
    require_evidence,
    scan_files,
)
from scrollcase.targets.vocabulary import TargetSpec

CUDA124 = TargetSpec("linux", "x86_64", "cuda", "12.4")
CPU = TargetSpec("linux", "x86_64", "cpu")
TORCH_124 = FrameworkEvidence(version="2.6.0", cuda="12.4", cudnn=90100, archList=["sm_50", "sm_90"])


def test_arch_flags_become_a_sorted_list_sass_before_ptx() -> None:
    assert arch_list("sm_90 sm_50 compute_90 sm_86 sm_100a bogus") == [
        "sm_50",
        "sm_86",
        "sm_90",
        "sm_100a",
        "compute_90",
    ]
    assert arch_list(["sm_75", "sm_75"]) == ["sm_75"]
    assert arch_list(None) == []


def test_probe_output_with_and_without_torch() -> None:
    line = json.dumps({"torch": {"version": "2.6.0+cu124", "cuda": "12.4", "cudnn": 90100, "archFlags": "sm_50 sm_90"}})
    framework = parse_probe("some warning\n" + line + "\n")
    assert framework == FrameworkEvidence(version="2.6.0+cu124", cuda="12.4", cudnn=90100, archList=["sm_50", "sm_90"])
    assert parse_probe("{}\n") is None
    cpu = parse_probe(json.dumps({"torch": {"version": "2.6.0+cpu", "cuda": None, "cudnn": None}}))
    assert cpu is not None and cpu.cuda is None and cpu.archList == []


def test_the_framework_decides_the_cuda_runtime() -> None:
    runtime = RuntimePackage(name="nvidia-cuda-runtime-cu12", version="12.4.127", kind="pypi")
    evidence = make_evidence(TORCH_124, [runtime], ["libcudart.so.12"])
    assert evidence.cudaRuntime == "12.4" and evidence.source == "framework"
    assert evidence_problems(CUDA124, evidence) == []
    assert evidence.describe() == "torch 2.6.0: CUDA 12.4, cuDNN 90100, sm_50 sm_90"


def test_a_cpu_torch_under_a_cuda_name_is_refused() -> None:
    evidence = make_evidence(FrameworkEvidence(version="2.6.0+cpu"), [], [])
    [problem] = evidence_problems(CUDA124, evidence)
    assert "CPU build" in problem.message and "torch.version.cuda is None" in problem.message
    with pytest.raises(BuildError, match=r"not what linux-x86_64-cuda12\.4 promises"):
        require_evidence(CUDA124, evidence)


def test_a_torch_for_another_cuda_is_refused_with_the_pypi_fix() -> None:
    evidence = make_evidence(FrameworkEvidence(version="2.15.0", cuda="13.2"), [], [])
    [problem] = evidence_problems(CUDA124, evidence)
    assert "needs CUDA 12.4, but the box holds CUDA 13.2" in problem.message
    assert "torch 2.5/2.6" in (problem.fix or "") and "whl/cu124" in (problem.fix or "")


def test_without_a_framework_the_files_speak() -> None:
    packages = [
        RuntimePackage(name="cuda-cudart", version="12.4.99", kind="conda"),
        RuntimePackage(name="cuda-version", version="12.4", kind="conda"),
    ]
    evidence = make_evidence(None, packages, ["libcudart.so.12", "libcudart.so.12"])
    assert (evidence.cudaRuntime, evidence.source, evidence.cudartSonames) == ("12.4", "files", ["libcudart.so.12"])
    assert evidence_problems(CUDA124, evidence) == []
    none = make_evidence(None, [], [])
    assert none.source == "none" and none.cudaRuntime is None
    assert "no CUDA runtime at all" in evidence_problems(CUDA124, none)[0].message
    mixed = make_evidence(
        None,
        [
            RuntimePackage(name="cuda-version", version="12.4", kind="conda"),
            RuntimePackage(name="nvidia-cuda-runtime", version="13.0.96", kind="pypi"),
        ],
        [],
    )
    assert "13.0" in evidence_problems(CUDA124, mixed)[0].message


def test_a_cpu_target_must_not_carry_cuda() -> None:
    assert evidence_problems(CPU, make_evidence(FrameworkEvidence(version="2.6.0+cpu"), [], [])) == []
    [problem] = evidence_problems(CPU, make_evidence(TORCH_124, [], []))
    assert "not a CUDA target" in problem.message and "whl/cpu" in (problem.fix or "")


def test_scan_finds_runtime_wheels_conda_records_and_sonames(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    site = env / "lib/python3.11/site-packages"
    (site / "nvidia_cuda_runtime_cu12-12.4.127.dist-info").mkdir(parents=True)
    (site / "nvidia_cublas_cu12-12.4.5.8.dist-info").mkdir()
    (site / "nvidia/cuda_runtime/lib").mkdir(parents=True)
    (site / "nvidia/cuda_runtime/lib/libcudart.so.12").write_bytes(b"\x7fELF")
    (env / "conda-meta").mkdir()
    (env / "conda-meta/cuda-version-12.4-h3060b56_3.json").write_text(
        json.dumps({"name": "cuda-version", "version": "12.4"})
    )
    (env / "conda-meta/numpy-2.0-py311_0.json").write_text("{}")
    (env / "Library/bin").mkdir(parents=True)
    (env / "Library/bin/cudart64_12.dll").write_bytes(b"MZ")
    packages, sonames = scan_files(env)
    assert sorted((p.name, p.version, p.kind) for p in packages) == [
        ("cuda-version", "12.4", "conda"),
        ("nvidia-cuda-runtime-cu12", "12.4.127", "pypi"),
    ]
    assert sonames == ["cudart64_12.dll", "libcudart.so.12"]


def test_evidence_round_trips_as_json() -> None:
    evidence = make_evidence(TORCH_124, [], [])
    assert GpuEvidence.model_validate_json(evidence.model_dump_json()) == evidence


# The target promises CUDA major.minor: evidence is judged at minor precision, whichever source speaks.
CUDA128 = TargetSpec("linux", "x86_64", "cuda", "12.8")
METAL = TargetSpec("osx", "arm64", "metal")


@pytest.mark.parametrize(
    ("torch_cuda", "target", "ok"),
    [
        ("12.4", CUDA124, True),
        ("12.1", CUDA124, False),  # the same major, an older minor
        ("12.6", CUDA124, False),  # the same major, a newer minor
        ("12.4", CUDA128, False),
        ("12.8", CUDA128, True),
        ("11.8", CUDA124, False),
    ],
)
def test_a_framework_for_another_minor_cuda_is_refused(torch_cuda: str, target: TargetSpec, ok: bool) -> None:
    evidence = make_evidence(FrameworkEvidence(version="2.6.0", cuda=torch_cuda), [], [])
    problems = evidence_problems(target, evidence)
    assert (problems == []) == ok
    if not ok:
        assert f"needs CUDA {target.cuda_version}, but the box holds CUDA {torch_cuda}" in problems[0].message


def test_runtime_files_of_another_minor_cuda_are_refused() -> None:
    older = make_evidence(None, [RuntimePackage(name="cuda-cudart", version="12.1.105", kind="conda")], [])
    [problem] = evidence_problems(CUDA124, older)
    assert "needs CUDA 12.4, but the box holds CUDA 12.1" in problem.message and problem.value == "12.1"


def test_runtime_files_of_two_minors_of_one_major_are_refused() -> None:
    mixed = make_evidence(
        None,
        [
            RuntimePackage(name="cuda-cudart", version="12.4.127", kind="conda"),
            RuntimePackage(name="nvidia-cuda-runtime-cu12", version="12.1.105", kind="pypi"),
        ],
        [],
    )
    [problem] = evidence_problems(CUDA124, mixed)
    assert "several versions (12.1, 12.4)" in problem.message


@pytest.mark.parametrize("target", [CPU, METAL], ids=["cpu", "metal"])
def test_a_box_that_is_not_cuda_must_not_carry_cuda_files_either(target: TargetSpec) -> None:
    """Without torch the files speak: a CUDA runtime in a cpu or metal box is refused all the same."""
    files = make_evidence(None, [RuntimePackage(name="cuda-cudart", version="12.4.127", kind="conda")], [])
    [problem] = evidence_problems(target, files)
    assert "is not a CUDA target, but the box holds CUDA 12.4" in problem.message
    assert evidence_problems(target, make_evidence(None, [], [])) == []


def test_a_cpu_torch_beside_cuda_runtime_wheels_is_still_a_cpu_build() -> None:
    runtime = RuntimePackage(name="nvidia-cuda-runtime-cu12", version="12.4.127", kind="pypi")
    evidence = make_evidence(FrameworkEvidence(version="2.6.0+cpu"), [runtime], ["libcudart.so.12"])
    [problem] = evidence_problems(CUDA124, evidence)
    assert "is a CPU build" in problem.message
