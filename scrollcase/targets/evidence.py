"""GPU evidence: what a box's own files and its own interpreter say about its accelerator — no GPU needed.

This is the third proof (after lock-check and the self-test): after install, the box's interpreter
reports the framework's CUDA runtime, its cuDNN version and the GPU architectures it was compiled for
(``torch.version.cuda``, ``torch.backends.cudnn.version()``, torch's compiled arch flags).  All three
answer on a CPU-only machine.  For a box without torch the files speak: the CUDA runtime packages and
wheels it holds and the ``libcudart`` sonames it ships.  The evidence goes into ``box.json``, the release
manifest and the store's index, so a host app can refuse a box before it downloads a byte.

:func:`make_evidence` and :func:`evidence_problems` are pure; :func:`scan_files` and :func:`probe_framework`
are the thin executors.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from scrollcase.errors import BuildError, Problem, SelfTestError
from scrollcase.io.proc import run_python

if TYPE_CHECKING:
    from scrollcase.targets.vocabulary import TargetSpec

_RUNTIME_WHEEL = re.compile(r"^nvidia[-_]cuda[-_]runtime(?:[-_]cu\d+)?$", re.IGNORECASE)
_RUNTIME_CONDA = ("cuda-cudart", "cuda-version", "cudatoolkit")
_CUDART_FILE = re.compile(r"^(?:libcudart\.so(?:\.\d+)*|cudart64_\d+\.dll|libcudart(?:\.\d+)*\.dylib)$")
_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")
PROBE_TIMEOUT = 300.0

# Run by the box's own interpreter (isolated, no bytecode written).  It prints one JSON object; importing
# torch is the only thing that can fail, and then the probe fails with torch's own traceback.
PROBE_CODE = """\
import importlib.util, json
out = {}
if importlib.util.find_spec("torch") is not None:
    import torch
    flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:
        cudnn = None
    out["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
                    "archFlags": flags}
print(json.dumps(out))
"""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FrameworkEvidence(_Model):
    """What the framework itself reports, as run by the box's interpreter."""

    name: Literal["torch"] = "torch"
    version: str
    cuda: str | None = Field(default=None, description="the CUDA runtime it was built for; None: a CPU build")
    cudnn: int | None = Field(default=None, description="cuDNN version as an integer (9.1.0 -> 90100)")
    archList: list[str] = Field(
        default_factory=list, description="compiled GPU architectures: sm_XY (SASS) and compute_XY (PTX)"
    )


class RuntimePackage(_Model):
    name: str
    version: str
    kind: Literal["conda", "pypi"]


class GpuEvidence(_Model):
    """The accelerator a box provably carries (framework first, then its files)."""

    cudaRuntime: str | None = Field(default=None, description="CUDA runtime major.minor; None: no CUDA")
    source: Literal["framework", "files", "none"]
    framework: FrameworkEvidence | None = None
    runtimePackages: list[RuntimePackage] = Field(default_factory=list)
    cudartSonames: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        if self.framework is not None:
            fw = self.framework
            cuda = f"CUDA {fw.cuda}" if fw.cuda else "no CUDA (a CPU build)"
            return (
                f"torch {fw.version}: {cuda}"
                + (f", cuDNN {fw.cudnn}" if fw.cudnn else "")
                + (f", {' '.join(fw.archList)}" if fw.archList else "")
            )
        if self.cudaRuntime:
            names = ", ".join(f"{p.name} {p.version}" for p in self.runtimePackages)
            return f"CUDA runtime {self.cudaRuntime} ({names or ', '.join(self.cudartSonames)})"
        return "no CUDA runtime in the box"


# ------------------------------------------------------------------------------------------ pure


def major_minor(version: str) -> str:
    parts = re.split(r"[.+]", version)
    return ".".join(parts[:2]) if len(parts) >= 2 else version


def arch_list(flags: str | Sequence[str] | None) -> list[str]:
    """torch's arch flags (``"sm_50 sm_60 compute_90"`` or a list) as a clean list, SASS before PTX."""
    items = flags.replace(";", " ").split() if isinstance(flags, str) else list(flags or [])
    found = {item for item in items if _ARCH.match(item)}
    return sorted(found, key=lambda a: (a.startswith("compute"), int(_ARCH.match(a).group(2)), a))  # type: ignore[union-attr]


