"""The package's layers and walls, read from docs/architecture.md (the source) and checked against every import.

Each module belongs to a room: ``scrollcase/<folder>/...`` to ``<folder>/``, a top-level module to its
file name (``cli.py``).  Imports inside a room are free; any other ``scrollcase`` import, at module level or
inside a function, must be allowed by the room's row of the walls table, and the rooms' import graph is a
DAG.  Known violations, over-long functions and modules are named below: they may only shrink, so one that
is fixed must be deleted from its list (the test says so).
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
MAX_MODULE_LINES = 500
MAX_FOLDER_MODULES = 12

# (module, room it imports against the walls): none since JUnit moved out of github/ into reports/.
KNOWN_WALL_VIOLATIONS: set[tuple[str, str]] = set()
# module::function longer than MAX_FUNCTION_LINES.
KNOWN_LONG_FUNCTIONS: set[str] = set()
# modules longer than MAX_MODULE_LINES.
KNOWN_LONG_MODULES: set[str] = set()
# Only these import inside functions: the edge, and the package's lazily imported library API.
LAZY_IMPORTERS = ("cli.py", "commands/", "__init__.py")

LIBRARY_ROOMS = {
    "io/", "targets/", "recipe/", "reports/", "format/", "trust/", "wheels/", "lock/", "build/", "host/", "store/",
    "client/", "parity/", "demo/",
}  # fmt: skip
EDGE = {"cli.py", "__main__.py", "console.py", "commands/", "github/"}
RESULT_ROOMS = {"wheels/", "lock/", "build/", "host/", "parity/", "store/", "client/", "demo/"}
BUILDER = {"wheels/", "lock/", "build/"}
# The documents github/ may read from format/: it renders them, it never makes them.
GITHUB_DOCUMENTS = {"scrollcase.format.release", "scrollcase.format.boxjson"}


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
    """``scrollcase.build.pipeline`` -> ``build/``; ``scrollcase.cli`` -> ``cli.py``; ``scrollcase`` ->
    ``__init__.py``."""
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
    assert not table["github/"] & RESULT_ROOMS, "github/ renders results it is given"
    for room in ("store/", "client/"):
        assert not table[room] & BUILDER, f"{room} installs without the builder: {sorted(table[room] & BUILDER)}"
    try:
        graphlib.TopologicalSorter({room: set(allowed) for room, allowed in table.items()}).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"the walls table is not a DAG: {error.args[1]}") from None
    assert {room for room, allowed in table.items() if "commands/" in allowed} == {"cli.py"}
    assert {room for room, allowed in table.items() if "cli.py" in allowed} == {"__main__.py"}
    unknown = {r for allowed in table.values() for r in allowed} - table.keys()
    assert not unknown, f"the walls table allows rooms it does not list: {sorted(unknown)}"


def test_github_reads_only_documents_from_the_format_room() -> None:
    """github/ renders what it is given: from format/ only the documents (release manifest, box.json)."""
    for module in _modules():
        if not _name(module).startswith("github/"):
            continue
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scrollcase.format"):
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


def test_the_rooms_import_graph_is_acyclic_counting_every_import() -> None:
    graph: dict[str, set[str]] = {}
    for module in _modules():
        room = _room_of_path(_name(module))
        imported = _imported_rooms(ast.parse(module.read_text(encoding="utf-8")))
        graph.setdefault(room, set()).update(r for r in imported if r != room)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"rooms import each other: {error.args[1]}") from None


def _imports_in_functions(tree: ast.AST) -> Iterator[int]:
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if node is not function and any(_imported_rooms(ast.Module(body=[node], type_ignores=[]))):
                    yield node.lineno  # type: ignore[attr-defined]


def test_only_the_edge_imports_inside_functions() -> None:
    """A library import hidden in a function hides a cycle from anyone reading the module's head."""
    found = [
        f"{_name(module)}:{line}"
        for module in _modules()
        if not _name(module).startswith(LAZY_IMPORTERS)
        for line in _imports_in_functions(ast.parse(module.read_text(encoding="utf-8")))
    ]
    assert not found, f"move these scrollcase imports to the module's head: {found}"


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


def test_folders_stay_small() -> None:
    folders: dict[str, int] = {}
    for module in _modules():
        if module.name != "__init__.py":
            folder = module.parent.relative_to(PACKAGE).as_posix()
            folders[folder] = folders.get(folder, 0) + 1
    crowded = {f: n for f, n in folders.items() if n > MAX_FOLDER_MODULES and f != "commands"}
    assert not crowded, f"folders over {MAX_FOLDER_MODULES} modules: {crowded}; split one by concern"


def test_modules_fit_in_500_lines() -> None:
    found = {_name(m) for m in _modules() if len(m.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES}
    new = found - KNOWN_LONG_MODULES
    assert not new, f"modules over {MAX_MODULE_LINES} lines: {sorted(new)}"
    fixed = KNOWN_LONG_MODULES - found
    assert not fixed, f"fixed, so delete from KNOWN_LONG_MODULES: {sorted(fixed)}"


# Unit tests named for what they test rather than for one module: the document or data they hold to the code.
UNIT_TESTS_OF_DATA = {"format/test_format_doc.py", "format/test_vectors.py", "parity/test_example.py"}


def test_unit_tests_mirror_the_package() -> None:
    """tests/unit/<folder>/test_<module>[_angle].py for scrollcase/<folder>/<module>.py."""
    units = ROOT / "tests" / "unit"
    strays = []
    for test in sorted(units.rglob("test_*.py")):
        rel = test.relative_to(units).as_posix()
        folder = PACKAGE / test.parent.relative_to(units)
        stem = test.stem.removeprefix("test_")
        modules = {p.stem for p in folder.glob("*.py")} if folder.is_dir() else set()
        if rel not in UNIT_TESTS_OF_DATA and not any(stem == m or stem.startswith(f"{m}_") for m in modules):
            strays.append(rel)
    assert not strays, f"tests/unit/ mirrors scrollcase/: name these for the module they test, or move them: {strays}"
