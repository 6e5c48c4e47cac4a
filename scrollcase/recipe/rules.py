"""The recipe's cross-field rules, each in one place with one message and one fix.

The rules read JSON-shaped data (raw recipe JSON, or a model's dump), never a typed model: a file with a
wrong type elsewhere still gets every cross-field finding in the same run.  A field of the wrong type is
skipped here because its own field rule reports it; so these functions never fail on malformed input.
Two callers, one rule set: :mod:`scrollcase.recipe.loader` runs :func:`recipe_rules` once over the raw
file, and the models' after-validators (:mod:`scrollcase.recipe.model`) run them for documents built in
code or nested in other documents (a release manifest's target).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrollcase.recipe.fields import IDENTIFIER_RE, MAJOR_MINOR_RE
from scrollcase.recipe.jsonpos import JsonPath
from scrollcase.targets import registry
from scrollcase.targets.vocabulary import ARCHES, PLATFORMS, SUPPORTED, TargetSpec


@dataclass(frozen=True)
class RuleViolation:
    """A broken cross-field rule: where (JSON path), what, the bad value, and the fix."""

    path: JsonPath
    message: str
    value: Any
    fix: str


def _get(raw: Any, *path: str | int) -> Any:
    """The value at ``path`` in raw JSON, or None when any step is missing or of the wrong kind."""
    for part in path:
        if isinstance(part, int):
            raw = raw[part] if isinstance(raw, list) and part < len(raw) else None
        else:
            raw = raw.get(part) if isinstance(raw, Mapping) else None
    return raw


def _target_fields(raw: Any) -> tuple[str, str, str, str | None] | None:
    """(platform, arch, accelerator, its runtime version) when each is a known value of the right type,
    else None (the field itself is then reported; a combination rule on top would only be noise)."""
    plat, arch, accel = (_get(raw, k) for k in ("platform", "arch", "accelerator"))
    versions = [_get(raw, k) for k in registry.version_fields()]
    if not all(isinstance(v, str) for v in (plat, arch, accel)) or any(
        v is not None and not isinstance(v, str) for v in versions
    ):
        return None
    if plat not in PLATFORMS or arch not in ARCHES or not registry.known(accel):
        return None
    field = registry.accelerator(accel).version_field
    return plat, arch, accel, _get(raw, field) if field else None


def _combination_rule(plat: str, arch: str, accel: str, at: JsonPath) -> RuleViolation | None:
    never = registry.accelerator(accel).unavailable(plat)
    if never is not None:
        return RuleViolation((*at, "accelerator"), never[0], accel, never[1])
    if (plat, arch) not in SUPPORTED:
        pairs = ", ".join(f"{p}/{a}" for p, a in SUPPORTED)
        return RuleViolation(
            (*at, "arch"), f"{plat}/{arch} is not a supported platform/arch pair", arch, f"use one of: {pairs}"
        )
    allowed = SUPPORTED[(plat, arch)]
    if accel not in allowed:
        return RuleViolation(
            (*at, "accelerator"),
            f"accelerator {accel!r} is not available on {plat}-{arch}",
            accel,
            f"use one of: {', '.join(allowed)}",
        )
    return None


def _version_rule(raw: Any, accel: str, at: JsonPath) -> RuleViolation | None:
    """The accelerator's runtime-version field is set exactly when the accelerator has one."""
    kind = registry.accelerator(accel)
    if kind.version_field and _get(raw, kind.version_field) is None:
        field = kind.version_field
        return RuleViolation((*at, field), f"{field} is required for a {kind.title} target", None, kind.version_fix())
    for field, owner in registry.version_fields().items():
        value = _get(raw, field)
        if owner != accel and value is not None:
            title = registry.accelerator(owner).title
            return RuleViolation(
                (*at, field),
                f"{field} is only allowed for {title} targets, not {accel!r}",
                value,
                f"remove target.{field}",
            )
    return None


