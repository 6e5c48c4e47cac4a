"""The install-time GPU check: a pure rule over the release's target, driver minimum, evidence and host GPUs."""

from __future__ import annotations

import pytest

from scrollcase.targets.evidence import FrameworkEvidence, GpuEvidence
from scrollcase.targets.gpucheck import ARCH_KEY, DRIVER_KEY, gpu_check, parse_arch, parse_cap
from scrollcase.targets.hostgpu import Gpu, GpuFacts
from scrollcase.targets.vocabulary import TargetSpec

CUDA = TargetSpec("linux", "x86_64", "cuda", "12.4")
TORCH_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]
MIN = "550.54.14"


def evidence(archs: list[str] | None = None) -> GpuEvidence:
    fw = FrameworkEvidence(version="2.6.0", cuda="12.4", cudnn=90100, archList=TORCH_ARCHS if archs is None else archs)
    return GpuEvidence(cudaRuntime="12.4", source="framework", framework=fw)


def host(*caps: str | None, driver: str = MIN) -> GpuFacts:
    return GpuFacts(tuple(Gpu(i, driver, cap, f"GPU model {i}") for i, cap in enumerate(caps)))


def check(facts: GpuFacts, archs: list[str] | None = None, min_driver: str | None = MIN):  # type: ignore[no-untyped-def]
    return gpu_check(CUDA, min_driver, evidence(archs), facts, "x.release.json")


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("sm_86", (False, 8, 6, "")),
        ("compute_90", (True, 9, 0, "")),
        ("sm_90a", (False, 9, 0, "a")),
        ("sm_100", (False, 10, 0, "")),
        ("compute_120", (True, 12, 0, "")),
        ("sm_100f", (False, 10, 0, "f")),
    ],
)
def test_parse_arch(text: str, parsed: tuple[bool, int, int, str]) -> None:
    arch = parse_arch(text)
    assert arch is not None and (arch.ptx, arch.major, arch.minor, arch.suffix) == parsed


def test_parse_arch_and_cap_reject_junk() -> None:
    assert parse_arch("sm_5") is None and parse_arch("gfx90a") is None
    assert parse_cap("8.6") == (8, 6) and parse_cap("10.0") == (10, 0)
    assert parse_cap(None) is None and parse_cap("[N/A]") is None


@pytest.mark.parametrize(
    ("driver", "status"),
    [
        ("550.54.14", "pass"),  # equal
        ("550.54.15", "pass"),
        ("550.100", "pass"),
        ("560.35.03", "pass"),  # newer, numerically
        ("550.54.9", "fail"),
        ("535.104.05", "fail"),  # older
    ],
)
def test_driver_compared_numerically(driver: str, status: str) -> None:
    result = check(host("8.6", driver=driver))
    assert result.status == status
    if status == "fail":
        (error,) = result.errors
        assert error.key == DRIVER_KEY and error.value == driver
        assert f"{driver} is older than minNvidiaDriverVersion 550.54.14" in error.message
        assert "update the NVIDIA driver to 550.54.14 or newer" in (error.fix or "")
        assert "--skip-gpu-check" in (error.fix or "") and "another target" in (error.fix or "")


def test_driver_is_checked_once_for_several_gpus() -> None:
    result = check(host("8.6", "8.9", "9.0", driver="535.104.05"))
    assert [p.key for p in result.errors] == [DRIVER_KEY]


def test_no_min_driver_is_a_notice() -> None:
    result = check(host("8.6"), min_driver=None)
    assert result.status == "pass" and [p.severity for p in result.problems] == ["notice"]


@pytest.mark.parametrize(
    "why",
    [
        "nvidia-smi is not on PATH (no NVIDIA driver installed?)",
        "nvidia-smi failed: NVIDIA-SMI has failed",
        "nvidia-smi listed no GPU",
    ],
)
def test_no_gpu_is_refused_naming_why(why: str) -> None:
    result = check(GpuFacts(error=why))
    (error,) = result.errors
    assert result.status == "fail" and why in error.message and "linux-x86_64-cuda12.4" in error.message
    assert "--skip-gpu-check" in (error.fix or "")
    assert check(GpuFacts()).status == "fail"  # no error text, no GPU: still refused


