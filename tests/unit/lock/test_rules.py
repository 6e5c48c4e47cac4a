"""pixi.toml rules against the recipe, pixi.toml line numbers, and real-world manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.errors import ManifestError
from scrollcase.lock.manifest import PypiDependency, load_manifest, parse_manifest, toml11_to_toml10
from scrollcase.lock.rules import manifest_problems, python_spec_matches
from scrollcase.recipe.loader import load_recipe, parse_recipe
from scrollcase.recipe.model import Recipe
from tests.recipe_samples import cpu_recipe, cuda_recipe, to_text

REPO = Path(__file__).resolve().parents[3]
CUDA = parse_recipe(to_text(cuda_recipe()))
CPU = parse_recipe(to_text(cpu_recipe()))

GOOD_CUDA = """\
[workspace]
name = "my-model-linux-x86_64-cuda12.4"
channels = ["conda-forge"]
platforms = ["linux-64"]

[system-requirements]
cuda = "12.4"

[dependencies]
python = "3.11.*"
pytorch = { version = "2.*", build = "cuda*" }
cuda-version = "12.4.*"
"""

GOOD_CPU = """\
[workspace]
name = "my-model-linux-x86_64-cpu"
channels = ["conda-forge"]
platforms = ["linux-64"]

[dependencies]
python = "3.11.*"
pytorch = { version = "2.*", build = "cpu*" }
"""


def _line(text: str, needle: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert hits, needle
    return hits[0]


def test_good_manifests_pass() -> None:
    assert manifest_problems(parse_manifest(GOOD_CUDA), CUDA) == []
    assert manifest_problems(parse_manifest(GOOD_CPU), CPU) == []


@pytest.mark.parametrize(
    ("replace", "by"),
    [
        ('platforms = ["linux-64"]', 'platforms = [{ platform = "linux-64", cuda = "12.4" }]'),
        ('python = "3.11.*"', 'python = "3.11"'),
        ('python = "3.11.*"', 'python = ">=3.11,<3.12"'),
        ('python = "3.11.*"', 'python = "3.11.9"'),
        ('cuda-version = "12.4.*"', 'cuda-version = "12.4"'),
        ('cuda-version = "12.4.*"', 'cuda-version = "==12.4"'),
        ('build = "cuda*"', 'build = "cuda126*"'),
    ],
)
def test_equivalent_cuda_forms_pass(replace: str, by: str) -> None:
    text = GOOD_CUDA.replace(replace, by)
    if 'cuda = "12.4" }]' in by:
        text = text.replace('[system-requirements]\ncuda = "12.4"\n', "")
    assert manifest_problems(parse_manifest(text), CUDA) == []


def test_old_project_table_and_target_overrides_pass() -> None:
    text = (
        GOOD_CUDA.replace("[workspace]", "[project]").replace(
            'pytorch = { version = "2.*", build = "cuda*" }\n', 'pytorch = "2.*"\n'
        )
        + '\n[target.linux-64.dependencies]\npytorch = { version = "2.*", build = "cuda*" }\n'
    )
    assert manifest_problems(parse_manifest(text), CUDA) == []


CUDA_CASES = [
    (
        "platforms-extra",
        'platforms = ["linux-64"]',
        'platforms = ["linux-64", "win-64"]',
        "workspace.platforms",
        "platforms =",
        "exactly",
        '["linux-64"]',
    ),
    (
        "platforms-wrong",
        'platforms = ["linux-64"]',
        'platforms = ["osx-arm64"]',
        "workspace.platforms",
        "platforms =",
        "exactly",
        '["linux-64"]',
    ),
    (
        "platforms-missing",
        'platforms = ["linux-64"]\n',
        "",
        "workspace.platforms",
        "[workspace]",
        "exactly",
        "platforms",
    ),
    (
        "no-system-requirement",
        '[system-requirements]\ncuda = "12.4"\n',
        "",
        "system-requirements.cuda",
        None,
        "not declared",
        '[system-requirements] cuda = "12.4"',
    ),
    (
        "wrong-system-requirement",
        'cuda = "12.4"',
        'cuda = "12.8"',
        "system-requirements.cuda",
        'cuda = "12.8"',
        "must be '12.4'",
        'cuda = "12.4"',
    ),
    (
        "major-only-system-requirement",
        'cuda = "12.4"',
        'cuda = "12"',
        "system-requirements.cuda",
        'cuda = "12"',
        "must be '12.4'",
        'cuda = "12.4"',
    ),
    (  # a patch release is not the major.minor the target names
        "patch-level-system-requirement",
        'cuda = "12.4"',
        'cuda = "12.4.1"',
        "system-requirements.cuda",
        'cuda = "12.4.1"',
        "must be '12.4'",
        'cuda = "12.4"',
    ),
    (
        "no-cuda-version-pin",
        'cuda-version = "12.4.*"\n',
        "",
        "dependencies.cuda-version",
        "[dependencies]",
        "not pinned",
        'cuda-version = "12.4.*"',
    ),
    (
        "wrong-cuda-version-pin",
        'cuda-version = "12.4.*"',
        'cuda-version = "12.8.*"',
        "dependencies.cuda-version",
        "cuda-version =",
        "must pin CUDA 12.4",
        'cuda-version = "12.4.*"',
    ),
    (  # a prefix of the target's CUDA is not it ("12.1" is not "12.10"): the pin is matched whole
        "cuda-version-pin-of-a-longer-minor",
        'cuda-version = "12.4.*"',
        'cuda-version = "12.40"',
        "dependencies.cuda-version",
        "cuda-version =",
        "must pin CUDA 12.4",
        'cuda-version = "12.4.*"',
    ),
    (
        "cuda-version-pin-of-either-cuda",
        'cuda-version = "12.4.*"',
        'cuda-version = "12.4.*|12.8.*"',
        "dependencies.cuda-version",
        "cuda-version =",
        "must pin CUDA 12.4",
        'cuda-version = "12.4.*"',
    ),
    (
        "loose-cuda-version-pin",
        'cuda-version = "12.4.*"',
        'cuda-version = ">=12"',
        "dependencies.cuda-version",
        "cuda-version =",
        "must pin CUDA 12.4",
        "12.4.*",
    ),
    (
        "pytorch-unpinned",
        'pytorch = { version = "2.*", build = "cuda*" }',
        'pytorch = "2.*"',
        "dependencies.pytorch",
        "pytorch =",
        "CUDA build",
        'build = "cuda*"',
    ),
    (
        "pytorch-cpu-build",
        'build = "cuda*"',
        'build = "cpu*"',
        "dependencies.pytorch",
        "pytorch =",
        "CUDA build",
        'build = "cuda*"',
    ),
    (
        "python-missing",
        'python = "3.11.*"\n',
        "",
        "dependencies.python",
        "[dependencies]",
        "not a dependency",
        'python = "3.11.*"',
    ),
    (
        "python-other",
        'python = "3.11.*"',
        'python = "3.12.*"',
        "dependencies.python",
        "python =",
        "pythonVersion '3.11'",
        'python = "3.11.*"',
    ),
    (
        "python-open-range",
        'python = "3.11.*"',
        'python = ">=3.10"',
        "dependencies.python",
        "python =",
        "pythonVersion",
        "3.11.*",
    ),
    (
        "python-garbage",
        'python = "3.11.*"',
        'python = "three"',
        "dependencies.python",
        "python =",
        "pythonVersion",
        "3.11.*",
    ),
]


@pytest.mark.parametrize("case", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_cuda_manifest_rules(case: tuple[str, str, str, str, str | None, str, str]) -> None:
    _, old, new, key, needle, message, fix = case
    assert old in GOOD_CUDA
    text = GOOD_CUDA.replace(old, new)
    problems = manifest_problems(parse_manifest(text, file="recipes/x/pixi.toml"), CUDA)
    found = [p for p in problems if p.key == key]
    assert found, [(p.key, p.message) for p in problems]
    problem = found[0]
    assert problem.file == "recipes/x/pixi.toml"
    assert message in problem.message
    assert problem.fix and fix in problem.fix
    if needle is not None:
        assert problem.line == _line(text, needle)


CPU_CASES = [
    (
        "cuda-build-on-cpu",
        'build = "cpu*"',
        'build = "cuda*"',
        "dependencies.pytorch",
        "pytorch =",
        "must not use a CUDA build",
        'build = "cpu*"',
    ),
    (
        "pytorch-gpu-on-cpu",
        'pytorch = { version = "2.*", build = "cpu*" }',
        'pytorch-gpu = "2.*"',
        "dependencies.pytorch-gpu",
        "pytorch-gpu",
        "CUDA-only",
        "pytorch",
    ),
    (
        "cuda-pin-on-cpu",
        'python = "3.11.*"',
        'python = "3.11.*"\ncuda-version = "12.4.*"',
        "dependencies.cuda-version",
        "cuda-version",
        "must not pin cuda-version",
        "remove",
    ),
    (
        "system-cuda-on-cpu",
        "[dependencies]",
        '[system-requirements]\ncuda = "12.4"\n\n[dependencies]',
        "system-requirements.cuda",
        'cuda = "12.4"',
        "must not require CUDA",
        "remove",
    ),
    (
        "platform-cuda-on-cpu",
        'platforms = ["linux-64"]',
        'platforms = [{ platform = "linux-64", cuda = "12.4" }]',
        "workspace.platforms",
        "platforms =",
        "must not declare a CUDA",
        '["linux-64"]',
    ),
]


@pytest.mark.parametrize("case", CPU_CASES, ids=[c[0] for c in CPU_CASES])
def test_cpu_manifest_rules(case: tuple[str, str, str, str, str, str, str]) -> None:
    _, old, new, key, needle, message, fix = case
    assert old in GOOD_CPU
    text = GOOD_CPU.replace(old, new)
    problems = manifest_problems(parse_manifest(text), CPU)
    found = [p for p in problems if p.key == key]
    assert found, [(p.key, p.message) for p in problems]
    assert message in found[0].message and fix in (found[0].fix or "")
    assert found[0].line == _line(text, needle)


def test_pypi_torch_index_must_match_the_target() -> None:
    text = (
        GOOD_CUDA + '\n[pypi-dependencies]\ntorch = { version = "*", index = "https://download.pytorch.org/whl/cpu" }\n'
    )
    problems = manifest_problems(parse_manifest(text), CUDA)
    assert [p.key for p in problems] == ["pypi-dependencies.torch"]
    assert problems[0].line == _line(text, "index = ") and "cu124" in (problems[0].fix or "")
    good = text.replace("whl/cpu", "whl/cu124")
    assert manifest_problems(parse_manifest(good), CUDA) == []
    on_cpu = GOOD_CPU + text[text.index("\n[pypi-dependencies]") :].replace("whl/cpu", "whl/cu124")
    assert [p.key for p in manifest_problems(parse_manifest(on_cpu), CPU)] == ["pypi-dependencies.torch"]


PLATFORMS_CUDA = 'platforms = [{ platform = "linux-64", cuda = "12.4" }]'
NO_SYSTEM_REQUIREMENT = ('[system-requirements]\ncuda = "12.4"\n', "")


def test_a_wrong_cuda_in_the_platforms_entry_is_the_platforms_entrys_problem() -> None:
    text = GOOD_CUDA.replace('platforms = ["linux-64"]', PLATFORMS_CUDA.replace("12.4", "12.8"))
    text = text.replace(*NO_SYSTEM_REQUIREMENT)
    (found,) = manifest_problems(parse_manifest(text), CUDA)
    assert (found.key, found.line, found.value) == ("workspace.platforms", _line(text, "platforms ="), "12.8")
    assert "must be '12.4'" in found.message


@pytest.mark.parametrize(("legacy", "entry"), [("12.4", "12.4"), ("12.1", "12.4"), ("12.8", "12.4"), ("12.4", "12.8")])
def test_system_requirements_and_the_platforms_entry_must_say_the_same_cuda(legacy: str, entry: str) -> None:
    """Both declared: one CUDA, in both places (pixi would take the platforms entry's); either order of a
    difference is one problem at [system-requirements]."""
    text = GOOD_CUDA.replace('platforms = ["linux-64"]', PLATFORMS_CUDA.replace("12.4", entry))
    text = text.replace('cuda = "12.4"\n\n[dependencies]', f'cuda = "{legacy}"\n\n[dependencies]')
    problems = manifest_problems(parse_manifest(text), CUDA)
    disagree = [p for p in problems if "disagrees with the platforms entry" in p.message]
    if legacy == entry:
        assert problems == []
    else:
        assert [(p.key, p.value, p.line) for p in disagree] == [
            ("system-requirements.cuda", legacy, _line(text, f'cuda = "{legacy}"'))
        ], problems


def test_an_unpinned_cuda_pytorch_is_told_the_cuda_build_of_its_own_version() -> None:
    text = GOOD_CUDA.replace('pytorch = { version = "2.*", build = "cuda*" }', 'pytorch = "2.5.*"')
    (found,) = manifest_problems(parse_manifest(text), CUDA)
    assert 'pytorch = { version = "2.5.*", build = "cuda*" }' in (found.fix or ""), found.fix


@pytest.mark.parametrize(
    ("pin", "fix"),
    [
        ('{ version = "2.5.*", build = "cuda*" }', 'pytorch = { version = "2.5.*", build = "cpu*" }'),
        ('{ build = "cuda*" }', 'pytorch = { version = "2.*", build = "cpu*" }'),
    ],
    ids=["its-version-kept", "2.*-when-none"],
)
def test_a_cuda_pytorch_on_a_cpu_target_is_told_the_cpu_build_of_its_own_version(pin: str, fix: str) -> None:
    text = GOOD_CPU.replace('pytorch = { version = "2.*", build = "cpu*" }', f"pytorch = {pin}")
    (found,) = [p for p in manifest_problems(parse_manifest(text), CPU) if p.key == "dependencies.pytorch"]
    assert fix in (found.fix or ""), found.fix


@pytest.mark.parametrize("torch", ['torch = ">=2.5"', 'torch = { version = ">=2.5" }'], ids=["bare", "table"])
def test_a_cpu_torch_from_pypis_default_index_is_no_index_problem(torch: str) -> None:
    """The index rule looks at a declared index only (PyPI's default Linux torch pulling CUDA wheels is
    lock-check's to find, in the lock); a torch without one is neither refused nor a crash."""
    text = GOOD_CPU + f"\n[pypi-dependencies]\n{torch}\n"
    assert manifest_problems(parse_manifest(text), CPU) == []


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ("3.11.*", True),
        ("3.11", True),
        (">=3.11,<3.12", True),
        ("~=3.11.0", True),
        ("3.11.4", True),
        ("3.12.*", False),
        (">=3.10", False),
        ("*", False),
        ("3.1.*", False),
        ("not a spec", False),
    ],
)
def test_python_spec_matches(spec: str, ok: bool) -> None:
    assert python_spec_matches(spec, "3.11") is ok


