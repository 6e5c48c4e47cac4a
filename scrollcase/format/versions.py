"""The format's versions, and the one refusal of a version newer than this scrollcase reads.

Two numbers version the box format (docs/format.md §9): each document's ``schemaVersion`` (box.json, the
release manifest, the box index) and the archive's frame format, the release manifest's
``archive.frameFormat`` (the units, their order, a zstd frame per unit, the frame table's rows: §3).  A
document absent a ``frameFormat`` is frame format 1, and frame format 1 is never written, so a manifest's
bytes stay what they were and a scrollcase older than the field still reads it.

A reader meets a newer number when a newer scrollcase wrote the document: that is not damage, and
rebuilding would not help; the fix is a newer scrollcase.  The refusal is raised while the document is
validated (from a ``mode="before"`` validator), ahead of every other finding: the fields a newer version
adds would otherwise be reported as unknown keys.  It is not a ``ValueError``, so pydantic passes it
through unchanged; the parser that knows the file's name puts it in (:meth:`NewerFormatError.in_file`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrollcase.errors import IntegrityError, Problem

SCHEMA_VERSION = 1  # box.json, the release manifest, the box index
FRAME_FORMAT = 1  # archive.frameFormat (absent: 1)

UPGRADE_FIX = (
    "upgrade scrollcase (`pip install --upgrade scrollcase`; in a workflow, the latest scrollcase/*@v1 "
    "action): a newer scrollcase wrote this document"
)


@dataclass
class NewerFormatError(IntegrityError):
    """A document states a version of ``key`` newer than ``known``, the newest this scrollcase reads (exit 8)."""

    key: str = ""
    found: int = 0
    known: int = 0

    def in_file(self, file: str) -> NewerFormatError:
        """This refusal, naming ``file``."""
        return newer_format(self.key, self.found, self.known, file)


def newer_format(key: str, found: int, known: int, file: str | None = None) -> NewerFormatError:
    where = f"{file}: " if file else ""
    return NewerFormatError(
        f"{where}{key} is {found}, newer than this scrollcase reads ({known})",
        problems=[
            Problem(
                message=f"this scrollcase reads {key} {known} at most",
                file=file,
                key=key,
                value=str(found),
                fix=UPGRADE_FIX,
            )
        ],
        fix=UPGRADE_FIX,
        key=key,
        found=found,
        known=known,
    )


def refuse_newer(data: Any, field: str, known: int, key: str | None = None) -> None:
    """NewerFormatError when the raw JSON object ``data`` states ``field`` as an integer above ``known``
    (``key``: the field's path in the document, for the message).  Any other value is left to validation."""
    found = data.get(field) if isinstance(data, dict) else None
    if isinstance(found, int) and not isinstance(found, bool) and found > known:
        raise newer_format(key or field, found, known)
