"""lock-check rules on in-memory locks and manifests (no disk)."""

from __future__ import annotations

import dataclasses

import pytest

from scrollcase.errors import Problem
from scrollcase.lock.check import LockCheckInput, check_lock, locked_accelerator_problems
from scrollcase.lock.manifest import parse_manifest
from scrollcase.lock.read import parse_lock
from scrollcase.targets.cuda import pypi_torch_advice
from scrollcase.targets.vocabulary import TargetSpec

CF = "https://conda.anaconda.org/conda-forge/"
CUDA = TargetSpec("linux", "x86_64", "cuda", "12.4")
CPU = TargetSpec("linux", "x86_64", "cpu")

MANIFEST = """\
[workspace]
name = "demo"
channels = ["conda-forge"]
platforms = ["linux-64"]

[system-requirements]
cuda = "12.4"

[dependencies]
python = "3.11.*"
pytorch = { version = "2.*", build = "cuda*" }
cuda-version = "12.4.*"
"""

CPU_MANIFEST = """\
[workspace]
name = "demo"
channels = ["conda-forge"]
platforms = ["linux-64"]

[dependencies]
python = "3.11.*"
pytorch = "2.*"
"""


def lock_text(*urls: str, platform: str = "linux-64", channel: str = CF, pypi: tuple[str, ...] = ()) -> str:
    entries = [f"      - conda: {CF}{u}" for u in urls] + [f"      - pypi: {u}" for u in pypi]
    records = [f"- conda: {CF}{u}\n  sha256: 00" for u in urls]
    records += [
        f"- pypi: {u}\n  name: {u.rsplit('/', 1)[-1].split('-')[0].replace('_', '-')}\n"
        f"  version: {u.rsplit('/', 1)[-1].split('-')[1].replace('%2B', '+')}"
        for u in pypi
    ]
    return (
        "version: 6\nenvironments:\n  default:\n    channels:\n    - url: " + channel + "\n"
        "    packages:\n      " + platform + ":\n" + "\n".join(entries) + "\npackages:\n" + "\n".join(records) + "\n"
    )


GOOD = (
    "linux-64/python-3.11.9-h9e4cc4f_1_cpython.conda",
    "linux-64/pytorch-2.5.1-cuda124_py311_h1_300.conda",
    "noarch/cuda-version-12.4-h3060b56_3.conda",
)


def check(text: str, manifest: str = MANIFEST, target: TargetSpec = CUDA) -> list[Problem]:
    inp = LockCheckInput(
        "demo-" + target.target_id,
        target,
        parse_manifest(manifest, "recipes/d/pixi.toml"),
        parse_lock(text, "recipes/d/pixi.lock"),
        (CF,),
    )
    return list(check_lock(inp).problems)


def test_a_good_cuda_lock_passes() -> None:
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(lock_text(*GOOD)), (CF,))
    result = check_lock(inp)
    assert result.problems == ()
    assert result.torch.accelerator == "cuda12.4" and result.platform == "linux-64"


def test_cpu_torch_under_a_cuda_target_is_the_failure_we_exist_for() -> None:
    text = lock_text(GOOD[0], "linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda", GOOD[2])
    problems = check(text, MANIFEST.replace('build = "cuda*"', 'build = "*"'))
    assert len(problems) == 1
    (problem,) = problems
    assert "CPU build" in problem.message and "CUDA 12.4" in problem.message
    assert problem.file == "recipes/d/pixi.lock" and problem.line == 14  # the pytorch record
    assert problem.value == "conda 2.5.1 cpu_mkl_py311_h2_100"
    assert 'build = "cuda*"' in (problem.fix or "") and "scrollcase lock" in (problem.fix or "")


def test_wrong_cuda_version_is_named() -> None:
    text = lock_text(
        GOOD[0], "linux-64/pytorch-2.5.1-cuda128_py311_h1_300.conda", "noarch/cuda-version-12.8-h5d125a7_3.conda"
    )
    manifest = MANIFEST.replace('cuda-version = "12.4.*"', "cuda-version = '*'")
    messages = [p.message for p in check(text, manifest)]
    assert any("cuda12.8" in m and "CUDA 12.4" in m for m in messages), messages


def test_cuda_version_record_must_match() -> None:
    text = lock_text(GOOD[0], GOOD[1], "noarch/cuda-version-12.8-h5d125a7_3.conda")
    problems = check(text, MANIFEST.replace('cuda-version = "12.4.*"', "cuda-version = '*'"))
    assert [p.key for p in problems] == ["cuda-version"]
    assert "12.8" in problems[0].message
    missing = check(lock_text(GOOD[0], GOOD[1]), MANIFEST.replace('cuda-version = "12.4.*"\n', ""))
    assert [p.key for p in missing] == ["cuda-version"] and "no cuda-version record" in missing[0].message


def test_stale_after_a_manifest_edit_points_at_pixi_toml() -> None:
    edited = MANIFEST + 'numpy = ">=2"\n'
    problems = check(lock_text(*GOOD), edited)
    assert len(problems) == 1
    assert "stale" in problems[0].message and "numpy" in problems[0].message
    assert problems[0].file == "recipes/d/pixi.toml" and problems[0].line == 13


