"""``scrollcase schema recipe|release|index``: JSON Schema (draft 2020-12) for editors and CI linters."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import UsageError
from scrollcase.format.boxjson import box_json_schema
from scrollcase.format.release import release_json_schema
from scrollcase.io.documents import canonical_json
from scrollcase.io.files import write_atomic
from scrollcase.recipe.model import recipe_json_schema
from scrollcase.store.index import index_json_schema

NAME = "schema"
HELP = "print the JSON Schema of recipe.json, *.release.json or a box index"
DESCRIPTION = (
    "Print (or write with --out) the JSON Schema (draft 2020-12) generated from scrollcase's "
    'models.  Point your editor at it: VS Code "json.schemas", or "$schema" in the file.'
)
SCHEMAS = {
    "recipe": recipe_json_schema,
    "release": release_json_schema,
    "index": index_json_schema,
    "box": box_json_schema,
}


@dataclass(frozen=True)
class SchemaArgs(CommandArgs):
    which: str
    out: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument(
        "which",
        choices=sorted(SCHEMAS),
        help="recipe (recipe.json), release (*.release.json), index (boxes/<boxId>/index.json) or box (box.json)",
    )
    p.add_argument("--out", type=Path, help="write the schema to this file instead of stdout")
    p.set_defaults(handler=handler(SchemaArgs, run))


def render_schema(which: str) -> str:
    return canonical_json(SCHEMAS[which]()).decode("utf-8")


def run(args: SchemaArgs, console: Console) -> int:
    text = render_schema(args.which)
    if args.out is None:
        console.result(json.loads(text), text)
        return 0
    try:
        write_atomic(args.out, text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror}", fix="choose a writable --out path") from None
    console.progress(f"wrote {args.which} schema to {args.out}")
    console.result({"schema": args.which, "path": str(args.out)}, None)
    return 0
