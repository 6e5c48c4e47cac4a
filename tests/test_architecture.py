"""The package's walls, read from docs/architecture.md (the source) and checked against every import.

Each module belongs to a room: ``scrollcase/<folder>/...`` to ``<folder>/``, a top-level module to its
file name (``cli.py``).  Imports inside a room are free; any other ``scrollcase`` import must be allowed by
the room's row of the walls table.  Known violations and known over-long functions are named below: they
may only shrink, so one that is fixed must be deleted from its list (the test says so).
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "scrollcase"
DOC = ROOT / "docs" / "architecture.md"
MAX_FUNCTION_LINES = 60

# (module, room it imports against the walls): none since JUnit moved out of github/ into reports/.
KNOWN_WALL_VIOLATIONS: set[tuple[str, str]] = set()
# module::function longer than MAX_FUNCTION_LINES.
KNOWN_LONG_FUNCTIONS: set[str] = set()

LIBRARY_ROOMS = {"recipe/", "pixi/", "pypi/", "box/", "host/", "parity/", "store/", "client/", "io/", "demo/"}
EDGE = {"cli.py", "__main__.py", "console.py", "commands/", "github/"}
RESULT_ROOMS = {"pixi/", "pypi/", "box/", "host/", "parity/", "store/", "demo/"}
# The documents github/ may read from a result room: it renders them, it never makes them.
GITHUB_DOCUMENTS = {"scrollcase.box.release", "scrollcase.box.boxjson"}


def _modules() -> list[Path]:
    # scrollcase/data/ holds files the package ships (templates, the parity example), not its code
    return sorted(
        p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts and p.parts[len(PACKAGE.parts)] != "data"
    )


def _name(module: Path) -> str:
    return module.relative_to(PACKAGE).as_posix()


def _room_of_path(relative: str) -> str:
    head, _, rest = relative.partition("/")
    return f"{head}/" if rest else head


def _room_of_import(dotted: str) -> str:
    """``scrollcase.box.build`` -> ``box/``; ``scrollcase.cli`` -> ``cli.py``; ``scrollcase`` -> ``__init__.py``."""
    parts = dotted.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}/" if (PACKAGE / parts[0]).is_dir() else f"{parts[0]}.py"


def _imported_rooms(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "scrollcase":  # `from scrollcase import commands, __version__`
                names = [f"scrollcase.{alias.name}" for alias in node.names]
                names = [n if _is_module(n) else "scrollcase" for n in names]
            else:
                names = [node.module]
        else:
            continue
        yield from (_room_of_import(n) for n in names if n == "scrollcase" or n.startswith("scrollcase."))


def _is_module(dotted: str) -> bool:
    leaf = dotted.split(".")[1]
    return (PACKAGE / leaf).is_dir() or (PACKAGE / f"{leaf}.py").is_file()


@cache
def walls() -> dict[str, frozenset[str]]:
    """The walls table of docs/architecture.md: room -> the rooms it may import."""
    section = DOC.read_text(encoding="utf-8").split("\n## Walls\n", 1)[1].split("\n## ", 1)[0]
    table: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and re.fullmatch(r"`[^`]+`", cells[0]):
            table[cells[0].strip("`")] = frozenset(re.findall(r"`([^`]+)`", cells[1]))
    assert table, "docs/architecture.md has no walls table under '## Walls'"
    return table


def test_the_walls_table_keeps_the_principles() -> None:
    table = walls()
    for room in LIBRARY_ROOMS:
        assert not table[room] & EDGE, f"{room} may not import the edge: {sorted(table[room] & EDGE)}"
    assert table["io/"] == {"errors.py"}
    assert {room for room, allowed in table.items() if "console.py" in allowed} <= {"cli.py", "commands/"}
    assert not table["github/"] & RESULT_ROOMS - {"box/"}, "github/ renders results it is given"
    assert {room for room, allowed in table.items() if "commands/" in allowed} == {"cli.py"}
    assert {room for room, allowed in table.items() if "cli.py" in allowed} == {"__main__.py"}
    unknown = {r for allowed in table.values() for r in allowed} - table.keys()
    assert not unknown, f"the walls table allows rooms it does not list: {sorted(unknown)}"


def test_github_reads_only_documents_from_the_box_room() -> None:
    """github/ renders what it is given: from box/ only the documents (release manifest, box.json)."""
    for module in _modules():
        if not _name(module).startswith("github/"):
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scrollcase.box"):
                assert node.module in GITHUB_DOCUMENTS, f"{_name(module)} imports {node.module}"


def test_every_room_has_a_row_in_the_walls_table() -> None:
    rooms = {_room_of_path(_name(m)) for m in _modules()}
    missing = rooms - walls().keys()
    assert not missing, f"add a row for {sorted(missing)} to the walls table in docs/architecture.md"
    gone = walls().keys() - rooms
    assert not gone, f"docs/architecture.md lists rooms that no longer exist: {sorted(gone)}"


def _wall_violations() -> set[tuple[str, str]]:
    table = walls()
    found: set[tuple[str, str]] = set()
    for module in _modules():
        name = _name(module)
        room = _room_of_path(name)
        for imported in _imported_rooms(ast.parse(module.read_text(encoding="utf-8"))):
            if imported != room and imported not in table.get(room, frozenset()):
                found.add((name, imported))
    return found


def test_imports_stay_inside_the_walls() -> None:
    found = _wall_violations()
    new = found - KNOWN_WALL_VIOLATIONS
    assert not new, f"imports the walls in docs/architecture.md do not allow (module, room): {sorted(new)}"
    fixed = KNOWN_WALL_VIOLATIONS - found
    assert not fixed, f"fixed, so delete from KNOWN_WALL_VIOLATIONS: {sorted(fixed)}"


def _module_level(tree: ast.Module) -> ast.Module:
    """The imports that run when the module loads: everything outside function and class bodies."""
    found: list[ast.stmt] = []
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return ast.Module(body=found, type_ignores=[])


def test_loading_a_room_never_loads_a_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for module in _modules():
        room = _room_of_path(_name(module))
        imported = _imported_rooms(_module_level(ast.parse(module.read_text(encoding="utf-8"))))
        graph.setdefault(room, set()).update(r for r in imported if r != room)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(
            f"rooms import each other at module level: {error.args[1]}; move one import into the function that needs it"
        ) from None


def test_every_module_is_described() -> None:
    text = DOC.read_text(encoding="utf-8")
    described = set(re.findall(r"`([^`]+\.py)`", text))
    undescribed = [
        name
        for name in map(_name, _modules())
        if not (name.endswith("/__init__.py") or name in described or f"{_room_of_path(name)}*.py" in described)
    ]
    assert not undescribed, f"say in docs/architecture.md what these modules own: {undescribed}"


def _long_functions() -> set[str]:
    found: set[str] = set()
    for module in _modules():
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.add(f"{_name(module)}::{node.name}")
    return found


def test_functions_fit_on_a_screen() -> None:
    found = _long_functions()
    new = found - KNOWN_LONG_FUNCTIONS
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines: {sorted(new)}"
    fixed = KNOWN_LONG_FUNCTIONS - found
    assert not fixed, f"fixed, so delete from KNOWN_LONG_FUNCTIONS: {sorted(fixed)}"