def parse_probe(stdout: str) -> FrameworkEvidence | None:
    """The framework evidence the probe printed (its last line), None when the box has no torch."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    data = json.loads(lines[-1]) if lines else {}
    torch = data.get("torch") if isinstance(data, dict) else None
    if not isinstance(torch, dict):
        return None
    cudnn = torch.get("cudnn")
    return FrameworkEvidence(
        version=str(torch.get("version")),
        cuda=torch.get("cuda") or None,
        cudnn=cudnn if isinstance(cudnn, int) else None,
        archList=arch_list(torch.get("archFlags")),
    )


def make_evidence(
    framework: FrameworkEvidence | None, packages: Sequence[RuntimePackage], sonames: Iterable[str]
) -> GpuEvidence:
    """The evidence record: the framework's CUDA wins; without a framework, the runtime packages'."""
    ordered = sorted(packages, key=lambda p: (p.kind, p.name, p.version))
    names = sorted(set(sonames))
    if framework is not None:
        cuda = major_minor(framework.cuda) if framework.cuda else None
        return GpuEvidence(
            cudaRuntime=cuda, source="framework", framework=framework, runtimePackages=ordered, cudartSonames=names
        )
    versions = sorted({major_minor(p.version) for p in ordered})
    if versions:
        return GpuEvidence(cudaRuntime=versions[-1], source="files", runtimePackages=ordered, cudartSonames=names)
    return GpuEvidence(source="files" if names else "none", cudartSonames=names)


def evidence_problems(target: TargetSpec, evidence: GpuEvidence, where: str = "box") -> list[Problem]:
    """Why ``evidence`` is not what ``target`` promises (empty: the box is what its name says)."""
    fw = evidence.framework
    runtimes = sorted({major_minor(p.version) for p in evidence.runtimePackages})
    if target.is_cuda:
        want = target.cuda_version
        if fw is not None and fw.cuda is None:
            return [
                _problem(
                    f"{target.target_id} needs a CUDA {want} build, but the {where}'s torch "
                    f"{fw.version} is a CPU build (torch.version.cuda is None)",
                    fw.version,
                    target,
                )
            ]
        if evidence.cudaRuntime != want:
            found = f"CUDA {evidence.cudaRuntime}" if evidence.cudaRuntime else "no CUDA runtime at all"
            return [
                _problem(
                    f"{target.target_id} needs CUDA {want}, but the {where} holds {found} ({evidence.describe()})",
                    evidence.cudaRuntime,
                    target,
                )
            ]
        if fw is None and len(runtimes) > 1:
            return [
                _problem(
                    f"the {where} holds CUDA runtimes of several versions ({', '.join(runtimes)})",
                    ", ".join(runtimes),
                    target,
                )
            ]
        return []
    if evidence.cudaRuntime is not None:
        return [
            _problem(
                f"{target.target_id} is not a CUDA target, but the {where} holds CUDA "
                f"{evidence.cudaRuntime} ({evidence.describe()})",
                evidence.cudaRuntime,
                target,
            )
        ]
    return []


def _problem(message: str, value: str | None, target: TargetSpec) -> Problem:
    if target.is_cuda:
        digits = (target.cuda_version or "").replace(".", "")
        fix = (
            f"lock a torch built for CUDA {target.cuda_version}: from PyPI pin the release built for it "
            f"(e.g. cuda12.4 -> torch 2.5/2.6) or use the index https://download.pytorch.org/whl/cu{digits}; "
            f"from conda pin pytorch build cuda* with cuda-version {target.cuda_version}.*; then "
            "`scrollcase lock` and rebuild"
        )
    else:
        fix = (
            "lock CPU builds (torch from https://download.pytorch.org/whl/cpu, or conda pytorch build cpu*), "
            "then `scrollcase lock` and rebuild"
        )
    return Problem(message=message, key="target", value=value, fix=fix)


# ------------------------------------------------------------------------------------------ executors


def scan_files(env: Path) -> tuple[list[RuntimePackage], list[str]]:
    """CUDA runtime wheels (dist-info) and conda records (conda-meta) in ``env``, and libcudart sonames."""
    packages: list[RuntimePackage] = []
    sonames: set[str] = set()
    for folder, dirs, files in os.walk(env):
        for name in dirs:
            if name.endswith(".dist-info"):
                dist, _, version = name.removesuffix(".dist-info").partition("-")
                if _RUNTIME_WHEEL.match(dist):
                    packages.append(RuntimePackage(name=dist.replace("_", "-").lower(), version=version, kind="pypi"))
        sonames.update(name for name in files if _CUDART_FILE.match(name))
        if Path(folder).name == "conda-meta":
            packages.extend(_conda_runtimes(Path(folder), files))
    return packages, sorted(sonames)


def _conda_runtimes(conda_meta: Path, files: Iterable[str]) -> list[RuntimePackage]:
    out = []
    for name in files:
        if name.endswith(".json") and name.rsplit("-", 2)[0] in _RUNTIME_CONDA:
            try:
                record = json.loads((conda_meta / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            out.append(RuntimePackage(name=str(record.get("name")), version=str(record.get("version")), kind="conda"))
    return out


def probe_framework(python: Path, cwd: Path, timeout: float = PROBE_TIMEOUT) -> FrameworkEvidence | None:
    """Run :data:`PROBE_CODE` with the box's interpreter; SelfTestError when it cannot run or import."""
    result = run_python(python, ["-B", "-c", PROBE_CODE], timeout=timeout, cwd=cwd)  # -I ignores PYTHON*: -B
    if not result.ok:
        why = "timed out" if result.timed_out else f"exit code {result.returncode}"
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise SelfTestError(
            f"the box's interpreter could not report its GPU evidence ({why})",
            problems=[
                Problem(
                    message=tail or why,
                    value=str(python),
                    fix="make `import torch` work in the box (a missing or broken library above)",
                )
            ],
        )
    try:
        return parse_probe(result.stdout)
    except (ValueError, TypeError) as exc:
        raise SelfTestError(
            f"the GPU evidence probe printed something unexpected: {exc}",
            problems=[Problem(message=result.stdout[-500:], value=str(python))],
        ) from None


def gather_evidence(box_root: Path, entry_point: str, env_dir: str, timeout: float = PROBE_TIMEOUT) -> GpuEvidence:
    """The evidence of the box at ``box_root``: its files, then its own interpreter."""
    box_root = box_root.resolve()  # the interpreter runs with the box root as working directory
    packages, sonames = scan_files(box_root / env_dir)
    framework = probe_framework(box_root / entry_point, box_root, timeout)
    return make_evidence(framework, packages, sonames)


def require_evidence(target: TargetSpec, evidence: GpuEvidence, where: str = "box") -> None:
    """BuildError when ``evidence`` contradicts ``target`` (a CPU build under a CUDA name, the wrong CUDA):
    the target's accelerator judges it (targets/<accelerator>.py)."""
    problems = target.kind.evidence_problems(target, evidence, where)
    if problems:
        raise BuildError(
            f"the {where} is not what {target.target_id} promises: {problems[0].message}", problems=problems
        )