# --- pixi.toml line numbers --------------------------------------------------------------------------

LINES = '''\
# comment: platforms = ["nope"]
[workspace]
name = "x"
description = """
python = "not a key"
"""
platforms = [
  "linux-64",
]
"channels" = ["conda-forge"]

[dependencies]
python = "3.11.*"
"pytorch" = { version = "2.*", build = "cuda*" }
numpy.version = "1.*"

[ target . "linux-64" . dependencies ]  # spaces and quotes in a header
cuda-version = "12.4.*"

[system-requirements]
'''


def test_line_of_understands_toml_structure() -> None:
    manifest = parse_manifest(LINES)
    assert manifest.line_of("platforms", "workspace") == 7
    assert manifest.line_of("channels", "workspace") == 10
    assert manifest.line_of("python", "dependencies") == 13  # not the one inside the multi-line string
    assert manifest.line_of("pytorch", "dependencies") == 14
    assert manifest.line_of("numpy", "dependencies") == 15
    assert manifest.line_of("version", "dependencies.numpy") == 15
    assert manifest.line_of("cuda-version", "target.linux-64.dependencies") == 18
    assert manifest.line_of("", "system-requirements") == 20
    assert manifest.line_of("cuda", "system-requirements") is None
    assert manifest.line_of("python") is None
    project = parse_manifest(LINES.replace("[workspace]", "[project]"))
    assert project.line_of("platforms", "workspace") == 7


