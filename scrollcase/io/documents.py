"""Documents: canonical JSON bytes, and bytes -> frozen pydantic model or the caller's located error.

Every scrollcase JSON document (release manifest, box.json, box index, install receipt, JSON Schema) is
written the same way, so its bytes are reproducible; every pydantic ValidationError becomes Problems the
same way, so all mistakes of one document are reported at once with where they are.

Every document is bounded before it is parsed, because a store or a disk can hand over anything: its
size (``MAX_DOCUMENT_BYTES``, ``MAX_BOX_JSON_BYTES``; :func:`read_document` refuses a larger file before
reading it whole, and the store's readers stop at the same limits) and how deeply its JSON nests
(``MAX_JSON_DEPTH``: Python's parser would otherwise end in a RecursionError).  Each refusal is the
caller's error, naming the file or URL and the limit (docs/install.md#limits).
"""

from __future__ import annotations

import json
import os
import re
from itertools import accumulate
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from scrollcase.errors import Problem, ScrollcaseError
from scrollcase.io.files import ReadErrors

M = TypeVar("M", bound=BaseModel)
VALUE_LIMIT = 200  # characters of an offending value shown in a Problem

# The box index, a release manifest, the install receipt: kilobytes each (an index of a thousand releases
# is ~1 MiB), so 16 MiB is far above any real one and far below what would exhaust a host's memory.
MAX_DOCUMENT_BYTES = 16 << 20
# box.json lists every file of the box with its sha256: ~250 bytes a file, 5 MiB for 20,000 files.
MAX_BOX_JSON_BYTES = 64 << 20
# scrollcase's documents nest at most 6 levels (index -> versions -> version -> target -> entry -> field).
MAX_JSON_DEPTH = 64

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)', re.DOTALL)  # an unclosed string runs to the end
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = tuple(1 if b in b"[{" else -1 for b in range(256))


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
    max_bytes: int = MAX_DOCUMENT_BYTES,
) -> M:
    """``data`` as ``model``, or ``error``: larger than ``max_bytes``, too deep or not JSON (:func:`load_json`,
    fix ``json_fix``), or ``invalid`` (a template with ``{file}``) with one Problem per mistake (fix ``fix``)."""
    raw = load_json(data, file=file, error=error, fix=json_fix, max_bytes=max_bytes)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise error(invalid.format(file=file), problems=validation_problems(exc, file), fix=fix) from None


def load_json(
    data: bytes | str, *, file: str, error: type[ScrollcaseError], fix: str, max_bytes: int = MAX_DOCUMENT_BYTES
) -> object:
    """``data`` parsed as JSON, or ``error`` naming ``file``: larger than ``max_bytes``, nested deeper than
    ``MAX_JSON_DEPTH``, or not JSON at all (each with ``fix``)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise too_large(file, len(raw), max_bytes, error, fix)
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise too_deep(file, error, fix)
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{file} is not valid JSON: {exc}", fix=fix) from None
    except RecursionError:  # only if the depth scan and the parser ever disagree: still the document's fault
        raise too_deep(file, error, fix) from None


def json_depth(data: bytes) -> int:
    """How deeply the arrays and objects of the JSON text ``data`` nest (0: a scalar), without parsing it:
    its strings are removed, then each bracket left counts one level up or down."""
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def read_document(path: Path, errors: ReadErrors, *, max_bytes: int, shown: str | None = None) -> bytes:
    """The bytes of the document at ``path``, refused with ``errors.error`` before it is read whole when
    it is larger than ``max_bytes`` (a file that grows while it is read, or a device, stops there too;
    a FIFO without a writer reads as empty)."""
    label = str(path) if shown is None else shown
    try:
        # O_NONBLOCK: a FIFO put in a document's place reads as empty instead of blocking the open forever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            data = stream.read(max_bytes + 1) if size <= max_bytes else b""
    except OSError as exc:
        raise errors.build(exc, label) from None
    if size > max_bytes or len(data) > max_bytes:
        raise too_large(label, max(size, len(data)), max_bytes, errors.error, errors.fix)
    return data


def too_large(file: str, size: int, limit: int, error: type[ScrollcaseError], fix: str | None) -> ScrollcaseError:
    more = "" if size > limit + 1 else "more than "
    return error(
        f"{file} is {more}{size} bytes: refusing a document larger than {limit} bytes ({limit >> 20} MiB)",
        problems=[Problem(message=f"larger than the limit of {limit} bytes", file=file)],
        fix=fix,
    )


def too_deep(file: str, error: type[ScrollcaseError], fix: str | None) -> ScrollcaseError:
    return error(
        f"{file} nests JSON arrays or objects more than {MAX_JSON_DEPTH} levels deep: refusing it",
        problems=[Problem(message=f"deeper than the limit of {MAX_JSON_DEPTH} levels", file=file)],
        fix=fix,
    )
