"""The recipe model (recipe.json) and its rules.

The model is pure data: :mod:`scrollcase.recipe.loader` reads files and turns failures into located
problems.  Field rules raise a :class:`pydantic_core.PydanticCustomError` whose context carries a
``fix``.  Rules spanning several fields live in :func:`recipe_rules`, which works on the raw JSON so a
file with a wrong type elsewhere still gets every cross-field finding in the same run; the models'
after-validators call the same function so a Recipe built in code cannot break them either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from scrollcase.recipe.targets import (
    ACCELERATORS,
    ARCHES,
    PLATFORMS,
    SUPPORTED,
    TargetSpec,
    target_id,
    target_problem,
)

IDENTIFIER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
MAJOR_MINOR_RE = re.compile(r"^\d+\.\d+$")
DOTTED_NUMBER_RE = re.compile(r"^\d+(\.\d+)*$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
IMPORT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
URL_RE = re.compile(r"^(https?|file|s3)://\S+$")
CROSS_FIELD = "scrollcase_cross_field"


def rule_error(message: str, fix: str, kind: str = "scrollcase_rule") -> PydanticCustomError:
    return PydanticCustomError(kind, message, {"fix": fix})


def _identifier(value: str) -> str:
    if not IDENTIFIER_RE.fullmatch(value):
        suggestion = re.sub(r"[^a-z0-9._-]+", "-", value.lower()).strip("-._") or "my-box"
        raise rule_error(
            "identifiers are lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
            f"use {suggestion!r}",
        )
    return value


def _semver(value: str) -> str:
    if not SEMVER_RE.fullmatch(value):
        raise rule_error("not a semantic version", 'write MAJOR.MINOR.PATCH, e.g. "1.0.0"')
    return value


def _major_minor(value: str) -> str:
    if not MAJOR_MINOR_RE.fullmatch(value):
        raise rule_error("must be MAJOR.MINOR", 'write e.g. "3.11" or "12.4" (no patch level, no wildcard)')
    return value


def _dotted_number(value: str) -> str:
    if not DOTTED_NUMBER_RE.fullmatch(value):
        raise rule_error("must be a dotted driver version", 'write the NVIDIA driver version, e.g. "550.54.14"')
    return value


def _relative_path(value: str) -> str:
    """A relative POSIX path that stays inside its root."""
    fix = "use a relative path with '/' separators that stays inside its root, e.g. \"venv/bin/python\""
    if not value or value.strip() != value:
        raise rule_error("path is empty or has surrounding whitespace", fix)
    if "\x00" in value:
        raise rule_error("path contains a NUL byte", fix)
    if "\\" in value:
        raise rule_error("path uses '\\' separators", fix.replace("e.g.", f"e.g. {value.replace(chr(92), '/')!r} or"))
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value) or value.startswith("~"):
        raise rule_error("path is absolute", fix)
    if ".." in value.split("/"):
        raise rule_error("path escapes its root with '..'", fix)
    return value


def _sha256(value: str) -> str:
    if not SHA256_RE.fullmatch(value):
        raise rule_error("not a sha256 digest", "64 lowercase hex characters, e.g. from `sha256sum FILE`")
    return value


def _url(value: str) -> str:
    if not URL_RE.fullmatch(value):
        raise rule_error(
            "must be an https://, http://, file:// or s3:// URL", 'e.g. "https://assets.example.org/boxes"'
        )
    return value


def _import_name(value: str) -> str:
    if not IMPORT_RE.fullmatch(value):
        raise rule_error("not an importable module name", 'write a dotted module name, e.g. "torch" or "torch.nn"')
    return value


def _schema_version(value: Any) -> Any:
    if type(value) is not int:  # JSON true and 1.0 are not the integer 1
        raise rule_error("schemaVersion must be the integer 1", 'set "schemaVersion": 1')
    return value


def _pattern(regex: re.Pattern[str], description: str) -> Any:
    return Field(json_schema_extra={"pattern": regex.pattern}, description=description)


Identifier = Annotated[str, AfterValidator(_identifier), _pattern(IDENTIFIER_RE, "lowercase [a-z0-9._-]")]
SemVer = Annotated[str, AfterValidator(_semver), _pattern(SEMVER_RE, "semantic version MAJOR.MINOR.PATCH")]
MajorMinor = Annotated[str, AfterValidator(_major_minor), _pattern(MAJOR_MINOR_RE, "MAJOR.MINOR")]
RelPath = Annotated[
    str,
    AfterValidator(_relative_path),
    Field(min_length=1, description="relative '/'-separated path without '..'"),
]
Sha256 = Annotated[str, AfterValidator(_sha256), _pattern(SHA256_RE, "lowercase hex sha256")]
DriverVersion = Annotated[str, AfterValidator(_dotted_number), _pattern(DOTTED_NUMBER_RE, "e.g. 550.54.14")]
Url = Annotated[str, AfterValidator(_url), _pattern(URL_RE, "https://, http://, file:// or s3:// URL")]
ImportName = Annotated[str, AfterValidator(_import_name), _pattern(IMPORT_RE, "dotted module name")]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
AcceleratorName = Literal["cpu", "cuda", "metal"]


@dataclass(frozen=True)
class RuleViolation:
    """A broken cross-field rule: where (JSON path), what, the bad value, and the fix."""

    path: tuple[str | int, ...]
    message: str
    value: Any
    fix: str


def _raise_violations(violations: list[RuleViolation]) -> None:
    if violations:
        first = violations[0]
        where = ".".join(str(p) for p in first.path)
        raise rule_error(f"{where}: {first.message}", first.fix, kind=CROSS_FIELD)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Target(_Model):
    platform: Literal["linux", "windows", "osx"]
    arch: Literal["x86_64", "aarch64", "arm64"]
    accelerator: AcceleratorName
    cudaVersion: MajorMinor | None = Field(default=None, description="CUDA major.minor; CUDA targets only")

    @model_validator(mode="after")
    def _supported(self) -> Target:
        _raise_violations(target_rules(self.model_dump(), ()))
        return self

    @property
    def spec(self) -> TargetSpec:
        return TargetSpec(self.platform, self.arch, self.accelerator, self.cudaVersion)

    @property
    def target_id(self) -> str:
        return self.spec.target_id


class Compatibility(_Model):
    minHostAppVersion: SemVer
    # Copied verbatim into the release manifest; doctor and `scrollcase unpack` (gpucheck) compare it.
    minNvidiaDriverVersion: DriverVersion | None = None
    minRamGb: PositiveFloat


class Asset(_Model):
    name: Identifier
    path: RelPath = Field(description="below assetBaseUrl, and where the file lands under modelCacheSubdir")
    sha256: Sha256
    size: Annotated[int, Field(ge=0)]


class SelfTest(_Model):
    imports: list[ImportName]
    files: list[RelPath] = Field(default_factory=list, description="paths inside the built box")
    pythonCode: str = ""


class Tolerances(_Model):
    absolute: PositiveFloat
    relative: PositiveFloat
    minimumCosine: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class Parity(_Model):
    script: RelPath = Field(
        description="recipe-relative script, run as `python -I SCRIPT --accelerator ACC --output-dir DIR`"
    )
    accelerators: Annotated[list[AcceleratorName], Field(min_length=1)]
    tolerances: Tolerances


class Recipe(_Model):
    schemaVersion: Annotated[Literal[1], BeforeValidator(_schema_version)]
    recipeId: Identifier
    recipeVersion: SemVer
    boxId: Identifier
    modelId: Identifier
    runtimeId: Identifier
    version: SemVer
    sourceRevision: Annotated[str, Field(min_length=1, pattern=r"^\S+$")]
    target: Target
    compatibility: Compatibility
    pythonVersion: MajorMinor
    pixiVersion: SemVer
    pythonEntryPoint: RelPath
    modelCacheSubdir: RelPath
    assetBaseUrl: Url
    assets: list[Asset]
    selfTest: SelfTest
    parity: Parity | None = None
    prunePaths: list[RelPath] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cross_fields(self) -> Recipe:
        _raise_violations(recipe_rules(self.model_dump()))
        return self

    @property
    def target_id(self) -> str:
        return self.target.target_id

    @property
    def archive_name(self) -> str:
        return f"{self.boxId}-{self.version}-{self.target_id}.tar.zst"

    @property
    def release_name(self) -> str:
        return f"{self.boxId}-{self.version}-{self.target_id}.release.json"


def _get(raw: Any, *path: str | int) -> Any:
    """The value at ``path`` in raw JSON, or None when any step is missing or of the wrong kind."""
    for part in path:
        if isinstance(part, int):
            raw = raw[part] if isinstance(raw, list) and part < len(raw) else None
        else:
            raw = raw.get(part) if isinstance(raw, Mapping) else None
    return raw


def _strings(*values: Any) -> bool:
    return all(isinstance(v, str) for v in values)


def valid_target(raw: Any) -> TargetSpec | None:
    """The target described by raw JSON when it is a supported one, else None."""
    plat, arch, accel, cuda = (_get(raw, k) for k in ("platform", "arch", "accelerator", "cudaVersion"))
    if not _strings(plat, arch, accel) or (cuda is not None and not isinstance(cuda, str)):
        return None
    if target_problem(plat, arch, accel, cuda):
        return None
    return TargetSpec(plat, arch, accel, cuda)


def target_rules(raw: Any, at: tuple[str | int, ...] = ("target",)) -> list[RuleViolation]:
    """Rules about one ``target`` object; paths are prefixed with ``at``."""
    plat, arch, accel, cuda = (_get(raw, k) for k in ("platform", "arch", "accelerator", "cudaVersion"))
    if not _strings(plat, arch, accel) or (cuda is not None and not isinstance(cuda, str)):
        return []
    if plat not in PLATFORMS or arch not in ARCHES or accel not in ACCELERATORS:
        return []  # the field itself is reported; a pair rule on top would only be noise
    if plat == "osx" and accel == "cuda":
        return [
            RuleViolation(
                (*at, "accelerator"),
                "macOS has no CUDA target — use metal",
                accel,
                'set target.accelerator to "metal" with arch "arm64" (or "cpu"), and remove target.cudaVersion',
            )
        ]
    if (plat, arch) not in SUPPORTED:
        pairs = ", ".join(f"{p}/{a}" for p, a in SUPPORTED)
        return [
            RuleViolation(
                (*at, "arch"),
                f"{plat}/{arch} is not a supported platform/arch pair",
                arch,
                f"use one of: {pairs}",
            )
        ]
    allowed = SUPPORTED[(plat, arch)]
    if accel not in allowed:
        return [
            RuleViolation(
                (*at, "accelerator"),
                f"accelerator {accel!r} is not available on {plat}-{arch}",
                accel,
                f"use one of: {', '.join(allowed)}",
            )
        ]
    if accel == "cuda" and cuda is None:
        return [
            RuleViolation(
                (*at, "cudaVersion"),
                "cudaVersion is required for a CUDA target",
                None,
                'add "cudaVersion": "12.4" (major.minor of the CUDA runtime) to target',
            )
        ]
    if accel != "cuda" and cuda is not None:
        return [
            RuleViolation(
                (*at, "cudaVersion"),
                f"cudaVersion is only allowed for CUDA targets, not {accel!r}",
                cuda,
                "remove target.cudaVersion",
            )
        ]
    return []


def _identity_rules(raw: Mapping[str, Any], target: TargetSpec | None) -> list[RuleViolation]:
    out: list[RuleViolation] = []
    box, recipe_id = raw.get("boxId"), raw.get("recipeId")
    if target and isinstance(box, str) and isinstance(recipe_id, str) and IDENTIFIER_RE.fullmatch(box):
        expected = f"{box}-{target.target_id}"
        if recipe_id != expected:
            out.append(
                RuleViolation(
                    ("recipeId",),
                    f"recipeId must be <boxId>-<targetId> = {expected!r}",
                    recipe_id,
                    f'set recipeId to "{expected}" and name the folder the same',
                )
            )
    driver = _get(raw, "compatibility", "minNvidiaDriverVersion")
    if target and not target.is_cuda and driver is not None:
        out.append(
            RuleViolation(
                ("compatibility", "minNvidiaDriverVersion"),
                "minNvidiaDriverVersion is only meaningful for CUDA targets",
                driver,
                "remove compatibility.minNvidiaDriverVersion for this target",
            )
        )
    entry = raw.get("pythonEntryPoint")
    if target and isinstance(entry, str):
        exe = entry.endswith(".exe")
        if target.is_windows and not exe:
            out.append(
                RuleViolation(
                    ("pythonEntryPoint",),
                    "a Windows box's interpreter is python.exe at the env root",
                    entry,
                    'use e.g. "venv/python.exe"',
                )
            )
        if not target.is_windows and exe:
            out.append(
                RuleViolation(
                    ("pythonEntryPoint",),
                    "a .exe entry point only runs on Windows targets",
                    entry,
                    'use e.g. "venv/bin/python"',
                )
            )
    return out


def _duplicates(items: Any, key: str, base: tuple[str | int, ...], what: str) -> list[RuleViolation]:
    out: list[RuleViolation] = []
    seen: dict[Any, int] = {}
    for i, item in enumerate(items if isinstance(items, list) else []):
        value = item.get(key) if isinstance(item, Mapping) else None
        if not isinstance(value, str):
            continue
        if value in seen:
            out.append(
                RuleViolation(
                    (*base, i, key),
                    f"{what} {value!r} is already used by {base[-1]}[{seen[value]}]",
                    value,
                    f"give each {what} a unique value or remove the duplicate entry",
                )
            )
        else:
            seen[value] = i
    return out


def _parity_rules(raw: Mapping[str, Any], target: TargetSpec | None) -> list[RuleViolation]:
    accels = _get(raw, "parity", "accelerators")
    if not isinstance(accels, list) or not all(isinstance(a, str) for a in accels):
        return []
    out: list[RuleViolation] = []
    for i, acc in enumerate(accels):
        if acc in accels[:i]:
            out.append(
                RuleViolation(
                    ("parity", "accelerators", i),
                    f"accelerator {acc!r} is listed twice",
                    acc,
                    "list each accelerator once; the first is the reference",
                )
            )
    if target is None:
        return out
    allowed = SUPPORTED[(target.platform, target.arch)]
    for i, acc in enumerate(accels):
        if acc in ("cpu", "cuda", "metal") and acc not in allowed:
            out.append(
                RuleViolation(
                    ("parity", "accelerators", i),
                    f"{acc!r} cannot run on {target.platform}-{target.arch}",
                    acc,
                    f"use only: {', '.join(allowed)}",
                )
            )
    if target.accelerator not in accels:
        out.append(
            RuleViolation(
                ("parity", "accelerators"),
                f"parity must exercise the target's accelerator {target.accelerator!r}",
                accels,
                f'use ["cpu", "{target.accelerator}"]: the CPU reference, then the target',
            )
        )
    return out


def recipe_rules(raw: Any) -> list[RuleViolation]:
    """Every cross-field rule over raw recipe JSON.  Fields of the wrong type are skipped here (the
    model reports those), so this never fails on malformed input."""
    if not isinstance(raw, Mapping):
        return []
    target = valid_target(raw.get("target"))
    out = target_rules(raw.get("target"))
    out += _identity_rules(raw, target)
    out += _duplicates(raw.get("assets"), "name", ("assets",), "asset name")
    out += _duplicates(raw.get("assets"), "path", ("assets",), "asset path")
    out += _parity_rules(raw, target)
    prune = raw.get("prunePaths")
    if isinstance(prune, list):
        for i, path in enumerate(prune):
            if isinstance(path, str) and path in prune[:i]:
                out.append(RuleViolation(("prunePaths", i), "path is listed twice", path, "remove the duplicate"))
    return out


def document_json_schema(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one of scrollcase's documents, for editors and CI linters."""
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://scrollcase.dev/schemas/{name}-1.json"
    schema["title"] = title
    return schema


def recipe_json_schema() -> dict[str, Any]:
    return document_json_schema(Recipe, "recipe", "scrollcase recipe.json")


__all__ = ["Recipe", "RuleViolation", "recipe_json_schema", "recipe_rules", "target_id", "target_rules"]