def test_toml11_inline_tables_parse_and_keep_line_numbers() -> None:
    text = (
        '[workspace]\nname = "x"\nplatforms = ["linux-64"]\n\n[dependencies]\n'
        'pytorch = {\n  version = "2.*",  # any 2.x\n  build = "cuda*",\n}\npython = "3.11.*"\n'
    )
    manifest = parse_manifest(text)
    assert manifest.dependencies["pytorch"].build == "cuda*"
    assert manifest.line_of("python", "dependencies") == 10
    assert toml11_to_toml10(text).count("\n") == text.count("\n")
    with pytest.raises(ManifestError) as info:
        parse_manifest("[workspace\n")
    assert info.value.problems[0].line == 1


def test_example_recipes_follow_the_rules() -> None:
    folders = sorted((REPO / "recipes").glob("tiny-mlp-*"))
    assert len(folders) == 5
    for folder in folders:
        recipe: Recipe = load_recipe(folder)
        assert manifest_problems(load_manifest(folder / "pixi.toml"), recipe) == [], folder.name


def _real_world() -> Path | None:
    for candidate in (REPO / "shared", REPO.parent / "shared", Path("/work/shared")):
        if (candidate / "real-world" / "pixi").is_dir():
            return candidate / "real-world" / "pixi"
    return None


