from __future__ import annotations

import pytest
import yaml

from scrollcase.errors import LockError
from scrollcase.lock import scan as lockscan
from scrollcase.lock import yamlread as lockyaml
from scrollcase.lock.read import LockFile, name_from_location, parse_lock, read_version

CF = "https://conda.anaconda.org/conda-forge"

V6 = f"""\
version: 6
environments:
  default:
    channels:
    - url: https://conda.anaconda.org/conda-forge/
    indexes:
    - https://pypi.org/simple
    packages:
      linux-64:
      - conda: {CF}/linux-64/pytorch-2.5.1-cuda124_py311_h1_300.conda
      - conda: {CF}/noarch/cuda-version-12.4-h3060b56_3.conda
      - pypi: https://download.pytorch.org/whl/cu124/torchvision-0.20.1%2Bcu124-cp311-cp311-linux_x86_64.whl
      - pypi: git+https://github.com/org/tool.git?rev=abc#abc
packages:
- conda: {CF}/linux-64/pytorch-2.5.1-cuda124_py311_h1_300.conda
  sha256: 00
  depends:
  - python >=3.11
  - name: not-a-record-field
- conda: {CF}/noarch/cuda-version-12.4-h3060b56_3.conda
  sha256: 11
- pypi: https://download.pytorch.org/whl/cu124/torchvision-0.20.1%2Bcu124-cp311-cp311-linux_x86_64.whl
  name: torchvision
  version: 0.20.1+cu124
- pypi: git+https://github.com/org/tool.git?rev=abc#abc
  name: My_Tool
  version: '1.0'
"""

V7 = f"""\
version: 7
platforms:
- name: linux-64
  virtual-packages:
  - __glibc=2.28
- name: p1
  subdir: linux-64
  virtual-packages:
  - __cuda=12.4
  - __glibc=2.28
environments:
  default:
    channels:
    - url: https://conda.anaconda.org/conda-forge/
    packages:
      linux-64:
      - conda: {CF}/linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda
      p1:
      - conda: {CF}/linux-64/pytorch-2.5.1-cuda124_py311_h1_300.conda
      - conda_source: mypkg[abc123] @ .
packages:
- conda: {CF}/linux-64/pytorch-2.5.1-cpu_mkl_py311_h2_100.conda
  sha256: 00
- conda: {CF}/linux-64/pytorch-2.5.1-cuda124_py311_h1_300.conda
  sha256: 11
- conda_source: mypkg[abc123] @ .
  version: 0.1.0
"""

V5 = f"""\
version: 5
environments:
  default:
    channels:
    - url: https://conda.anaconda.org/conda-forge/
    packages:
      linux-64:
      - conda: {CF}/linux-64/pytorch-2.4.0-cuda120_py312h26b3cf7_301.conda
      - pypi: https://files.pythonhosted.org/packages/aa/tokenizers-0.19.1.tar.gz
packages:
- kind: conda
  name: pytorch
  version: 2.4.0
  build: cuda120_py312h26b3cf7_301
  subdir: linux-64
  url: {CF}/linux-64/pytorch-2.4.0-cuda120_py312h26b3cf7_301.conda
  depends:
  - python
- kind: pypi
  name: tokenizers
  version: 0.19.1
  url: https://files.pythonhosted.org/packages/aa/tokenizers-0.19.1.tar.gz
"""

V3 = f"""\
version: 3
metadata:
  channels:
  - url: https://conda.anaconda.org/conda-forge/
    used_env_vars: []
  platforms:
  - linux-64
  - osx-arm64
package:
- platform: linux-64
  name: pytorch
  version: 2.0.0
  manager: conda
  url: {CF}/linux-64/pytorch-2.0.0-cpu_generic_py39h1dbe8e4_4.conda
  build: cpu_generic_py39h1dbe8e4_4
- platform: linux-64
  name: python-dateutil
  version: 2.8.2
  manager: conda
  url: {CF}/noarch/python-dateutil-2.8.2-pyhd8ed1ab_0.conda
  build: pyhd8ed1ab_0
- platform: osx-arm64
  name: python-dateutil
  version: 2.8.2
  manager: conda
  url: {CF}/noarch/python-dateutil-2.8.2-pyhd8ed1ab_0.conda
  build: pyhd8ed1ab_0
- platform: osx-arm64
  name: torch
  version: 2.0.0
  manager: pip
  url: https://files.pythonhosted.org/packages/aa/torch-2.0.0-cp39-none-macosx_11_0_arm64.whl
"""