def test_a_stale_version_pin_points_at_the_pixi_toml_line_that_changed() -> None:
    """The user edited pixi.toml, not pixi.lock: the annotation lands on their diff; the lock's record is
    named in the message."""
    problems = check(lock_text(*GOOD), MANIFEST.replace('python = "3.11.*"', 'python = "3.12.*"'))
    assert len(problems) == 1 and "stale" in problems[0].message
    assert problems[0].file == "recipes/d/pixi.toml" and problems[0].line == 10
    assert problems[0].key == "dependencies.python" and "(recipes/d/pixi.lock:12)" in problems[0].message
    assert problems[0].value == "python 3.11.9 h9e4cc4f_1_cpython"
    assert "scrollcase lock demo-linux-x86_64-cuda12.4" in (problems[0].fix or "")


def test_missing_platform() -> None:
    problems = check(lock_text(*GOOD, platform="osx-arm64"))
    assert len(problems) == 1
    assert "does not cover the target platform linux-64" in problems[0].message
    assert problems[0].line == 3


def test_channels_must_match_the_manifest() -> None:
    problems = check(lock_text(*GOOD, channel="https://conda.anaconda.org/pytorch/"))
    assert len(problems) == 1 and "channels" in problems[0].message and "stale" in problems[0].message


def test_cpu_target_with_cuda_torch_is_flagged() -> None:
    problems = check(lock_text(*GOOD), CPU_MANIFEST, CPU)
    assert len(problems) == 1 and "not a CUDA target" in problems[0].message
    assert problems[0].key == "torch"


def test_cpu_target_with_cpu_torch_passes() -> None:
    text = lock_text(GOOD[0], "linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda")
    assert check(text, CPU_MANIFEST, CPU) == []


PYPI_MANIFEST = """\
[workspace]
name = "demo"
channels = ["conda-forge"]
platforms = ["linux-64"]

[system-requirements]
cuda = "12.4"

[dependencies]
python = "3.11.*"

[pypi-dependencies]
torch = { version = ">=2.5", index = "https://download.pytorch.org/whl/cu124" }
"""


def test_pypi_cuda_wheels_for_the_target_pass() -> None:
    wheel = "https://download.pytorch.org/whl/cu124/torch-2.5.1%2Bcu124-cp311-cp311-linux_x86_64.whl"
    assert check(lock_text(GOOD[0], pypi=(wheel,)), PYPI_MANIFEST) == []


def test_untagged_pypi_wheel_without_runtime_is_cpu() -> None:
    wheel = "https://files.pythonhosted.org/packages/aa/torch-2.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    problems = check(lock_text(GOOD[0], pypi=(wheel,)), PYPI_MANIFEST)
    assert len(problems) == 1 and "CPU build" in problems[0].message
    runtime = (
        "https://files.pythonhosted.org/packages/bb/nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl"
    )
    assert check(lock_text(GOOD[0], pypi=(wheel, runtime)), PYPI_MANIFEST) == []


def test_pypi_sdists_and_git_urls_are_flagged_before_the_build_refuses_them() -> None:
    sdist = "https://files.pythonhosted.org/packages/2d/6a/asciitree-0.3.3.tar.gz"
    git = "git+https://github.com/x/rtmlib.git?rev=98bca21#98bca21"
    text = lock_text(*GOOD, pypi=(sdist,)).replace(
        f"      - pypi: {sdist}\n", f"      - pypi: {sdist}\n      - pypi: {git}\n"
    ).rstrip("\n") + (f"\n- pypi: {git}\n  name: rtmlib\n  version: 0.0.1\n")
    problems = check(text, MANIFEST)
    assert [(p.key, p.value) for p in problems] == [("packages.pypi.asciitree", sdist), ("packages.pypi.rtmlib", git)]
    assert all(p.file == "recipes/d/pixi.lock" and p.line and "wheel" in (p.fix or "") for p in problems)


def test_missing_pypi_dependency_is_stale() -> None:
    problems = check(lock_text(*GOOD), MANIFEST + '\n[pypi-dependencies]\nrich = "*"\n')
    assert [p.key for p in problems] == ["pypi-dependencies.rich"]


def test_cuda_box_without_torch_needs_the_cuda_runtime() -> None:
    manifest = MANIFEST.replace('pytorch = { version = "2.*", build = "cuda*" }\n', "")
    assert check(lock_text(GOOD[0], GOOD[2]), manifest) == []
    problems = check(lock_text(GOOD[0]), manifest.replace('cuda-version = "12.4.*"\n', ""))
    assert len(problems) == 1 and "no CUDA runtime" in problems[0].message


def test_cuda_box_without_torch_locked_to_another_cuda_is_refused() -> None:
    """A CuPy/ONNX-style CUDA 12.4 box whose lock holds the CUDA 12.8 runtime must not pass (the
    manifest does not pin cuda-version, so only the CUDA-without-torch rule can see it)."""
    manifest = MANIFEST.replace('pytorch = { version = "2.*", build = "cuda*" }\n', "").replace(
        'cuda-version = "12.4.*"\n', ""
    )
    problems = check(lock_text(GOOD[0], "noarch/cuda-version-12.8-h5d125a7_3.conda"), manifest)
    assert len(problems) == 1
    assert "CUDA 12.8" in problems[0].message and "12.4" in problems[0].message