def test_real_world_manifests_parse() -> None:
    root = _real_world()
    if root is None:
        pytest.skip("shared/real-world/pixi is not next to this checkout")
    files = sorted(root.glob("*/pixi.toml"))
    assert len(files) >= 10
    for file in files:
        manifest = load_manifest(file)
        assert manifest.platforms, file
        assert manifest.line_of("platforms", "workspace") is not None, file
    cuda_forms = [load_manifest(f).cuda_requirement("linux-64")[0] for f in files]
    assert "12.9" in cuda_forms  # array-api-extra: TOML 1.1 multi-line tables + per-platform cuda


# --- torch from PyPI ---------------------------------------------------------------------------------

PYPI_CUDA = """\
[workspace]
name = "my-model-linux-x86_64-cuda12.4"
channels = ["conda-forge"]
platforms = ["linux-64"]

[system-requirements]
cuda = "12.4"

[dependencies]
python = "3.11.*"

[pypi-dependencies]
torch = ">=2.5,<2.7"
"""


def _windows_cuda() -> Recipe:
    data = cuda_recipe()
    data["recipeId"] = "my-model-windows-x86_64-cuda12.4"
    data["target"]["platform"] = "windows"
    data["pythonEntryPoint"] = "venv/python.exe"
    return parse_recipe(to_text(data))