def _target_rule(raw: Any, at: JsonPath) -> RuleViolation | None:
    fields = _target_fields(raw)
    if fields is None:
        return None
    return _combination_rule(*fields[:3], at) or _version_rule(raw, fields[2], at)


def target_rules(raw: Any, at: JsonPath = ("target",)) -> list[RuleViolation]:
    """The rules about one ``target`` object (which combinations exist); paths are prefixed with ``at``."""
    violation = _target_rule(raw, at)
    return [violation] if violation else []


def _valid_target(raw: Any) -> TargetSpec | None:
    """The target described by raw JSON when it is a supported one (the rules that depend on the
    target run only then), else None."""
    fields = _target_fields(raw)
    if fields is None or _target_rule(raw, ()) is not None:
        return None
    version = fields[3]
    if version is not None and not MAJOR_MINOR_RE.fullmatch(version):
        return None  # the version field's own rule reports it; a target ID built from it would be wrong
    return TargetSpec(*fields)


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
    if target and not target.kind.uses_gpu and driver is not None:
        out.append(
            RuleViolation(
                ("compatibility", "minNvidiaDriverVersion"),
                "minNvidiaDriverVersion is only meaningful for CUDA targets",
                driver,
                "remove compatibility.minNvidiaDriverVersion for this target",
            )
        )
    return out + _entry_point_rules(raw.get("pythonEntryPoint"), target)


def _entry_point_rules(entry: Any, target: TargetSpec | None) -> list[RuleViolation]:
    if not target or not isinstance(entry, str):
        return []
    exe = entry.endswith(".exe")
    if target.is_windows and not exe:
        return [
            RuleViolation(
                ("pythonEntryPoint",),
                "a Windows box's interpreter is python.exe at the env root",
                entry,
                'use e.g. "venv/python.exe"',
            )
        ]
    if not target.is_windows and exe:
        return [
            RuleViolation(
                ("pythonEntryPoint",),
                "a .exe entry point only runs on Windows targets",
                entry,
                'use e.g. "venv/bin/python"',
            )
        ]
    return []


def _duplicates(items: Any, key: str, base: JsonPath, what: str) -> list[RuleViolation]:
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
    out = [
        RuleViolation(
            ("parity", "accelerators", i),
            f"accelerator {acc!r} is listed twice",
            acc,
            "list each accelerator once; the first is the reference",
        )
        for i, acc in enumerate(accels)
        if acc in accels[:i]
    ]
    if target is None:
        return out
    allowed = SUPPORTED[(target.platform, target.arch)]
    out += [
        RuleViolation(
            ("parity", "accelerators", i),
            f"{acc!r} cannot run on {target.platform}-{target.arch}",
            acc,
            f"use only: {', '.join(allowed)}",
        )
        for i, acc in enumerate(accels)
        if registry.known(acc) and acc not in allowed
    ]
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


def _prune_rules(prune: Any) -> list[RuleViolation]:
    if not isinstance(prune, list):
        return []
    return [
        RuleViolation(("prunePaths", i), "path is listed twice", path, "remove the duplicate")
        for i, path in enumerate(prune)
        if isinstance(path, str) and path in prune[:i]
    ]


def document_rules(raw: Mapping[str, Any]) -> list[RuleViolation]:
    """The rules that span the recipe's fields; those that depend on the target run only when the
    target is a supported one (:func:`target_rules` reports it otherwise)."""
    target = _valid_target(raw.get("target"))
    out = _identity_rules(raw, target)
    out += _duplicates(raw.get("assets"), "name", ("assets",), "asset name")
    out += _duplicates(raw.get("assets"), "path", ("assets",), "asset path")
    out += _parity_rules(raw, target)
    return out + _prune_rules(raw.get("prunePaths"))


def recipe_rules(raw: Any) -> list[RuleViolation]:
    """Every cross-field rule over raw recipe JSON: the target's, then the document's."""
    if not isinstance(raw, Mapping):
        return []
    return target_rules(raw.get("target")) + document_rules(raw)