@pytest.mark.parametrize("fast", [True, False])
def test_v6_names_come_from_file_names_or_the_record(fast: bool) -> None:
    lock = parse_lock(V6, "pixi.lock", fast=fast)
    env = lock.environments["default"]
    assert env.channels == ("https://conda.anaconda.org/conda-forge/",)
    assert env.indexes == ("https://pypi.org/simple",)
    torch, cuda, vision, tool = env.packages["linux-64"]
    assert (torch.name, torch.version, torch.build) == ("pytorch", "2.5.1", "cuda124_py311_h1_300")
    assert (cuda.name, cuda.version) == ("cuda-version", "12.4")
    assert (vision.name, vision.version, vision.build) == ("torchvision", "0.20.1+cu124", None)
    assert (tool.kind, tool.name, tool.version) == ("pypi", "my-tool", "1.0")
    assert torch.line == 15
    assert torch.entry_line == (10 if fast else None)


def test_fast_record_lines_are_exact() -> None:
    lines = V6.splitlines()
    lock = parse_lock(V6)
    for package in lock.environments["default"].packages["linux-64"]:
        assert package.line is not None
        assert lines[package.line - 1].endswith(package.location)


@pytest.mark.parametrize("fast", [True, False])
def test_v7_platform_names_and_sources(fast: bool) -> None:
    lock = parse_lock(V7, fast=fast)
    assert lock.subdir_of("p1") == "linux-64"
    assert lock.platforms["p1"].virtual_packages == ("__cuda=12.4", "__glibc=2.28")
    assert lock.platform_names("default", "linux-64") == ["linux-64", "p1"]
    source = lock.environments["default"].packages["p1"][1]
    assert (source.kind, source.name, source.version) == ("conda", "mypkg", "0.1.0")


@pytest.mark.parametrize("fast", [True, False])
def test_v5_records_carry_their_names(fast: bool) -> None:
    lock = parse_lock(V5, fast=fast)
    torch, tok = lock.environments["default"].packages["linux-64"]
    assert (torch.name, torch.build) == ("pytorch", "cuda120_py312h26b3cf7_301")
    assert (tok.kind, tok.name, tok.version) == ("pypi", "tokenizers", "0.19.1")
    if fast:
        assert torch.line == 11  # the `- kind: conda` line that opens the record


def test_v3_groups_records_by_platform() -> None:
    lock = parse_lock(V3)
    env = lock.environments["default"]
    assert env.channels == ("https://conda.anaconda.org/conda-forge/",)
    assert [p.name for p in env.packages["linux-64"]] == ["pytorch", "python-dateutil"]
    assert [(p.kind, p.name) for p in env.packages["osx-arm64"]] == [("conda", "python-dateutil"), ("pypi", "torch")]
    assert env.packages["osx-arm64"][0].line == 26  # the url of the second record of that URL


def test_environment_filter_skips_other_environments() -> None:
    text = V6.replace("environments:\n", "environments:\n  other:\n    channels: []\n    packages: {}\n", 1)
    lock = parse_lock(text, environments={"default"})
    assert list(lock.environments) == ["default"]


def test_truncated_lock_names_the_missing_record() -> None:
    truncated = V6[: V6.rindex("- pypi: https://download.pytorch.org")]
    with pytest.raises(LockError) as info:
        parse_lock(truncated, "recipes/x/pixi.lock")
    problem = info.value.problems[0]
    assert "no record" in problem.message and "torchvision" in problem.message
    assert problem.line == 12
    assert "truncated" in info.value.message


def test_lock_cut_inside_the_environments_is_reported() -> None:
    truncated = V6[: V6.index("      - pypi: https://download.pytorch.org")]
    with pytest.raises(LockError, match="truncated") as info:
        parse_lock(truncated, "recipes/x/pixi.lock")
    assert info.value.problems[0].line == 10


def test_lock_cut_mid_line_is_reported() -> None:
    with pytest.raises(LockError, match="truncated"):
        parse_lock(V6[: V6.index("- conda:") + 30], "pixi.lock")