WINDOWS_CUDA = _windows_cuda()
PYPI_WINDOWS = PYPI_CUDA.replace("linux-x86_64", "windows-x86_64").replace('"linux-64"', '"win-64"')


def test_pypi_torch_needs_no_conda_pytorch_and_no_cuda_version_pin() -> None:
    """The CUDA runtime wheel PyPI's torch pulls pins the CUDA; lock-check checks its version."""
    assert manifest_problems(parse_manifest(PYPI_CUDA), CUDA) == []
    pinned = PYPI_CUDA.replace('python = "3.11.*"', 'python = "3.11.*"\ncuda-version = "12.8.*"')
    assert [p.key for p in manifest_problems(parse_manifest(pinned), CUDA)] == ["dependencies.cuda-version"]


def test_pypi_torch_on_a_cuda_target_still_needs_the_cuda_system_requirement() -> None:
    text = PYPI_CUDA.replace('[system-requirements]\ncuda = "12.4"\n', "")
    problems = manifest_problems(parse_manifest(text), CUDA)
    assert [p.key for p in problems] == ["system-requirements.cuda"]
    assert "not declared" in problems[0].message
    platform_form = text.replace('platforms = ["linux-64"]', 'platforms = [{ platform = "linux-64", cuda = "12.4" }]')
    assert manifest_problems(parse_manifest(platform_form), CUDA) == []


def test_conda_pytorch_beside_a_pypi_torch_keeps_the_conda_rules() -> None:
    text = PYPI_CUDA.replace('python = "3.11.*"', 'python = "3.11.*"\npytorch = "2.*"')
    keys = [p.key for p in manifest_problems(parse_manifest(text), CUDA)]
    assert keys == ["dependencies.cuda-version", "dependencies.pytorch"]


def test_windows_cuda_pypi_torch_from_the_default_index_is_an_error() -> None:
    problems = manifest_problems(parse_manifest(PYPI_WINDOWS, file="recipes/w/pixi.toml"), WINDOWS_CUDA)
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.key == "pypi-dependencies.torch" and problem.file == "recipes/w/pixi.toml"
    assert problem.line == _line(PYPI_WINDOWS, "torch =")
    assert "PyPI's default index, which has no CUDA build of torch for Windows (only a CPU wheel" in problem.message
    assert problem.value == "torch >=2.5,<2.7 from PyPI's default index"
    assert problem.fix == (
        "take torch from PyTorch's CUDA 12.4 index: "
        'torch = { version = ">=2.5,<2.7", index = "https://download.pytorch.org/whl/cu124" }'
    )


