"""``scrollcase schema recipe|release|index``: JSON Schema (draft 2020-12) for editors and CI linters."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scrollcase.box.release import release_json_schema
from scrollcase.commands import CommandArgs, SubParsers, handler
from scrollcase.console import Console
from scrollcase.errors import UsageError
from scrollcase.recipe.model import recipe_json_schema
from scrollcase.store.index import index_json_schema

NAME = "schema"
SCHEMAS = {"recipe": recipe_json_schema, "release": release_json_schema, "index": index_json_schema}


@dataclass(frozen=True)
class SchemaArgs(CommandArgs):
    which: str
    out: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        NAME,
        parents=[common],
        help="print the JSON Schema of recipe.json, *.release.json or a box index",
        description="Print (or write with --out) the JSON Schema (draft 2020-12) generated from scrollcase's "
        'models.  Point your editor at it: VS Code "json.schemas", or "$schema" in the file.',
    )
    p.add_argument(
        "which",
        choices=sorted(SCHEMAS),
        help="recipe (recipe.json), release (*.release.json) or index (boxes/<boxId>/index.json)",
    )
    p.add_argument("--out", type=Path, help="write the schema to this file instead of stdout")
    p.set_defaults(handler=handler(SchemaArgs, run))


def render_schema(which: str) -> str:
    return json.dumps(SCHEMAS[which](), indent=2, sort_keys=True) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename, so ``path`` is never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(args: SchemaArgs, console: Console) -> int:
    text = render_schema(args.which)
    if args.out is None:
        console.result(json.loads(text), text)
        return 0
    try:
        write_atomically(args.out, text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror}", fix="choose a writable --out path") from None
    console.progress(f"wrote {args.which} schema to {args.out}")
    console.result({"schema": args.which, "path": str(args.out)}, None)
    return 0