def v7_text() -> str:
    """A v7 lock with two linux-64 platforms: ``linux-64`` (a CPU torch) first, ``p1`` (solved with __cuda) second."""
    return (
        "version: 7\nplatforms:\n- name: linux-64\n- name: p1\n  subdir: linux-64\n  virtual-packages:\n"
        "  - __cuda=12.4\nenvironments:\n  default:\n    channels:\n    - url: " + CF + "\n    packages:\n"
        "      linux-64:\n      - conda: " + CF + "linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda\n"
        "      p1:\n"
        + "\n".join(f"      - conda: {CF}{u}" for u in GOOD)
        + "\npackages:\n"
        + "".join(
            f"- conda: {CF}{u}\n  sha256: 00\n" for u in (*GOOD, "linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda")
        )
    )


def test_v7_picks_the_platform_solved_with_cuda() -> None:
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(v7_text()), (CF,))
    result = check_lock(inp)
    assert result.platform == "p1" and result.problems == ()


def test_lock_format_must_be_readable_by_the_pinned_pixi() -> None:
    text = lock_text(*GOOD).replace("version: 6", "version: 7", 1)
    for pixi, ok in (("0.73.0", True), ("0.68.0", True), ("0.67.2", False)):
        inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(text), (CF,), pixi_version=pixi)
        problems = check_lock(inp).problems
        assert (problems == ()) is ok, problems
    assert "needs pixi >= 0.68.0" in problems[0].message and problems[0].line == 1


# --- PyPI torch -------------------------------------------------------------------------------------

FILES = "https://files.pythonhosted.org/packages/aa/"
TORCH_280 = FILES + "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"
RUNTIME_128 = FILES + "nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64.whl"
RUNTIME_124 = FILES + "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl"
CU124_WHEEL = "https://download.pytorch.org/whl/cu124/torch-2.6.0%2Bcu124-cp311-cp311-linux_x86_64.whl"

PYPI_CUDA_128 = PYPI_MANIFEST.replace('cuda = "12.4"', 'cuda = "12.8"')
CUDA_128 = TargetSpec("linux", "x86_64", "cuda", "12.8")


def pypi_manifest(torch: str, manifest: str = PYPI_CUDA_128) -> str:
    return manifest.replace(manifest.splitlines()[-1], f"torch = {torch}")


@pytest.mark.parametrize(
    "torch",
    [
        '">=2.5,<2.7"',
        '{ version = "==2.6.0" }',
        '{ version = "==2.6.*", index = "https://download.pytorch.org/whl/cu128" }',
        '{ version = "~=2.6.0", extras = ["opt-einsum"] }',
    ],
)
def test_pypi_version_specifiers_are_checked_against_the_locked_version(torch: str) -> None:
    manifest = pypi_manifest(torch)
    problems = check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), manifest, CUDA_128)
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.key == "pypi-dependencies.torch" and problem.file == "recipes/d/pixi.toml"
    assert problem.line == len(manifest.splitlines())  # the torch line of pixi.toml
    assert "stale" in problem.message and "but the lock holds torch 2.8.0" in problem.message
    assert "of recipes/d/pixi.lock" in problem.message  # and where the lock holds it
    assert problem.value == "torch 2.8.0" and "scrollcase lock" in (problem.fix or "")


@pytest.mark.parametrize(
    "torch",
    [
        '"*"',
        '">=2.8"',
        '"==2.8.*"',
        '{ version = "*", index = "https://download.pytorch.org/whl/cu128" }',
        '{ version = ">=2.8,<2.9", extras = ["opt-einsum"] }',
        '{ version = ">=2.8", markers = "sys_platform == \'linux\'" }',
        '{ index = "https://download.pytorch.org/whl/cu128" }',  # no version: any
        '{ url = "https://example.org/torch-2.6.0-cp311-cp311-linux_x86_64.whl" }',  # no specifiers to check
    ],
)
def test_pypi_specifiers_that_allow_the_locked_version_pass(torch: str) -> None:
    assert check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), pypi_manifest(torch), CUDA_128) == []


def test_a_local_version_tag_satisfies_a_plain_pin() -> None:
    """PEP 440: ==2.6.0 matches 2.6.0+cu124 (the specifier has no local label)."""
    manifest = pypi_manifest('{ version = "==2.6.0", index = "https://download.pytorch.org/whl/cu124" }', PYPI_MANIFEST)
    assert check(lock_text(GOOD[0], pypi=(CU124_WHEEL, RUNTIME_124)), manifest) == []
    newer = manifest.replace("==2.6.0", ">=2.7")
    assert [p.value for p in check(lock_text(GOOD[0], pypi=(CU124_WHEEL, RUNTIME_124)), newer)] == ["torch 2.6.0+cu124"]