@pytest.mark.parametrize(
    ("cap", "runs", "arch"),
    [
        ("8.6", "sass", "sm_86"),  # exact
        ("8.9", "sass", "sm_86"),  # same major, newer minor: sm_86 runs on 8.9
        ("8.0", "sass", "sm_80"),
        ("7.5", "sass", "sm_75"),
        ("9.0", "sass", "sm_90"),
        ("10.0", "ptx", "compute_90"),  # a newer major: only the PTX runs (JIT)
        ("12.0", "ptx", "compute_90"),
    ],
)
def test_sass_same_major_and_ptx_for_newer_gpus(cap: str, runs: str, arch: str) -> None:
    result = check(host(cap))
    (verdict,) = result.gpus
    assert (verdict.runs, verdict.arch) == (runs, arch)
    if runs == "ptx":
        assert result.status == "warn" and not result.errors
        (warning,) = result.problems
        assert warning.severity == "warning" and "JIT" in warning.message and "compute_90" in warning.message
    else:
        assert result.status == "pass" and not result.problems


def test_newer_major_without_ptx_is_refused() -> None:
    result = check(host("10.0"), archs=["sm_80", "sm_86", "sm_90"])
    (error,) = result.errors
    assert error.key == ARCH_KEY and error.value == "sm_80 sm_86 sm_90"
    assert "GPU 0 (GPU model 0, compute capability 10.0)" in error.message
    assert "sm_100" in (error.fix or "") and "--skip-gpu-check" in (error.fix or "")


def test_older_minor_than_any_sass_and_no_ptx_is_refused() -> None:
    # sm_86 does not run on 8.0 (minor too new), and PTX compute_90 is newer than 8.0
    result = check(host("8.0"), archs=["sm_86", "sm_90", "compute_90"])
    assert result.status == "fail" and result.gpus[0].runs == "no"


@pytest.mark.parametrize(("cap", "runs"), [("9.0", "sass"), ("9.1", "no"), ("8.9", "no"), ("10.0", "no")])
def test_arch_specific_sm_90a_only_on_exactly_9_0(cap: str, runs: str) -> None:
    assert check(host(cap), archs=["sm_90a"]).gpus[0].runs == runs


def test_ptx_runs_on_equal_or_newer_capability() -> None:
    assert check(host("8.0"), archs=["compute_80"]).gpus[0].runs == "ptx"
    assert check(host("7.5"), archs=["compute_80"]).gpus[0].runs == "no"


def test_several_gpus_refused_only_when_none_can_run_it() -> None:
    mixed = check(host("8.6", "6.1"), archs=["sm_80", "sm_86"])
    assert mixed.status == "warn" and not mixed.errors
    (warning,) = mixed.problems
    assert "GPU 1 (GPU model 1, compute capability 6.1) cannot run" in warning.message
    assert "GPU 0 (GPU model 0, compute capability 8.6) can" in warning.message
    none = check(host("6.1", "5.2"), archs=["sm_80", "sm_86"])
    (error,) = none.errors
    assert "GPU 0" in error.message and "GPU 1" in error.message and "sm_52, sm_61" in (error.fix or "")


def test_unknown_capability_is_not_refused() -> None:
    result = check(host(None))
    assert result.status == "pass" and result.gpus[0].runs == "unknown"
    assert [p.severity for p in result.problems] == ["notice"]


@pytest.mark.parametrize("target", [TargetSpec("linux", "x86_64", "cpu"), TargetSpec("osx", "arm64", "metal")])
def test_cpu_and_metal_boxes_skip_the_whole_check(target: TargetSpec) -> None:
    result = gpu_check(target, None, None, GpuFacts(error="nvidia-smi is not on PATH"))
    assert result.status == "skip" and not result.problems and not result.gpus


def test_no_arch_list_skips_the_arch_part_with_a_notice() -> None:
    files_only = GpuEvidence(cudaRuntime="12.4", source="files")
    result = gpu_check(CUDA, MIN, files_only, host("12.0"))
    assert result.status == "pass" and [(p.key, p.severity) for p in result.problems] == [(ARCH_KEY, "notice")]
    old = gpu_check(CUDA, MIN, None, host("12.0"))
    assert [(p.key, p.severity) for p in old.problems] == [("gpu", "notice")]
    assert "older scrollcase" in old.problems[0].message
    assert gpu_check(CUDA, "560", None, host("12.0")).status == "fail"  # the driver is still checked


