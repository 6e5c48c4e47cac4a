"""Host checks (pure verdicts over facts; probes driven by injected runners) and the doctor report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from scrollcase.errors import Problem
from scrollcase.host.doctor import diagnose
from scrollcase.host.facts import GIB, HostFacts, HostProbes, gather_facts, host_checks
from scrollcase.io.proc import RunResult
from scrollcase.lock.manifest import parse_manifest
from scrollcase.lock.rules import manifest_problems
from scrollcase.recipe.loader import parse_recipe
from scrollcase.recipe.model import Recipe
from scrollcase.targets import cpu, cuda
from scrollcase.targets.hostgpu import Gpu, dotted_key, gather_gpus
from tests.recipe_samples import cpu_recipe, cuda_recipe, to_text

CUDA = parse_recipe(to_text(cuda_recipe()))  # minNvidiaDriverVersion 550.54.14, pixiVersion 0.73.0
CPU = parse_recipe(to_text(cpu_recipe()))


def facts(**changes: object) -> HostFacts:
    base: dict[str, object] = {
        "platform": "linux",
        "arch": "x86_64",
        "driver_versions": ("550.54.14",),
        "free_bytes": 100 * GIB,
        "pixi_found": True,
        "pixi_version": "0.73.0",
    }
    base.update(changes)
    return HostFacts(**base)  # type: ignore[arg-type]


def statuses(fs: HostFacts, recipe=CUDA, min_free_gb: float | None = None) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {c.name: c.status for c in host_checks(fs, recipe, min_free_gb)}


def test_all_good() -> None:
    assert statuses(facts()) == {"native": "pass", "nvidia-driver": "pass", "disk": "pass", "pixi": "pass"}


@pytest.mark.parametrize(
    ("plat", "arch", "status"),
    [
        ("linux", "x86_64", "pass"),
        ("linux", "aarch64", "fail"),
        ("windows", "x86_64", "fail"),
        ("osx", "arm64", "fail"),
    ],
)
def test_native_build_only(plat: str, arch: str, status: str) -> None:
    check = host_checks(facts(platform=plat, arch=arch), CUDA)[0]
    assert check.status == status
    if status == "fail":
        assert "natively" in check.message and check.fix and "linux-x86_64" in check.fix


@pytest.mark.parametrize(
    ("drivers", "status"),
    [
        (("550.54.14",), "pass"),
        (("550.54.15",), "pass"),
        (("550.100",), "pass"),  # numerically, not as text: 100 > 54
        (("560.28.03",), "pass"),
        (("550.54.9",), "fail"),
        (("535.183.01",), "fail"),
        (("560.1", "545.23.08"), "fail"),  # the oldest GPU's driver decides
    ],
)
def test_driver_version_compared_numerically(drivers: tuple[str, ...], status: str) -> None:
    check = host_checks(facts(driver_versions=drivers), CUDA)[1]
    assert check.status == status, check
    if status == "fail":
        assert "older than minNvidiaDriverVersion 550.54.14" in check.message and "550.54.14" in (check.fix or "")


@pytest.mark.parametrize(("recipe", "gib"), [(CPU, 5), (CUDA, 20)], ids=["cpu", "cuda"])
def test_the_default_free_disk_is_5_gib_and_20_for_cuda(recipe: Recipe, gib: int) -> None:
    """docs/recipes.md: a warning under --min-free-gb, by default 20 GiB for CUDA and 5 otherwise."""
    assert statuses(facts(free_bytes=gib * GIB), recipe)["disk"] == "pass"
    low = host_checks(facts(free_bytes=gib * GIB - 1), recipe)
    (disk,) = [c for c in low if c.name == "disk"]
    assert disk.status == "warn" and disk.message.endswith(f"under {gib} GiB"), disk.message


def test_the_cuda_driver_check_fails_on_a_probe_error_and_on_no_driver_alike() -> None:
    """Either is enough: no driver listed (even without a probe error), or a probe that failed."""
    assert cuda.driver_check("550.54.14", (), None)[1:3] == ("fail", "no NVIDIA driver found")
    failed = cuda.driver_check("550.54.14", ("560.35.03",), "nvidia-smi timed out")
    assert failed[1:3] == ("fail", "nvidia-smi timed out") and failed[3]


def test_no_driver_fails_cuda_and_is_skipped_otherwise() -> None:
    missing = facts(driver_versions=(), driver_error="nvidia-smi is not on PATH")
    check = host_checks(missing, CUDA)[1]
    assert check.status == "fail" and "nvidia-smi" in check.message and check.fix
    assert statuses(missing, CPU)["nvidia-driver"] == "skip"


def test_disk_warns_under_threshold() -> None:
    low = facts(free_bytes=3 * GIB)
    check = host_checks(low, CPU)[2]
    assert check.status == "warn" and "3.0 GiB" in check.message and check.fix
    assert statuses(facts(free_bytes=10 * GIB), CUDA)["disk"] == "warn"  # CUDA default threshold is 20 GiB
    assert statuses(facts(free_bytes=10 * GIB), CUDA, min_free_gb=5)["disk"] == "pass"
    assert statuses(facts(free_bytes=None), CPU)["disk"] == "warn"


def test_pixi_version() -> None:
    assert statuses(facts(pixi_found=False, pixi_version=None))["pixi"] == "skip"
    mismatch = host_checks(facts(pixi_version="0.72.1"), CUDA)[3]
    assert mismatch.status == "warn" and "0.73.0" in (mismatch.fix or "")
    assert statuses(facts(pixi_version=None, pixi_error="boom"))["pixi"] == "warn"


def test_dotted_key() -> None:
    assert dotted_key("550.54.14") > dotted_key("550.54.9")
    assert dotted_key("550.100") > dotted_key("550.54.14")
    assert dotted_key(" 560 ") == (560,)


# --- probes, with injected runners -------------------------------------------------------------------


class FakeHost:
    """Answers the probes like a machine with the given tools would."""

    def __init__(self, tools: dict[str, RunResult]) -> None:
        self.tools = tools
        self.calls: list[tuple[str, ...]] = []

    def which(self, name: str) -> str | None:
        return f"/fake/bin/{name}" if name in self.tools else None

    def run(self, argv: Sequence[str]) -> RunResult:
        self.calls.append(tuple(argv))
        return self.tools[Path(argv[0]).name]

    def probes(self) -> HostProbes:
        return HostProbes(
            run=self.run,
            which=self.which,
            free_bytes=lambda _p: 42 * GIB,
            platform=lambda: ("linux", "x86_64"),
        )


def _ok(stdout: str) -> RunResult:
    return RunResult(("x",), 0, stdout, "", 0.01)


def test_gather_facts_queries_nvidia_smi_and_pixi() -> None:
    host = FakeHost({"nvidia-smi": _ok("550.54.14\n560.35.03\n"), "pixi": _ok("pixi 0.73.0\n")})
    found = gather_facts(host.probes(), Path(), cuda.CUDA)
    assert found.driver_versions == ("550.54.14", "560.35.03")
    assert found.pixi_version == "0.73.0" and found.free_bytes == 42 * GIB
    query = ("/fake/bin/nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader")
    assert query in host.calls


def test_gather_gpus_reads_driver_compute_capability_and_name() -> None:
    out = "550.54.14, 8.6, NVIDIA GeForce RTX 3090\n550.54.14, [N/A], Tesla, rev B\n"
    found = gather_gpus(FakeHost({"nvidia-smi": _ok(out)}).probes())
    assert found.error is None
    assert found.gpus == (
        Gpu(0, "550.54.14", "8.6", "NVIDIA GeForce RTX 3090"),
        Gpu(1, "550.54.14", None, "Tesla, rev B"),
    )


class OldDriverHost(FakeHost):
    """nvidia-smi before 510: compute_cap is not a valid field, the driver alone answers."""

    def run(self, argv: Sequence[str]) -> RunResult:
        self.calls.append(tuple(argv))
        if "compute_cap" in argv[1]:
            return RunResult(tuple(argv), 2, 'Field "compute_cap" is not a valid field to query.', "", 0.01)
        return _ok("470.199.02\n")


def test_gather_gpus_falls_back_to_the_driver_alone() -> None:
    host = OldDriverHost({"nvidia-smi": _ok("")})
    found = gather_gpus(host.probes())
    assert found.gpus == (Gpu(0, "470.199.02"),) and len(host.calls) == 2
    assert gather_facts(host.probes(), Path(), cuda.CUDA).driver_versions == ("470.199.02",)


def test_gather_gpus_without_a_gpu() -> None:
    assert gather_gpus(FakeHost({}).probes()).error == "nvidia-smi is not on PATH (no NVIDIA driver installed?)"
    assert gather_gpus(FakeHost({"nvidia-smi": _ok("\n")}).probes()).error == "nvidia-smi listed no GPU"


def test_gather_facts_reports_a_broken_driver() -> None:
    broken = RunResult(("x",), 9, "", "NVIDIA-SMI has failed because it couldn't communicate with the driver", 0.1)
    found = gather_facts(FakeHost({"nvidia-smi": broken}).probes(), Path(), cuda.CUDA)
    assert found.driver_versions == () and "couldn't communicate" in (found.driver_error or "")
    assert not found.pixi_found


def test_gather_facts_skips_the_driver_for_other_targets() -> None:
    host = FakeHost({"nvidia-smi": _ok("550.54.14\n")})
    assert gather_facts(host.probes(), Path(), cpu.CPU).driver_versions == ()
    assert host.calls == []


# --- the report --------------------------------------------------------------------------------------


def test_report_with_manifest_problems_and_host_failures() -> None:
    finding = Problem(
        message="platforms must be exactly ['linux-64']",
        file="recipes/x/pixi.toml",
        line=4,
        key="workspace.platforms",
        value="['win-64']",
        fix='set platforms = ["linux-64"]',
    )
    report = diagnose(CUDA, [finding], facts(platform="windows"), recipe_file="recipes/x/recipe.json")
    assert not report.ok
    text = report.text()
    assert "fail  pixi.toml workspace.platforms" in text and "recipes/x/pixi.toml:4" in text
    assert "fail  native" in text and "fix:" in text
    assert text.splitlines()[-1] == "3 pass, 0 warn, 2 fail, 0 skip"
    assert [p.key for p in report.host_failures] == ["native"]
    assert report.host_failures[0].file == "recipes/x/recipe.json"
    payload = report.to_json()
    assert payload["ok"] is False and payload["targetId"] == "linux-x86_64-cuda12.4"


def test_clean_report() -> None:
    report = diagnose(CPU, [], facts(pixi_found=False, pixi_version=None))
    assert report.ok and report.checks[0].status == "pass"
    assert "skip  nvidia-driver" in report.text()


def test_report_explains_a_windows_cuda_box_with_pypis_cpu_torch() -> None:
    """doctor runs the pixi.toml rules: PyPI torch without a PyTorch index is a CPU torch on Windows."""
    data = cuda_recipe()
    data["recipeId"] = "my-model-windows-x86_64-cuda12.4"
    data["target"]["platform"] = "windows"
    data["pythonEntryPoint"] = "venv/python.exe"
    recipe = parse_recipe(to_text(data))
    text = (
        '[workspace]\nname = "w"\nchannels = ["conda-forge"]\nplatforms = ["win-64"]\n\n'
        '[system-requirements]\ncuda = "12.4"\n\n[dependencies]\npython = "3.11.*"\n\n'
        '[pypi-dependencies]\ntorch = "==2.6.0"\n'
    )
    findings = manifest_problems(parse_manifest(text, "recipes/w/pixi.toml"), recipe)
    report = diagnose(recipe, findings, facts(platform="windows"))
    assert not report.ok
    lines = report.text().splitlines()
    assert lines[1].startswith("  fail  pixi.toml pypi-dependencies.torch")
    assert "recipes/w/pixi.toml:13: torch comes from PyPI's default index" in lines[1]
    assert "no CUDA build of torch for Windows" in lines[1]
    assert 'index = "https://download.pytorch.org/whl/cu124"' in lines[2] and "fix:" in lines[2]
    cuda_index = text.replace('"==2.6.0"', '{ version = "==2.6.0", index = "https://download.pytorch.org/whl/cu124" }')
    assert manifest_problems(parse_manifest(cuda_index), recipe) == []
