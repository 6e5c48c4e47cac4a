"""The formats of recipe fields: each a pattern, a validator with one message and fix, and the
annotated type the documents (recipe, box.json, release manifest, index) use.

A failing field raises a :class:`pydantic_core.PydanticCustomError` whose context carries the fix, so
every document reports the same message for the same format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

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


def _matching(regex: re.Pattern[str], message: str, fix: str) -> Callable[[str], str]:
    """A format's validator: the value as it is when ``regex`` matches all of it, else its one message and fix."""

    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise rule_error(message, fix)
        return value

    return check


_semver = _matching(SEMVER_RE, "not a semantic version", 'write MAJOR.MINOR.PATCH, e.g. "1.0.0"')
_major_minor = _matching(
    MAJOR_MINOR_RE, "must be MAJOR.MINOR", 'write e.g. "3.11" or "12.4" (no patch level, no wildcard)'
)
_dotted_number = _matching(
    DOTTED_NUMBER_RE, "must be a dotted driver version", 'write the NVIDIA driver version, e.g. "550.54.14"'
)
_sha256 = _matching(SHA256_RE, "not a sha256 digest", "64 lowercase hex characters, e.g. from `sha256sum FILE`")
_url = _matching(
    URL_RE, "must be an https://, http://, file:// or s3:// URL", 'e.g. "https://assets.example.org/boxes"'
)
_import_name = _matching(
    IMPORT_RE, "not an importable module name", 'write a dotted module name, e.g. "torch" or "torch.nn"'
)


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


def schema_version(value: Any) -> Any:
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