def test_unreadable_pypi_specifiers_are_named_with_the_fix() -> None:
    problems = check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), pypi_manifest('"2.8.0"'), CUDA_128)
    assert [p.key for p in problems] == ["pypi-dependencies.torch"]
    assert "cannot check torch '2.8.0'" in problems[0].message and "bare version" in problems[0].message
    assert 'torch = "==2.8.0"' in (problems[0].fix or "")
    garbage = check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), pypi_manifest('"two"'), CUDA_128)
    assert "not a PEP 440 version specifier" in garbage[0].message and ">=2.5,<2.7" in (garbage[0].fix or "")


def test_target_pypi_dependencies_are_checked_with_their_table() -> None:
    manifest = PYPI_CUDA_128 + '\n[target.linux-64.pypi-dependencies]\nTorch = "==2.6.0"\n'
    problems = check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), manifest, CUDA_128)
    line = manifest.splitlines().index('Torch = "==2.6.0"') + 1
    assert [(p.key, p.line) for p in problems] == [("target.linux-64.pypi-dependencies.Torch", line)]
    other = PYPI_CUDA_128 + '\n[target.win-64.pypi-dependencies]\ntorch = "==2.6.0"\n'  # not this target
    assert check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), other, CUDA_128) == []


CPU_PYPI = CPU_MANIFEST.replace('pytorch = "2.*"\n', '\n[pypi-dependencies]\ntorch = ">=2.5"\n')
TORCH_2150 = FILES + "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"
RUNTIME_132 = FILES + "nvidia_cuda_runtime-13.2.86-py3-none-manylinux_2_28_x86_64.whl"


def test_pypi_torch_for_another_cuda_reads_clearly_and_says_how_to_get_the_right_one() -> None:
    text = lock_text(GOOD[0], pypi=(TORCH_2150, RUNTIME_132))
    problems = check(text, pypi_manifest('">=2.5"', PYPI_MANIFEST))
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.message == (
        "linux-x86_64-cuda12.4 needs a GPU build of torch for CUDA 12.4, but the lock holds torch 2.15.0 from "
        "PyPI, a build for cuda13.2 (untagged wheel beside nvidia-cuda-runtime 13.2.86) — cuda13.2 packages "
        "under a cuda12.4 name"
    )
    assert problem.key == "torch" and problem.value == "pypi 2.15.0" and problem.file == "recipes/d/pixi.lock"
    assert problem.line == text.splitlines().index(f"- pypi: {TORCH_2150}") + 1
    fix = problem.fix or ""
    assert "torch 2.5 or 2.6" in fix and 'torch = ">=2.5,<2.7"' in fix
    assert 'index = "https://download.pytorch.org/whl/cu124"' in fix and "scrollcase lock" in fix
    assert "pytorch = {" not in fix and "cuda-version" not in fix  # not the conda fix


def test_pypi_cpu_torch_under_a_cuda_name_gets_the_pypi_fix() -> None:
    cpu_wheel = "https://download.pytorch.org/whl/cpu/torch-2.6.0%2Bcpu-cp311-cp311-linux_x86_64.whl"
    (problem,) = check(lock_text(GOOD[0], pypi=(cpu_wheel,)), PYPI_MANIFEST)
    assert "torch 2.6.0+cpu from PyPI, a CPU build" in problem.message
    assert problem.message.endswith("— CPU packages under a cuda12.4 name")
    assert "whl/cu124" in (problem.fix or "")


def test_pypi_cuda_without_a_release_on_pypi_points_at_pytorchs_index() -> None:
    target = TargetSpec("linux", "x86_64", "cuda", "12.1")
    manifest = PYPI_MANIFEST.replace('cuda = "12.4"', 'cuda = "12.1"').replace("cu124", "cu121")
    (problem,) = check(lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128)), manifest.replace(">=2.5", "*"), target)
    assert "has no torch built for CUDA 12.1" in (problem.fix or "")
    assert 'torch = { version = "*", index = "https://download.pytorch.org/whl/cu121" }' in (problem.fix or "")


def test_a_tagged_pypi_torch_needs_a_runtime_wheel_of_its_cuda() -> None:
    problems = check(lock_text(GOOD[0], pypi=(CU124_WHEEL, RUNTIME_128)), PYPI_MANIFEST)
    assert [(p.key, p.value) for p in problems] == [("nvidia-cuda-runtime-cu12", "12.8.90")]
    assert "torch 2.6.0+cu124 is a CUDA 12.4 build" in problems[0].message
    assert "the CUDA 12.8 runtime" in problems[0].message and "whl/cu124" in (problems[0].fix or "")
    assert check(lock_text(GOOD[0], pypi=(CU124_WHEEL, RUNTIME_124)), PYPI_MANIFEST) == []
    windows_style = lock_text(GOOD[0], pypi=(CU124_WHEEL,))  # PyTorch's Windows wheels bundle the runtime
    assert check(windows_style, PYPI_MANIFEST) == []


def test_cuda_runtime_wheels_of_several_cuda_versions_are_a_problem() -> None:
    runtime_130 = FILES + "nvidia_cuda_runtime-13.0.96-py3-none-manylinux_2_28_x86_64.whl"
    text = lock_text(GOOD[0], pypi=(CU124_WHEEL, RUNTIME_124, runtime_130))
    problems = check(text, PYPI_MANIFEST)
    assert len(problems) == 1, problems
    (problem,) = problems
    assert "several CUDA versions (nvidia-cuda-runtime-cu12 12.4.127, nvidia-cuda-runtime 13.0.96)" in problem.message
    assert (
        problem.key == "nvidia-cuda-runtime" and problem.line == text.splitlines().index(f"- pypi: {runtime_130}") + 1
    )
    assert "nvidia-cuda-runtime 13.0.96" in (problem.fix or "") and "whl/cu124" in (problem.fix or "")


