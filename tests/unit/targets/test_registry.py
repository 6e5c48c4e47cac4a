"""The accelerator seam: a fourth accelerator is one object satisfying ``Accelerator`` and one registry line.

``FakeGpu`` below is a ROCm-like accelerator written only against the Protocol (targets/base.py): it
subclasses nothing of cpu or cuda.  Registered for one test through ``registry.ACCELERATORS``, it goes
through the real code paths of ``validate`` (recipe rules, pixi.toml rules), ``lock-check`` (a real
pixi.lock parsed and judged by the fake's own lock rule), ``select`` (a store index entry, ranked and
GPU-checked by the fake) and the matrix's runner labels.  Nothing else is patched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scrollcase.client.select import HostView, Wanted, select_release
from scrollcase.commands.lock_check import check_folder
from scrollcase.commands.validate import validate_paths
from scrollcase.errors import Problem
from scrollcase.github.matrix import RecipeEntry, matrix_entry
from scrollcase.host.facts import GIB, HostProbes, gather_facts, host_checks
from scrollcase.io.proc import RunResult
from scrollcase.recipe.loader import parse_recipe, recipe_problems
from scrollcase.store.index import BoxIndex, IndexEntry
from scrollcase.targets import registry
from scrollcase.targets.base import Accelerator, LockContext, ManifestView, torch_problem
from scrollcase.targets.classify import PackageRecord, TorchBuild
from scrollcase.targets.evidence import GpuEvidence
from scrollcase.targets.gpucheck import GpuCheckResult
from scrollcase.targets.hostgpu import CommandProbes, Gpu, GpuFacts
from scrollcase.targets.vocabulary import SUPPORTED, TargetSpec
from tests.recipe_samples import cpu_recipe, to_text

ROCM_INDEX = "https://download.pytorch.org/whl/rocm6.2"
CF = "https://conda.anaconda.org/conda-forge/"


@dataclass(frozen=True)
class FakeGpu:
    """A GPU accelerator whose torch is a ``+rocm`` wheel; it has no runtime-version field."""

    name: str = "fakegpu"
    title: str = "FakeGPU"
    aliases: tuple[str, ...] = ("fake",)
    version_field: str | None = None
    platforms: tuple[tuple[str, str], ...] = (("linux", "x86_64"),)
    rank: int = 3
    uses_gpu: bool = True
    build_disk_gb: float = 30.0
    device_env: dict[str, str] = field(default_factory=lambda: {"FAKEGPU_VISIBLE_DEVICES": "0"})
    runners: dict[str, list[str]] = field(
        default_factory=lambda: {"linux-x86_64-fakegpu": ["self-hosted", "linux", "fakegpu"]}
    )

    def target_suffix(self, version: str | None) -> str:
        return self.name

    def virtual_packages(self, version: str | None) -> dict[str, str]:
        return {}

    def manifest_problems(self, manifest: ManifestView, target: TargetSpec) -> list[Problem]:
        torch = manifest.pypi_dependencies_for(target.subdir).get("torch")
        if torch is None or "rocm" in (torch.index or ""):
            return []
        return [manifest.problem(torch.key, torch.table, "torch must come from a ROCm index", torch.index, ROCM_INDEX)]

    def unavailable(self, platform: str) -> tuple[str, str] | None:
        return None

    def version_fix(self) -> str:
        return ""

    def pypi_constraints(self, version: str | None) -> tuple[str, ...]:
        return ()

    def resolve_hint(self, target_id: str, version: str | None) -> tuple[str, str]:
        return f"{target_id} needs rocm wheels", f"; use {ROCM_INDEX}"

    def lock_problems(self, ctx: LockContext, packages: Sequence[PackageRecord], torch: TorchBuild) -> list[Problem]:
        if (torch.accelerator or "").startswith("rocm"):
            return []
        message = f"{ctx.target_id} needs a ROCm build of torch, but the lock holds {torch.accelerator}"
        return [torch_problem(ctx, torch, message, f"take torch from {ROCM_INDEX}, then {ctx.relock}")]

    def evidence_problems(self, target: TargetSpec, evidence: GpuEvidence, where: str = "box") -> list[Problem]:
        return []

    def gpu_check(
        self,
        target: TargetSpec,
        min_driver: str | None,
        evidence: GpuEvidence | None,
        host: GpuFacts,
        file: str | None = None,
    ) -> GpuCheckResult | None:
        if host.gpus:
            return GpuCheckResult("pass", f"{len(host.gpus)} fake GPU(s)")
        problem = Problem(message="no FakeGPU on this machine", fix="install on a machine with a FakeGPU")
        return GpuCheckResult("fail", "no FakeGPU", (problem,))

    def probe_gpus(self, probes: CommandProbes) -> GpuFacts:
        found = probes.run(["fakegpu-smi", "--list"])
        return GpuFacts(tuple(Gpu(i, "1.0", None, line) for i, line in enumerate(found.stdout.splitlines())))

    def driver_check(
        self, min_driver: str | None, versions: Sequence[str], error: str | None
    ) -> tuple[str, str, str, str | None]:
        return "fakegpu-driver", "pass" if versions else "fail", "fake", None


FAKE: Accelerator = FakeGpu()  # mypy checks the fake against the Protocol


@pytest.fixture
def fakegpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Accelerator]:
    """The one registry line, for this test only."""
    monkeypatch.setitem(registry.ACCELERATORS, FAKE.name, FAKE)
    yield FAKE


def fake_recipe() -> dict[str, Any]:
    data = cpu_recipe()
    data["recipeId"] = "my-model-linux-x86_64-fakegpu"
    data["target"] = {"platform": "linux", "arch": "x86_64", "accelerator": "fakegpu"}
    data["parity"]["accelerators"] = ["cpu", "fakegpu"]
    return data


MANIFEST = f"""\
[workspace]
name = "my-model-linux-x86_64-fakegpu"
channels = ["conda-forge"]
platforms = ["linux-64"]