def test_json_lists_every_gpu_with_its_verdict() -> None:
    data = check(host("8.6", "10.0")).to_json()
    assert data["status"] == "warn"
    assert data["gpus"] == [
        {
            "index": 0,
            "name": "GPU model 0",
            "computeCapability": "8.6",
            "driverVersion": MIN,
            "runs": "sass",
            "arch": "sm_86",
        },
        {
            "index": 1,
            "name": "GPU model 1",
            "computeCapability": "10.0",
            "driverVersion": MIN,
            "runs": "ptx",
            "arch": "compute_90",
        },
    ]


# The less common arch forms (docs/archive.md, "Install-time GPU check"): a family-specific sm_ABf follows the
# plain SASS rule (same major, minor <= the GPU's); an arch-specific sm_ABa/compute_ABa runs on exactly A.B;
# plain PTX compute_AB runs on every capability >= A.B, compared at minor precision.
@pytest.mark.parametrize(
    ("arch", "cap", "runs"),
    [
        ("sm_100f", "10.0", "sass"),
        ("sm_100f", "10.3", "sass"),  # the family: B300 runs B200's family SASS
        ("sm_100f", "9.0", "no"),
        ("sm_100f", "12.0", "no"),  # another major is another family
        ("sm_103f", "10.0", "no"),  # a newer minor than the GPU's
        ("compute_100f", "10.3", "ptx"),
        ("compute_100f", "12.0", "no"),  # family PTX does not JIT for another major
        ("sm_100a", "10.0", "sass"),
        ("sm_100a", "10.3", "no"),
        ("compute_90a", "9.0", "ptx"),
        ("compute_90a", "10.0", "no"),  # arch-specific PTX: that capability only
        ("compute_86", "8.6", "ptx"),
        ("compute_86", "8.9", "ptx"),
        ("compute_86", "9.0", "ptx"),
        ("compute_86", "8.0", "no"),  # an older minor of the same major: minor precision
        ("compute_80", "7.5", "no"),
    ],
)
def test_family_arch_specific_and_ptx_forms(arch: str, cap: str, runs: str) -> None:
    result = check(host(cap), archs=[arch])
    (verdict,) = result.gpus
    assert verdict.runs == runs
    assert result.status == {"sass": "pass", "ptx": "warn", "no": "fail"}[runs]
    if runs != "no":
        assert verdict.arch == arch


def test_the_newest_matching_sass_is_used_and_sass_beats_ptx() -> None:
    result = check(host("8.9"), archs=["sm_80", "sm_86", "compute_80", "compute_86"])
    assert (result.gpus[0].runs, result.gpus[0].arch) == ("sass", "sm_86")
    assert result.status == "pass" and not result.problems  # SASS runs: no JIT warning


def test_mixed_host_with_a_gpu_of_unknown_capability_is_never_refused() -> None:
    """Several GPUs, one of them unknown (a driver before 510 on one line): refused only when no GPU can."""
    unknown_and_cannot = check(host(None, "6.1"), archs=["sm_80", "sm_86"])
    assert unknown_and_cannot.status == "warn" and not unknown_and_cannot.errors
    assert [v.runs for v in unknown_and_cannot.gpus] == ["unknown", "no"]
    warning = next(p for p in unknown_and_cannot.problems if p.severity == "warning")
    assert "GPU 1 (GPU model 1, compute capability 6.1) cannot run" in warning.message
    assert "the GPUs of unknown capability may" in warning.message
    assert any(p.severity == "notice" and "GPU 0" in p.message for p in unknown_and_cannot.problems)
    unknown_and_can = check(host("8.6", None), archs=["sm_80", "sm_86"])
    assert unknown_and_can.status == "pass" and [v.runs for v in unknown_and_can.gpus] == ["sass", "unknown"]
    all_three = check(host("6.1", None, "8.6"), archs=["sm_80", "sm_86"])
    assert all_three.status == "warn" and not all_three.errors
    assert "GPU 2 (GPU model 2, compute capability 8.6) can" in all_three.problems[-1].message


def test_the_oldest_driver_of_a_mixed_host_decides() -> None:
    """Every GPU runs under one driver; should nvidia-smi list two, the older one stands for all."""
    facts = GpuFacts((Gpu(0, "560.35.03", "8.6", "A"), Gpu(1, "535.104.05", "8.6", "B")))
    result = check(facts)
    (error,) = result.errors
    assert error.key == DRIVER_KEY and error.value == "535.104.05"
    newer_first = GpuFacts((Gpu(0, "535.104.05", "8.6", "A"), Gpu(1, "560.35.03", "8.6", "B")))
    assert check(newer_first).status == "fail"