def test_an_untagged_pypi_torch_for_the_target_cuda_passes() -> None:
    torch_260 = FILES + "torch-2.6.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert check(lock_text(GOOD[0], pypi=(torch_260, RUNTIME_124)), pypi_manifest('"==2.6.0"', PYPI_MANIFEST)) == []


def test_cpu_target_with_nvidia_cuda_wheels_names_them() -> None:
    cublas = FILES + "nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl"
    cpu_wheel = "https://download.pytorch.org/whl/cpu/torch-2.8.0%2Bcpu-cp311-cp311-linux_x86_64.whl"
    text = lock_text(GOOD[0], pypi=(cpu_wheel, cublas))
    (problem,) = check(text, CPU_PYPI, CPU)
    assert problem.message == (
        "linux-x86_64-cpu is not a CUDA target but the lock holds 1 NVIDIA CUDA wheel: "
        "nvidia-cublas-cu12 12.8.4.1 — CUDA packages under a cpu name"
    )
    assert problem.key == "nvidia-cublas-cu12" and problem.line == text.splitlines().index(f"- pypi: {cublas}") + 1
    assert 'index = "https://download.pytorch.org/whl/cpu"' in (problem.fix or "")
    nvml = FILES + "nvidia_ml_py-13.610.43-py3-none-any.whl"  # NVML bindings are not CUDA
    assert check(lock_text(GOOD[0], pypi=(cpu_wheel, nvml)), CPU_PYPI, CPU) == []


def test_cpu_target_with_pypis_default_cuda_torch_is_flagged_with_the_cpu_index() -> None:
    text = lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128, FILES + "nvidia_cudnn_cu12-9.10.2.21-py3-none-x.whl"))
    problems = check(text, CPU_PYPI, CPU)
    assert [p.key for p in problems] == ["torch", "nvidia-cuda-runtime-cu12"]
    assert "CUDA 12.8 build of torch" in problems[0].message
    assert "2 NVIDIA CUDA wheels: nvidia-cuda-runtime-cu12 12.8.90, nvidia-cudnn-cu12 9.10.2.21" in problems[1].message
    assert problems[1].line == text.splitlines().index(f"- pypi: {RUNTIME_128}") + 1  # the first of them
    assert all("https://download.pytorch.org/whl/cpu" in (p.fix or "") for p in problems)
    assert "pytorch = {" not in (problems[0].fix or "")  # the PyPI fix, not the conda one


# --- where the lock cannot be checked at all ----------------------------------------------------------


def test_a_missing_environment_is_named_at_the_first_line_with_the_ones_the_lock_has() -> None:
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(lock_text(*GOOD)), (CF,), "gpu")
    result = check_lock(inp)
    (problem,) = result.problems
    assert problem.message == "the lock has no environment 'gpu' (has: default)"
    assert (problem.line, problem.key, result.platform) == (1, "environments", None)
    assert locked_accelerator_problems(inp) == []  # the installer's lock reading explains it


def test_a_missing_platform_names_the_platforms_the_lock_covers() -> None:
    (problem,) = check(lock_text(*GOOD, platform="osx-arm64"))
    assert problem.message == "the lock does not cover the target platform linux-64 (covers: osx-arm64)"
    assert problem.value == "osx-arm64" and problem.key == "environments.default.packages"


def test_the_build_stage_checks_only_the_locked_accelerator() -> None:
    stale_cpu = lock_text(GOOD[0], "linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda", GOOD[2])
    manifest = parse_manifest(MANIFEST.replace('"3.11.*"', '"3.12.*"').replace('build = "cuda*"', 'build = "*"'))
    inp = LockCheckInput("demo", CUDA, manifest, parse_lock(stale_cpu, "recipes/d/pixi.lock"), (CF,))
    assert [p.key for p in check_lock(inp).problems] == ["dependencies.python", "torch"]
    (problem,) = locked_accelerator_problems(inp)  # not the stale python pin: build only guards the accelerator
    assert problem.key == "torch" and "CPU build" in problem.message
    good = LockCheckInput("demo", CUDA, manifest, parse_lock(lock_text(*GOOD)), (CF,))
    assert locked_accelerator_problems(good) == []
    elsewhere = LockCheckInput("demo", CUDA, manifest, parse_lock(lock_text(*GOOD, platform="osx-arm64")), (CF,))
    assert locked_accelerator_problems(elsewhere) == []


def test_a_cpu_target_takes_the_first_platform_of_its_subdir_even_beside_one_solved_with_cuda() -> None:
    cpu_manifest = CPU_MANIFEST.replace('python = "3.11.*"\npytorch = "2.*"\n', "")
    result = check_lock(LockCheckInput("demo", CPU, parse_manifest(cpu_manifest), parse_lock(v7_text()), (CF,)))
    assert result.platform == "linux-64" and result.torch.accelerator == "cpu" and result.problems == ()


