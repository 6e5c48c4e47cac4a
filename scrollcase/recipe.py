"""The recipe model (recipe.json) and its rules.

The model is pure: :func:`parse_recipe` validates already-read text, :func:`load_recipe` reads a
file.  Each rule raises a :class:`pydantic_core.PydanticCustomError` whose context carries a ``fix``
so the loader can say exactly what to change.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from scrollcase.targets import TargetSpec, target_problem

IDENTIFIER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
MAJOR_MINOR_RE = re.compile(r"^\d+\.\d+$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
ASSET_URL_SCHEMES = ("https://", "http://", "file://", "s3://")


def rule_error(message: str, fix: str) -> PydanticCustomError:
    return PydanticCustomError("scrollcase_rule", message, {"fix": fix})


def _identifier(value: str) -> str:
    if not IDENTIFIER_RE.fullmatch(value):
        raise rule_error(
            "identifiers are lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
            f"use {re.sub(r'[^a-z0-9._-]+', '-', value.lower()).strip('-._') or 'my-box'!r}",
        )
    return value


def _semver(value: str) -> str:
    if not SEMVER_RE.fullmatch(value):
        raise rule_error("not a semantic version", "write MAJOR.MINOR.PATCH, e.g. \"1.0.0\"")
    return value


def _major_minor(value: str) -> str:
    if not MAJOR_MINOR_RE.fullmatch(value):
        raise rule_error("must be MAJOR.MINOR", "write e.g. \"3.11\" (no patch level, no wildcard)")
    return value


def _relative_path(value: str) -> str:
    """A relative POSIX path that stays inside its root."""
    fix = "use a relative path with '/' separators that stays inside the box, e.g. \"venv/bin/python\""
    if not value or value.strip() != value:
        raise rule_error("path is empty or has surrounding whitespace", fix)
    if "\\" in value:
        raise rule_error("path uses '\\' separators", fix)
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value) or value.startswith("~"):
        raise rule_error("path is absolute", fix)
    parts = PurePosixPath(value).parts
    if ".." in parts:
        raise rule_error("path escapes its root with '..'", fix)
    if "\x00" in value:
        raise rule_error("path contains a NUL byte", fix)
    return value


def _sha256(value: str) -> str:
    if not SHA256_RE.fullmatch(value):
        raise rule_error("not a sha256 digest", "64 lowercase hex characters, e.g. from `sha256sum FILE`")
    return value


Identifier = Annotated[str, AfterValidator(_identifier)]
SemVer = Annotated[str, AfterValidator(_semver)]
MajorMinor = Annotated[str, AfterValidator(_major_minor)]
RelPath = Annotated[str, AfterValidator(_relative_path)]
Sha256 = Annotated[str, AfterValidator(_sha256)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Target(_Model):
    platform: Literal["linux", "windows", "osx"]
    arch: Literal["x86_64", "aarch64", "arm64"]
    accelerator: Literal["cpu", "cuda", "metal"]
    cudaVersion: MajorMinor | None = None

    @model_validator(mode="after")
    def _supported(self) -> Target:
        problem = target_problem(self.platform, self.arch, self.accelerator, self.cudaVersion)
        if problem:
            fixes = {
                True: "set target.accelerator to \"metal\" (Apple GPUs) or \"cpu\"",
            }
            raise rule_error(problem, fixes.get(self.platform == "osx" and self.accelerator == "cuda",
                                                 "pick a supported target; see `scrollcase schema recipe`"))
        return self

    @property
    def spec(self) -> TargetSpec:
        return TargetSpec(self.platform, self.arch, self.accelerator, self.cudaVersion)

    @property
    def target_id(self) -> str:
        return self.spec.target_id


class Compatibility(_Model):
    minHostAppVersion: SemVer
    # Copied verbatim into the release manifest for the installing host; never interpreted here.
    minNvidiaDriverVersion: str | None = Field(default=None, min_length=1)
    minRamGb: PositiveFloat


class Asset(_Model):
    name: Identifier
    path: RelPath  # below assetBaseUrl, and where the file lands under modelCacheSubdir
    sha256: Sha256
    size: Annotated[int, Field(ge=0)]


class SelfTest(_Model):
    imports: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]]
    files: list[RelPath]
    pythonCode: str = ""


class Tolerances(_Model):
    absolute: PositiveFloat
    relative: PositiveFloat
    minimumCosine: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class Parity(_Model):
    script: RelPath
    accelerators: Annotated[list[Literal["cpu", "cuda", "metal"]], Field(min_length=1)]
    tolerances: Tolerances

    @model_validator(mode="after")
    def _unique(self) -> Parity:
        if len(set(self.accelerators)) != len(self.accelerators):
            raise rule_error("parity.accelerators lists an accelerator twice", "list each accelerator once")
        return self


class Recipe(_Model):
    schemaVersion: Literal[1]
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
    assetBaseUrl: Annotated[str, Field(min_length=1)]
    assets: list[Asset]
    selfTest: SelfTest
    parity: Parity | None = None
    prunePaths: list[RelPath] = Field(default_factory=list)

    @property
    def target_id(self) -> str:
        return self.target.target_id

    @property
    def archive_name(self) -> str:
        return f"{self.boxId}-{self.version}-{self.target_id}.tar.zst"

    @property
    def release_name(self) -> str:
        return f"{self.boxId}-{self.version}-{self.target_id}.release.json"

    def cross_field_problems(self) -> list[tuple[str, str, Any, str]]:
        """Rules that span fields: (json path, message, bad value, fix).  Empty when all hold."""
        out: list[tuple[str, str, Any, str]] = []
        expected_id = f"{self.boxId}-{self.target_id}"
        if self.recipeId != expected_id:
            out.append(("recipeId", f"recipeId must be <boxId>-<targetId> = {expected_id!r}",
                        self.recipeId, f"set recipeId to \"{expected_id}\""))
        if self.compatibility.minNvidiaDriverVersion is not None and not self.target.spec.is_cuda:
            out.append(("compatibility.minNvidiaDriverVersion",
                        "minNvidiaDriverVersion is only meaningful for CUDA targets",
                        self.compatibility.minNvidiaDriverVersion, "remove it for this target"))
        exe = self.pythonEntryPoint.endswith(".exe")
        if self.target.platform == "windows" and not exe:
            out.append(("pythonEntryPoint", "a Windows box's interpreter is python.exe at the env root",
                        self.pythonEntryPoint, "use e.g. \"venv/python.exe\""))
        if self.target.platform != "windows" and exe:
            out.append(("pythonEntryPoint", "a .exe entry point only runs on Windows targets",
                        self.pythonEntryPoint, "use e.g. \"venv/bin/python\""))
        if not self.assetBaseUrl.startswith(ASSET_URL_SCHEMES):
            out.append(("assetBaseUrl", "assetBaseUrl must be an https://, http://, file:// or s3:// URL",
                        self.assetBaseUrl, "e.g. \"https://assets.example.org/boxes\""))
        names = [a.name for a in self.assets]
        for i, name in enumerate(names):
            if name in names[:i]:
                out.append((f"assets[{i}].name", "asset names must be unique", name, "rename one of them"))
        if self.parity and self.target.accelerator not in self.parity.accelerators and \
                self.target.accelerator != "cpu":
            out.append(("parity.accelerators",
                        f"parity must exercise the target's accelerator {self.target.accelerator!r}",
                        self.parity.accelerators, f"add \"{self.target.accelerator}\" after the reference"))
        return out


def recipe_json_schema() -> dict[str, Any]:
    schema = Recipe.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://scrollcase.dev/schemas/recipe-1.json"
    schema["title"] = "scrollcase recipe.json"
    return schema


def recipe_dir_for(recipes_root: Path, recipe_id: str) -> Path:
    return recipes_root / recipe_id