[dependencies]
python = "3.11.*"

[pypi-dependencies]
torch = {{ version = "==2.5.1", index = "{ROCM_INDEX}" }}
"""

PYTHON = "linux-64/python-3.11.9-h9e4cc4f_1_cpython.conda"


def lock(torch_local: str) -> str:
    """A pixi.lock (format v6) holding python from conda-forge and a torch wheel tagged ``torch_local``."""
    wheel = f"{ROCM_INDEX}/torch-2.5.1%2B{torch_local}-cp311-cp311-linux_x86_64.whl"
    return (
        f"version: 6\nenvironments:\n  default:\n    channels:\n    - url: {CF}\n    packages:\n      linux-64:\n"
        f"      - conda: {CF}{PYTHON}\n      - pypi: {wheel}\npackages:\n- conda: {CF}{PYTHON}\n  sha256: 00\n"
        f"- pypi: {wheel}\n  name: torch\n  version: 2.5.1+{torch_local}\n  requires_dist: []\n"
    )


def recipe_folder(root: Path, data: dict[str, Any], lock_text: str) -> Path:
    folder = root / "recipes" / str(data["recipeId"])
    (folder / "checks").mkdir(parents=True)
    (folder / "checks" / "parity.py").write_text("# fixture\n", encoding="utf-8")
    (folder / "recipe.json").write_text(to_text(data), encoding="utf-8")
    (folder / "pixi.toml").write_text(MANIFEST, encoding="utf-8")
    (folder / "pixi.lock").write_text(lock_text, encoding="utf-8")
    return folder


def test_the_registry_holds_the_built_in_accelerators_in_vocabulary_order() -> None:
    assert list(registry.ACCELERATORS) == ["cpu", "cuda", "metal"]
    assert registry.device_aliases() == {"cpu": "cpu", "cuda": "cuda", "metal": "metal", "gpu": "cuda", "mps": "metal"}
    assert registry.ranks() == {"cpu": 0, "cuda": 2, "metal": 1}
    assert dict(SUPPORTED) == {  # derived from each accelerator's platforms
        ("linux", "x86_64"): ("cpu", "cuda"),
        ("linux", "aarch64"): ("cpu", "cuda"),
        ("windows", "x86_64"): ("cpu", "cuda"),
        ("osx", "arm64"): ("cpu", "metal"),
        ("osx", "x86_64"): ("cpu",),
    }


@pytest.mark.parametrize("name", ["cpu", "cuda", "metal"])
def test_a_built_in_accelerator_is_a_value_that_cannot_change(name: str) -> None:
    """One object per accelerator serves every recipe, lock and host check of the process: none may edit it."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.ACCELERATORS[name].rank = 9  # type: ignore[misc]


def test_validate_knows_a_registered_accelerator_and_only_then(tmp_path: Path, fakegpu: Accelerator) -> None:
    folder = recipe_folder(tmp_path, fake_recipe(), lock("rocm6.2"))
    (outcome,) = validate_paths([folder / "recipe.json"])
    assert outcome.problems == ()
    assert SUPPORTED[("linux", "x86_64")] == ("cpu", "cuda", "fakegpu")
    with pytest.MonkeyPatch.context() as patch:
        patch.delitem(registry.ACCELERATORS, "fakegpu")
        (unknown,) = validate_paths([folder / "recipe.json"])
    assert [p.key for p in unknown.problems] == ["target.accelerator", "parity.accelerators[1]"]
    cpu_index = (
        (folder / "pixi.toml").read_text(encoding="utf-8").replace(ROCM_INDEX, "https://download.pytorch.org/whl/cpu")
    )
    (folder / "pixi.toml").write_text(cpu_index, encoding="utf-8")
    (wrong_index,) = validate_paths([folder / "recipe.json"])
    assert [(p.key, p.message, p.line) for p in wrong_index.problems] == [
        ("pypi-dependencies.torch", "torch must come from a ROCm index", 10)
    ]