def test_lock_check_inputs_and_results_are_values_that_cannot_change() -> None:
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(lock_text(*GOOD)), (CF,))
    result = check_lock(inp)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inp.recipe_id = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.problems = ()  # type: ignore[misc]


# --- lock format and channels --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "pixi", "needed"),
    [
        (6, "0.26.0", None),
        (6, "0.25.9", "0.26.0"),
        (7, "0.68.0-rc.1", None),  # a pre-release or build label of a SemVer is read past
        (7, "0.68.0+build.5", None),
        (7, "0.67.9+build.5", "0.68.0"),
        (5, "0.20.0", None),  # older formats are read by every pixi that reads locks at all
    ],
)
def test_each_lock_format_names_the_oldest_pixi_that_reads_it(version: int, pixi: str, needed: str | None) -> None:
    text = lock_text(*GOOD).replace("version: 6", f"version: {version}", 1)
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(text), (CF,), pixi_version=pixi)
    messages = [p.message for p in check_lock(inp).problems]
    expected = [f"lock format v{version} needs pixi >= {needed}, but the recipe pins pixi {pixi}"] if needed else []
    assert messages == expected


def test_a_lock_solved_with_fewer_channels_than_pixi_toml_asks_for_is_stale() -> None:
    pytorch = "https://conda.anaconda.org/pytorch/"
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(lock_text(*GOOD)), (CF, pytorch))
    (problem,) = check_lock(inp).problems
    assert problem.message == (
        f"the lock is stale: it was solved with channels [{CF}] but pixi.toml with this run's channel "
        f"overrides asks for [{CF}, {pytorch}] (pixi.lock:3)"
    )
    assert problem.key == "workspace.channels" and problem.value == CF
    assert (problem.file, problem.line) == ("pixi.toml", 3)


MIRROR = "file:///srv/mirror/conda-forge/"


def test_a_lock_solved_from_a_mirror_names_the_override_that_reads_it() -> None:
    inp = LockCheckInput("demo", CUDA, parse_manifest(MANIFEST), parse_lock(lock_text(*GOOD, channel=MIRROR)), (CF,))
    (problem,) = check_lock(inp).problems
    assert problem.message.startswith(f"the lock is stale: it was solved with channels [{MIRROR}] but pixi.toml asks")
    assert (problem.file, problem.line, problem.key) == ("pixi.toml", 3, "workspace.channels")
    fix = problem.fix or ""
    assert "scrollcase lock demo" in fix and f"SCROLLCASE_CHANNEL_OVERRIDES=conda-forge={MIRROR}" in fix
    assert f"--channel-override conda-forge={MIRROR}" in fix


# --- conda dependencies --------------------------------------------------------------------------------

LOCAL_FILE = "./mypkg-1.0-h0_0.conda"  # a conda file beside pixi.toml: a relative path, no URL


def with_local_packages(text: str) -> str:
    """``text`` plus a source package (``conda: .``, pixi-build) and a local conda file in the environment."""
    first = f"      - conda: {CF}{GOOD[0]}\n"
    entries = f"{first}      - conda: .\n      - conda: {LOCAL_FILE}\n"
    source = "- conda: .\n  name: mybox\n  version: 0.1.0\n  build: pyh0_0\n  subdir: noarch\n"
    records = f"{source}- conda: {LOCAL_FILE}\n  sha256: 00\n"
    return text.replace(first, entries) + records


def test_a_dependency_pinned_to_a_channel_must_be_locked_from_it() -> None:
    pinned = MANIFEST.replace('build = "cuda*" }', 'build = "cuda*", channel = "conda-forge" }')
    assert check(lock_text(*GOOD), pinned) == []
    problems = check(lock_text(*GOOD), pinned.replace('channel = "conda-forge"', 'channel = "pytorch"'))
    assert [(p.key, p.value) for p in problems] == [("dependencies.pytorch", "pytorch 2.5.1 cuda124_py311_h1_300")]
    assert problems[0].message.startswith('the lock is stale: pixi.toml asks for pytorch::pytorch[version="2.*"')


def test_packages_locked_from_a_path_are_checked_by_name_and_version_only() -> None:
    manifest = MANIFEST + 'mybox = { path = "." }\nmypkg = { version = "1.0", channel = "conda-forge" }\n'
    text = with_local_packages(lock_text(*GOOD))
    assert check(text, manifest) == []  # a path has no channel URL to compare
    stale = check(text, manifest.replace('version = "1.0"', 'version = "2.*"'))
    assert [(p.key, p.value) for p in stale] == [("dependencies.mypkg", "mypkg 1.0 h0_0")]


def test_every_dependency_is_checked_past_a_missing_one_and_a_good_one() -> None:
    manifest = MANIFEST.replace("[dependencies]\n", '[dependencies]\nnumpy = ">=2"\n').replace(
        'python = "3.11.*"', 'python = "3.12.*"'
    )
    manifest = manifest.replace('cuda-version = "12.4.*"', 'cuda-version = "12.8.*"')
    problems = check(lock_text(*GOOD), manifest)
    assert [p.key for p in problems] == ["dependencies.numpy", "dependencies.python", "dependencies.cuda-version"]
    assert problems[1].message == (
        'the lock is stale: pixi.toml asks for python[version="3.12.*"] but the lock holds '
        "python 3.11.9 h9e4cc4f_1_cpython (recipes/d/pixi.lock:12)"
    )


