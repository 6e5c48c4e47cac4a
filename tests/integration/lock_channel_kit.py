"""A small synthetic conda channel for lock tests: python, cuda-version, pytorch cpu/cuda builds.

Built with scrollcase.demo.channel (real .tar.bz2 packages and a real repodata.json from py-rattler's
indexer), so rattler solves against it exactly as it would against conda-forge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from scrollcase.demo.channel import PackageSpec, index_channel, write_package

SUBDIR = "linux-64"


def cuda_version_pkg(version: str) -> PackageSpec:
    """conda-forge's cuda-version: noarch, refuses to install unless the driver offers __cuda >= X.Y."""
    return PackageSpec(
        name="cuda-version",
        version=version,
        build="h0_3",
        noarch="generic",
        subdir="noarch",
        constrains=[f"__cuda >={version}", f"cudatoolkit {version}|{version}.*"],
    )


def torch_pkgs(
    version: str = "2.5.1", cuda: Sequence[str] = ("12.4",), cpu: bool = True, subdir: str = SUBDIR
) -> list[PackageSpec]:
    out: list[PackageSpec] = []
    for cu in cuda:
        tag = cu.replace(".", "")
        out.append(
            PackageSpec(
                name="pytorch",
                version=version,
                build=f"cuda{tag}_py311_h1_300",
                build_number=300,
                subdir=subdir,
                depends=["python >=3.11,<3.12.0a0", f"cuda-version >={cu},<{cu}.99", "__cuda"],
            )
        )
    if cpu:
        out.append(
            PackageSpec(
                name="pytorch",
                version=version,
                build="cpu_mkl_py311_h2_100",
                build_number=100,
                subdir=subdir,
                depends=["python >=3.11,<3.12.0a0"],
            )
        )
    return out


def make_channel(
    root: Path,
    *,
    cuda: Sequence[str] = ("12.4",),
    cpu: bool = True,
    cuda_versions: Sequence[str] = ("12.4", "12.8"),
    subdir: str = SUBDIR,
) -> Path:
    """Write and index a channel under ``root``; returns its directory (use ``.as_uri()``)."""
    specs = [
        PackageSpec(name="python", version="3.11.9", build="h_0_cpython", subdir=subdir),
        PackageSpec(
            name="numpy", version="2.1.0", build="py311_h0", subdir=subdir, depends=["python >=3.11,<3.12.0a0"]
        ),
    ]
    specs += [cuda_version_pkg(v) for v in cuda_versions]
    specs += torch_pkgs(cuda=cuda, cpu=cpu, subdir=subdir)
    for spec in specs:
        write_package(root, spec)
    index_channel(root, [subdir])
    return root


CUDA_MANIFEST = """\
[workspace]
name = "{name}"
channels = ["{channel}"]
platforms = ["linux-64"]

[system-requirements]
cuda = "{cuda}"

[dependencies]
python = "3.11.*"
pytorch = {{ version = "2.*", build = "cuda*" }}
cuda-version = "{cuda}.*"
"""

CPU_MANIFEST = """\
[workspace]
name = "{name}"
channels = ["{channel}"]
platforms = ["linux-64"]

[dependencies]
python = "3.11.*"
pytorch = {{ version = "2.*", build = "cpu*" }}
"""


def recipe_json(recipe_id: str, accelerator: str, cuda: str | None) -> str:
    target: dict[str, object] = {"platform": "linux", "arch": "x86_64", "accelerator": accelerator}
    if cuda:
        target["cudaVersion"] = cuda
    compat: dict[str, object] = {"minHostAppVersion": "1.0.0", "minRamGb": 4}
    if cuda:
        compat["minNvidiaDriverVersion"] = "550.54.14"
    data = {
        "schemaVersion": 1,
        "recipeId": recipe_id,
        "recipeVersion": "1.0.0",
        "boxId": "demo",
        "modelId": "example-org-demo",
        "runtimeId": "demo-runtime",
        "version": "1.0.0",
        "sourceRevision": "demo-v1",
        "target": target,
        "compatibility": compat,
        "pythonVersion": "3.11",
        "pixiVersion": "0.73.0",
        "pythonEntryPoint": "venv/bin/python",
        "modelCacheSubdir": "model-cache/demo",
        "assetBaseUrl": "https://assets.example.org/boxes",
        "assets": [],
        "selfTest": {"imports": ["torch"], "files": [], "pythonCode": "import torch"},
    }
    return json.dumps(data, indent=2) + "\n"


def make_recipe(recipes: Path, channel: str, *, cuda: str | None = "12.4", name: str = "demo") -> Path:
    """A recipe folder ``recipes/<id>`` whose pixi.toml uses ``channel``; returns the folder."""
    accelerator = "cuda" if cuda else "cpu"
    recipe_id = f"{name}-linux-x86_64-{'cuda' + cuda if cuda else 'cpu'}"
    folder = recipes / recipe_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.json").write_text(
        recipe_json(recipe_id, accelerator, cuda).replace('"boxId": "demo"', f'"boxId": "{name}"')
    )
    template = CUDA_MANIFEST if cuda else CPU_MANIFEST
    (folder / "pixi.toml").write_text(template.format(name=recipe_id, channel=channel, cuda=cuda))
    return folder