def test_the_recipe_rules_ask_the_registered_accelerator(tmp_path: Path, fakegpu: Accelerator) -> None:
    data = fake_recipe()
    data["target"]["cudaVersion"] = "12.4"
    data["target"]["platform"], data["recipeId"] = "windows", "my-model-windows-x86_64-fakegpu"
    _, problems = recipe_problems(to_text(data), "recipe.json")
    assert [(p.key, p.message) for p in problems] == [
        ("target.accelerator", "accelerator 'fakegpu' is not available on windows-x86_64")
    ]
    data["target"]["platform"], data["recipeId"] = "linux", "my-model-linux-x86_64-fakegpu"
    _, problems = recipe_problems(to_text(data), "recipe.json")
    assert [(p.key, p.message) for p in problems] == [
        ("target.cudaVersion", "cudaVersion is only allowed for CUDA targets, not 'fakegpu'")
    ]


def test_lock_check_runs_the_registered_accelerators_lock_rules(tmp_path: Path, fakegpu: Accelerator) -> None:
    good = check_folder(recipe_folder(tmp_path / "good", fake_recipe(), lock("rocm6.2")), {})
    assert good.problems == ()
    assert good.detail is not None and good.detail.torch.accelerator == "rocm6.2"
    bad = check_folder(recipe_folder(tmp_path / "bad", fake_recipe(), lock("cpu")), {})
    assert [(p.key, p.message) for p in bad.problems] == [
        ("torch", "linux-x86_64-fakegpu needs a ROCm build of torch, but the lock holds cpu")
    ]
    assert bad.problems[0].file is not None and bad.problems[0].file.endswith("pixi.lock")
    assert bad.problems[0].line == 13  # the torch record


def entry(target: dict[str, str]) -> IndexEntry:
    target_id = TargetSpec(target["platform"], target["arch"], target["accelerator"]).target_id
    prefix = f"boxes/my-model/1.0.0/{target_id}/my-model-1.0.0-{target_id}"
    return IndexEntry.model_validate(
        {
            "targetId": target_id,
            "target": target,
            "archive": f"{prefix}.tar.zst",
            "release": f"{prefix}.release.json",
            "sha256Key": f"{prefix}.tar.zst.sha256",
            "sha256": "a" * 64,
            "size": 1000,
            "minNvidiaDriverVersion": None,
            "minHostAppVersion": "1.0.0",
            "minRamGb": 1,
            "gpu": None,
        }
    )


def test_select_ranks_and_gpu_checks_through_the_registered_accelerator(fakegpu: Accelerator) -> None:
    cpu, fake = (entry({"platform": "linux", "arch": "x86_64", "accelerator": a}) for a in ("cpu", "fakegpu"))
    index = BoxIndex(boxId="my-model", versions={"1.0.0": {cpu.targetId: cpu, fake.targetId: fake}})
    with_gpu = HostView("linux", "x86_64", GpuFacts((Gpu(0, "1.0", "9.0", "FakeGPU 1"),)))
    chosen = select_release(index, with_gpu, Wanted()).chosen
    assert chosen is not None and chosen.entry.targetId == "linux-x86_64-fakegpu"
    without = select_release(index, HostView("linux", "x86_64"), Wanted())
    assert without.chosen is not None and without.chosen.entry.targetId == "linux-x86_64-cpu"
    assert [c.reasons for c in without.candidates if c.entry is fake] == [("no FakeGPU on this machine",)]


def test_the_matrix_takes_the_registered_accelerators_runners(tmp_path: Path, fakegpu: Accelerator) -> None:
    recipe = parse_recipe(to_text(fake_recipe()), "recipe.json")
    row = matrix_entry(RecipeEntry("recipes/my-model-linux-x86_64-fakegpu", recipe))
    assert row["runs-on"] == ["self-hosted", "linux", "fakegpu"]
    assert row["targetId"] == "linux-x86_64-fakegpu" and row["cudaVersion"] == ""


def test_doctor_probes_and_checks_the_host_through_the_registered_accelerator(fakegpu: Accelerator) -> None:
    asked: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> RunResult:
        asked.append(list(argv))
        return RunResult(tuple(argv), 0, "FakeGPU 1\n", "", 0.0)

    # 20 GiB free: enough for a cpu box (5), not for a FakeGPU one (its build_disk_gb, 30)
    probes = HostProbes(run=run, which=lambda name: None, free_bytes=lambda path: 20 * GIB)
    probes = dataclasses.replace(probes, platform=lambda: ("linux", "x86_64"))
    facts = gather_facts(probes, Path(), registry.accelerator("fakegpu"))
    assert asked == [["fakegpu-smi", "--list"]] and [g.name for g in facts.gpus] == ["FakeGPU 1"]
    checks = {c.name: c for c in host_checks(facts, parse_recipe(to_text(fake_recipe()), "recipe.json"))}
    assert checks["fakegpu-driver"].status == "pass" and checks["native"].status == "pass"
    assert (checks["disk"].status, checks["disk"].message) == ("warn", "20.0 GiB free at ., under 30 GiB")