def test_a_pypi_package_does_not_satisfy_a_conda_dependency_of_its_name() -> None:
    numpy = FILES + "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    problems = check(lock_text(*GOOD, pypi=(numpy,)), MANIFEST + 'numpy = ">=2"\n')
    assert [p.key for p in problems] == ["dependencies.numpy"]
    assert "the lock has no numpy for linux-64" in problems[0].message


def test_conda_specs_are_read_leniently_as_pixi_reads_them_and_unreadable_ones_are_named() -> None:
    assert check(lock_text(*GOOD), MANIFEST.replace('"3.11.*"', '">=3.11.*"')) == []  # strict parsing refuses it
    (problem,) = check(lock_text(*GOOD), MANIFEST.replace('"3.11.*"', '">=3.8<3.9"'))
    assert problem.message.startswith(
        'cannot check python[version=">=3.8<3.9"] against the lock: InvalidMatchSpecError'
    )
    assert (problem.file, problem.line) == ("recipes/d/pixi.toml", 10)  # the spec to fix is in pixi.toml
    assert (problem.key, problem.value) == ("dependencies.python", "python 3.11.9 h9e4cc4f_1_cpython")


# --- PyPI specifiers -----------------------------------------------------------------------------------


def test_an_exclusion_specifier_is_checked_and_a_nightly_torch_is_a_version_like_any_other() -> None:
    text = lock_text(GOOD[0], pypi=(TORCH_280, RUNTIME_128))
    problems = check(text, pypi_manifest('"!=2.8.0"'), CUDA_128)  # "!" sorts before "*": still a specifier
    assert [p.value for p in problems] == ["torch 2.8.0"]
    nightly = (
        "https://download.pytorch.org/whl/nightly/cu128/torch-2.9.0.dev20250801%2Bcu128-cp311-cp311-linux_x86_64.whl"
    )
    assert check(lock_text(GOOD[0], pypi=(nightly, RUNTIME_128)), pypi_manifest('">=2.8"'), CUDA_128) == []


# --- the accelerator -----------------------------------------------------------------------------------

TORCH_CU121 = "https://download.pytorch.org/whl/cu121/torch-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl"
RUNTIME_121 = FILES + "nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl"


@pytest.mark.parametrize(
    ("cuda", "releases", "pin"),
    [
        ("12.6", "torch 2.7", ">=2.7,<2.8"),
        ("13.2", "torch 2.15", ">=2.15,<2.16"),
        ("12.4", "torch 2.5 or 2.6", ">=2.5,<2.7"),
        ("12.8", "torch 2.8, 2.9 or 2.10", ">=2.8,<2.11"),
        ("13.0", "torch 2.11, 2.12, 2.13 or 2.14", ">=2.11,<2.15"),
    ],
)
def test_the_pypi_advice_names_every_release_built_for_the_cuda_and_pins_them(
    cuda: str, releases: str, pin: str
) -> None:
    tag = "cu" + cuda.replace(".", "")
    assert pypi_torch_advice(cuda) == (
        f"in [pypi-dependencies] pin torch to a release whose PyPI wheels are built for CUDA {cuda} ({releases}): "
        f'torch = "{pin}", or take it from PyTorch\'s index for CUDA {cuda}: '
        f'torch = {{ version = "{pin}", index = "https://download.pytorch.org/whl/{tag}" }}'
    )


def test_a_second_cuda_runtime_below_the_targets_is_the_one_named() -> None:
    torch = "https://download.pytorch.org/whl/cu130/torch-2.11.0%2Bcu130-cp311-cp311-linux_x86_64.whl"
    runtime_130 = FILES + "nvidia_cuda_runtime-13.0.96-py3-none-manylinux_2_28_x86_64.whl"
    target = TargetSpec("linux", "x86_64", "cuda", "13.0")
    manifest = pypi_manifest('">=2.11"', PYPI_MANIFEST.replace('cuda = "12.4"', 'cuda = "13.0"'))
    (problem,) = check(lock_text(GOOD[0], pypi=(torch, runtime_130, RUNTIME_128)), manifest, target)
    assert problem.key == "nvidia-cuda-runtime-cu12" and "pulls nvidia-cuda-runtime-cu12 12.8.90" in (problem.fix or "")


def test_a_torch_for_another_cuda_beside_its_own_runtime_is_one_problem_the_torch() -> None:
    manifest = pypi_manifest('">=2.5"', PYPI_MANIFEST)
    problems = check(lock_text(GOOD[0], pypi=(TORCH_CU121, RUNTIME_121)), manifest)
    assert [p.key for p in problems] == ["torch"] and "a build for cuda12.1" in problems[0].message
    cpu_wheel = "https://download.pytorch.org/whl/cpu/torch-2.6.0%2Bcpu-cp311-cp311-linux_x86_64.whl"
    problems = check(lock_text(GOOD[0], pypi=(cpu_wheel, RUNTIME_128)), manifest)
    assert [p.key for p in problems] == ["torch"] and "a CPU build" in problems[0].message