@pytest.mark.parametrize(
    "torch",
    [
        'torch = { version = ">=2.5,<2.7", index = "https://download.pytorch.org/whl/cu124" }',
        'torch = { url = "https://download.pytorch.org/whl/cu124/torch-2.6.0%2Bcu124-cp311-cp311-win_amd64.whl" }',
    ],
)
def test_windows_cuda_pypi_torch_from_pytorchs_index_or_a_wheel_url_passes(torch: str) -> None:
    text = PYPI_WINDOWS.replace('torch = ">=2.5,<2.7"', torch)
    assert manifest_problems(parse_manifest(text), WINDOWS_CUDA) == []


def test_windows_default_index_rule_reads_target_tables_and_spares_other_targets() -> None:
    text = PYPI_WINDOWS.replace(
        '[pypi-dependencies]\ntorch = ">=2.5,<2.7"\n', "[target.win-64.pypi-dependencies]\ntorch = '*'\n"
    )
    problems = manifest_problems(parse_manifest(text), WINDOWS_CUDA)
    assert [(p.key, p.line) for p in problems] == [("target.win-64.pypi-dependencies.torch", _line(text, "torch ="))]
    assert 'torch = { version = "*", index = "https://download.pytorch.org/whl/cu124" }' in (problems[0].fix or "")
    assert manifest_problems(parse_manifest(PYPI_CUDA), CUDA) == []  # Linux: PyPI's default torch is CUDA


def test_pypi_torch_index_rule_reads_target_tables() -> None:
    text = PYPI_CUDA.replace(
        '[pypi-dependencies]\ntorch = ">=2.5,<2.7"\n',
        "[target.linux.pypi-dependencies]\n"
        'torch = { version = "*", index = "https://download.pytorch.org/whl/cu128" }\n',
    )
    problems = manifest_problems(parse_manifest(text), CUDA)
    assert [p.key for p in problems] == ["target.linux.pypi-dependencies.torch"]
    assert problems[0].value == "https://download.pytorch.org/whl/cu128" and "cu124" in (problems[0].fix or "")


def test_pypi_dependencies_for_models_every_form() -> None:
    text = (
        PYPI_CUDA
        + 'Rich = "*"\nnumpy = { version = ">=2", extras = ["x"], index = "https://mirror/simple" }\n'
        + 'mylib = { path = "./mylib", editable = true }\nrtm = { git = "https://github.com/x/rtm.git" }\n'
        + 'wheel = { url = "https://example.org/wheel-1.0-py3-none-any.whl" }\n'
        + '\n[target.linux-64.pypi-dependencies]\ntorch = "==2.6.0"\n'
        + '\n[target.osx.pypi-dependencies]\ntorch = "==2.9.0"\n'
    )
    deps = parse_manifest(text).pypi_dependencies_for("linux-64")
    assert sorted(deps) == ["mylib", "numpy", "rich", "rtm", "torch", "wheel"]
    assert deps["rich"] == PypiDependency("Rich", "*")
    assert deps["numpy"] == PypiDependency("numpy", ">=2", index="https://mirror/simple")
    assert [deps[n].source for n in ("mylib", "rtm", "wheel")] == ["path", "git", "url"]
    assert deps["torch"] == PypiDependency("torch", "==2.6.0", table="target.linux-64.pypi-dependencies")
    assert deps["torch"].key == "target.linux-64.pypi-dependencies.torch"
    assert parse_manifest(text).pypi_dependencies_for("osx-arm64")["torch"].version == "==2.9.0"
    with pytest.raises(ManifestError, match="must be a string or a table") as info:
        parse_manifest(PYPI_CUDA + "bad = 3\n").pypi_dependencies_for("linux-64")
    (problem,) = info.value.problems
    assert problem.file == "pixi.toml" and problem.fix and "index" in problem.fix
    assert (problem.key, problem.line, problem.value) == ("pypi-dependencies.bad", len(PYPI_CUDA.splitlines()) + 1, "3")
