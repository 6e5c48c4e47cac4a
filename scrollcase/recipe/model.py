"""The recipe documents (recipe.json and the objects other documents share with it): frozen data.

Field formats live in :mod:`scrollcase.recipe.fields`, the cross-field rules in
:mod:`scrollcase.recipe.rules`, and :mod:`scrollcase.recipe.loader` turns a file into a Recipe or located
problems.  The after-validators here run those rules for a document built in code or nested in another
document; the loader, which runs them itself over the raw file (to report all of them, even beside a
field of the wrong type), says so with :data:`RULES_CHECKED` and the validators stand aside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, model_validator

from scrollcase.recipe.fields import (
    DriverVersion,
    Identifier,
    ImportName,
    MajorMinor,
    PositiveFloat,
    RelPath,
    SemVer,
    Sha256,
    Url,
    rule_error,
    schema_version,
)
from scrollcase.recipe.rules import RuleViolation, document_rules, recipe_rules, target_rules
from scrollcase.targets.vocabulary import Accelerator, Arch, Platform, TargetSpec

# The error kind of a broken cross-field rule raised by a model validator.
CROSS_FIELD = "scrollcase_cross_field"
# Validation context of a caller that has run recipe_rules over the same raw JSON itself.
RULES_CHECKED: Mapping[str, bool] = {"scrollcase_rules_checked": True}


def _rules_checked(info: ValidationInfo) -> bool:
    return isinstance(info.context, Mapping) and info.context.get("scrollcase_rules_checked") is True


def _raise_first(violations: list[RuleViolation]) -> None:
    """A model validator can raise one error: the first violation, its path folded into the message."""
    if violations:
        first = violations[0]
        where = ".".join(str(p) for p in first.path)
        raise rule_error(f"{where}: {first.message}", first.fix, kind=CROSS_FIELD)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Target(_Model):
    platform: Platform
    arch: Arch
    accelerator: Accelerator
    cudaVersion: MajorMinor | None = Field(default=None, description="CUDA major.minor; CUDA targets only")

    @model_validator(mode="after")
    def _supported(self, info: ValidationInfo) -> Target:
        if not _rules_checked(info):
            _raise_first(target_rules(self.model_dump(), ()))
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
    accelerators: Annotated[list[Accelerator], Field(min_length=1)]
    tolerances: Tolerances


class Recipe(_Model):
    schemaVersion: Annotated[Literal[1], BeforeValidator(schema_version)]
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
    def _cross_fields(self, info: ValidationInfo) -> Recipe:
        # The target passed its own validator before this one runs: only the document's rules are left.
        if not _rules_checked(info):
            _raise_first(document_rules(self.model_dump()))
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


def document_json_schema(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one of scrollcase's documents, for editors and CI linters."""
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://scrollcase.dev/schemas/{name}-1.json"
    schema["title"] = title
    return schema


def recipe_json_schema() -> dict[str, Any]:
    return document_json_schema(Recipe, "recipe", "scrollcase recipe.json")


# The documents, and the field types the other documents (box.json, release manifest, index) share with
# them; recipe_rules for callers that check raw JSON.
__all__ = [
    "RULES_CHECKED",
    "Asset",
    "Compatibility",
    "Identifier",
    "MajorMinor",
    "Parity",
    "Recipe",
    "RelPath",
    "SelfTest",
    "SemVer",
    "Sha256",
    "Target",
    "Tolerances",
    "document_json_schema",
    "recipe_json_schema",
    "recipe_rules",
]