def test_invalid_yaml_reports_its_line() -> None:
    broken = V6.replace("    packages:\n      linux-64:\n", "    packages: [unclosed\n      linux-64:\n")
    with pytest.raises(LockError) as info:
        parse_lock(broken, "pixi.lock")
    assert "not valid YAML" in info.value.message
    # docs/locks.md: "invalid YAML is reported with its line": the YAML reader stops on the line after
    # the unclosed `[` (line 8), where it finds no `,` or `]`.
    assert broken.splitlines()[7] == "    packages: [unclosed"
    problem = info.value.problems[0]
    assert (problem.file, problem.line, problem.column) == ("pixi.lock", 9, 15)


def test_an_inline_environment_value_is_not_taken_by_the_fast_scanner() -> None:
    """`channels: [oops` (not YAML at all) used to be skipped by the fast scanner, which then saw no
    channels and called the lock stale; it is the YAML reader's to report.  pixi's own empty inline
    values (`channels: []`, `packages: {}`) stay on the fast path."""
    broken = V6.replace("    channels:\n", "    channels: [oops\n", 1)
    with pytest.raises(LockError, match="not valid YAML"):
        parse_lock(broken, "pixi.lock")
    empty = V6.replace("  default:\n", "  empty:\n    channels: []\n    packages: {}\n  default:\n", 1)
    fast, slow = parse_lock(empty, "pixi.lock"), parse_lock(empty, "pixi.lock", fast=False)
    assert fast.environments["empty"].channels == slow.environments["empty"].channels == ()
    assert fast.environments["empty"].packages == {} and fast.environments["default"].packages


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("version: 2\npackages: []\n", "lock format version 2"),
        ("version: 99\n", "lock format version 99"),
        ("hello: world\n", "not a pixi lock"),
        ("", "not a pixi lock"),
    ],
)
def test_unsupported_or_foreign_documents(text: str, needle: str) -> None:
    with pytest.raises(LockError, match=needle):
        parse_lock(text)


@pytest.mark.parametrize(
    ("kind", "location", "expected"),
    [
        (
            "conda",
            f"{CF}/linux-64/libopenvino-pytorch-frontend-2024.4.0-h5888daf_0.conda",
            ("libopenvino-pytorch-frontend", "2024.4.0", "h5888daf_0"),
        ),
        ("conda", "/srv/mirror/linux-64/python-3.11.9-h_0_cpython.tar.bz2", ("python", "3.11.9", "h_0_cpython")),
        ("pypi", "https://x/torch-2.13.0%2Bcpu-cp312-cp312-win_amd64.whl", ("torch", "2.13.0+cpu", None)),
        (
            "pypi",
            "https://x/Nvidia_CUDA_Runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64.whl",
            ("nvidia-cuda-runtime-cu12", "12.8.90", None),
        ),
        ("pypi", "https://x/tokenizers-0.19.1.tar.gz", ("tokenizers", "0.19.1", None)),
        ("pypi", "git+https://github.com/org/tool.git", None),
        ("conda", ".", None),
    ],
)
def test_names_from_locations(kind: str, location: str, expected: tuple[str, str, str | None] | None) -> None:
    assert name_from_location(kind, location) == expected


def _contract_view(lock: LockFile) -> object:
    """What both readers must agree on (entry lines are the scanner's extra; record lines may differ)."""
    return (
        lock.version,
        lock.platforms,
        {
            name: (
                env.channels,
                env.indexes,
                {p: [(x.kind, x.location, x.name, x.version, x.build) for x in v] for p, v in env.packages.items()},
            )
            for name, env in lock.environments.items()
        },
    )


@pytest.mark.parametrize("text", [V5, V6, V7], ids=["v5", "v6", "v7"])
def test_fast_scanner_and_yaml_reader_give_the_same_lock(text: str) -> None:
    """The contract between the two readers (lockscan, lockyaml), here on the unit locks; the real-world
    locks are compared in tests/integration/test_real_world_locks.py."""
    version = read_version(text, "pixi.lock")
    fast = lockscan.scan(text, "pixi.lock", version)  # no LayoutError: these are pixi's own layout
    full = lockyaml.from_yaml(yaml.safe_load(text), text, "pixi.lock", version)
    assert _contract_view(fast) == _contract_view(full)
