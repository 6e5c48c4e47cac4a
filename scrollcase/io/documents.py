"""Documents: canonical JSON bytes, and bytes -> frozen pydantic model or the caller's located error.

Every scrollcase JSON document (release manifest, box.json, box index, JSON Schema) is written the same
way, so its bytes are reproducible; every pydantic ValidationError becomes Problems the same way, so
all mistakes of one document are reported at once with where they are.
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from scrollcase.errors import Problem, ScrollcaseError

M = TypeVar("M", bound=BaseModel)
VALUE_LIMIT = 200  # characters of an offending value shown in a Problem


def canonical_json(data: object) -> bytes:
    """Sorted keys, two-space indent, trailing newline, UTF-8: the same bytes on every machine."""
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


def validation_problems(
    exc: ValidationError, file: str | None = None, *, fix: str | None = None, values: bool = False
) -> list[Problem]:
    """One located Problem per pydantic error: the key is the dotted path (None for the whole document),
    ``values`` adds the offending input (cut to ``VALUE_LIMIT``; none for a missing field)."""
    return [
        Problem(
            message=e["msg"],
            file=file,
            key=".".join(str(p) for p in e["loc"]) or None,
            value=repr(e.get("input"))[:VALUE_LIMIT] if values and e["type"] != "missing" else None,
            fix=fix,
        )
        for e in exc.errors()
    ]


def parse_json_model(
    data: bytes | str,
    model: type[M],
    *,
    file: str,
    error: type[ScrollcaseError],
    invalid: str,
    json_fix: str,
    fix: str,
) -> M:
    """``data`` as ``model``, or ``error``: ``"<file> is not valid JSON: ..."`` (fix ``json_fix``), or
    ``invalid`` (a template with ``{file}``) with one Problem per mistake (fix ``fix``)."""
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{file} is not valid JSON: {exc}", fix=json_fix) from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise error(invalid.format(file=file), problems=validation_problems(exc, file), fix=fix) from None