def test_a_runtime_for_another_cuda_is_pointed_at_where_the_lock_lists_the_first() -> None:
    runtime_13 = FILES + "nvidia_cuda_runtime-12.8.57-py3-none-manylinux_2_28_x86_64.whl"
    text = lock_text(GOOD[0], pypi=(CU124_WHEEL, RUNTIME_128, runtime_13))
    (problem,) = check(text, PYPI_MANIFEST)
    assert (problem.key, problem.value) == ("nvidia-cuda-runtime-cu12", "12.8.90")
    assert problem.line == text.splitlines().index(f"- pypi: {RUNTIME_128}") + 1


def test_a_cuda_version_record_below_the_targets_cuda_is_refused() -> None:
    text = lock_text(GOOD[0], GOOD[1], "noarch/cuda-version-12.1-h1_3.conda")
    problems = check(text, MANIFEST.replace('cuda-version = "12.4.*"', "cuda-version = '*'"))
    assert [(p.key, p.value) for p in problems] == [("cuda-version", "12.1")]
    assert problems[0].line == text.splitlines().index(f"- conda: {CF}noarch/cuda-version-12.1-h1_3.conda") + 1


def test_a_cuda_box_without_torch_is_pointed_at_its_cuda_record_then_its_runtime_then_the_environment() -> None:
    manifest = MANIFEST.replace('pytorch = { version = "2.*", build = "cuda*" }\n', "").replace(
        'cuda-version = "12.4.*"\n', ""
    )
    record = "noarch/cuda-version-12.8-h5d125a7_3.conda"
    both = lock_text(GOOD[0], record, pypi=(RUNTIME_128,))
    (problem,) = check(both, manifest)
    assert problem.line == both.splitlines().index(f"- conda: {CF}{record}") + 1 and problem.value == "12.8, 12.8"
    runtime_only = lock_text(GOOD[0], pypi=(RUNTIME_128,))
    (problem,) = check(runtime_only, manifest)
    assert problem.line == runtime_only.splitlines().index(f"- pypi: {RUNTIME_128}") + 1
    assert problem.message == "linux-x86_64-cuda12.4 needs CUDA 12.4 packages but the lock holds CUDA 12.8"
    (problem,) = check(lock_text(GOOD[0]), manifest)
    assert (problem.line, problem.value) == (3, None)  # the environment's line


def test_a_cpu_target_without_torch_passes_and_a_conda_cuda_torch_gets_the_conda_fix() -> None:
    no_torch = CPU_MANIFEST.replace('pytorch = "2.*"\n', "")
    assert check(lock_text(GOOD[0]), no_torch, CPU) == []
    (problem,) = check(lock_text(*GOOD[:2]), CPU_MANIFEST, CPU)
    assert 'pytorch = { version = "2.*", build = "cpu*" }' in (problem.fix or "")
    assert "download.pytorch.org" not in (problem.fix or "")


def test_a_conda_package_of_its_name_satisfies_a_pypi_dependency_and_a_locked_wheel_comes_first() -> None:
    """pixi solves conda first: a PyPI dependency a conda package already provides gets no wheel in the lock."""
    numpy_conda = "linux-64/numpy-1.26.4-py311h1_0.conda"
    text = lock_text(*GOOD, numpy_conda)
    assert check(text, MANIFEST + '\n[pypi-dependencies]\nnumpy = ">=1.26"\n') == []
    (problem,) = check(text, MANIFEST + '\n[pypi-dependencies]\nnumpy = ">=2"\n')
    assert problem.value == "numpy 1.26.4" and "of recipes/d/pixi.lock" in problem.message
    wheel = FILES + "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    conda_entry = f"      - conda: {CF}{numpy_conda}\n"
    both = lock_text(*GOOD, numpy_conda, pypi=(wheel,))
    both = both.replace(conda_entry, "").replace(f"      - pypi: {wheel}\n", f"      - pypi: {wheel}\n{conda_entry}")
    assert check(both, MANIFEST + '\n[pypi-dependencies]\nnumpy = ">=2"\n') == []  # the wheel, listed before
    typing = "noarch/typing_extensions-4.12.2-pyha770c72_0.conda"  # conda's name, PyPI's typing-extensions
    assert check(lock_text(*GOOD, typing), MANIFEST + '\n[pypi-dependencies]\ntyping-extensions = "*"\n') == []
    (problem,) = check(lock_text(*GOOD), MANIFEST + '\n[pypi-dependencies]\ntorch = ">=2.6"\n')
    assert problem.value == "pytorch 2.5.1"  # conda pytorch is PyPI torch
    placeholder = FILES + "pytorch-1.0.2-py3-none-any.whl"  # PyPI's "pytorch" is not torch
    problems = check(
        lock_text(GOOD[0], pypi=(placeholder,)),
        CPU_MANIFEST.replace('pytorch = "2.*"\n', "") + ('\n[pypi-dependencies]\ntorch = "*"\n'),
        CPU,
    )
    assert [p.message for p in problems] == [
        "the lock is stale: pixi.toml asks for the PyPI package torch but the lock has none for linux-64"
    ]
