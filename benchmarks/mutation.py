"""Mutation testing of the core rooms with cosmic-ray (``pip install -e .[mutation]``).

Each module is mutated in a throwaway copy of the checkout (never in the working tree: an interrupted
run cannot leave a mutant behind) and every mutant is tested with the module's mirrored tests only,
stopping at the first failure, under a timeout of a few baseline runs (a mutant that loops is
"incompetent", not a 2-minute wait).  Mutants inside a function's annotations are not run at all
where ``from __future__ import annotations`` keeps them strings nothing evaluates (counted as
equivalent).  Prints, per module: mutants, killed, survived, equivalent, incompetent (the mutant did
not even import or timed out), the score (killed of the non-equivalent mutants that ran), the wall
time, and each survivor's diff, to be argued as equivalent or killed with a new test.  Run:

    python benchmarks/mutation.py scrollcase/parity/compare.py   # one module (~1-2 min on 2 cores)
    python benchmarks/mutation.py --list                         # the core rooms and their tests
    python benchmarks/mutation.py                                # every core room: hours on 2 cores
"""

from __future__ import annotations

import argparse
import ast
import datetime
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ("scrollcase", "tests", "actions", "recipes", "docs", "pyproject.toml", "README.md")

# module -> the tests that mirror it (and the few others that exercise it for real)
CORE: dict[str, tuple[str, ...]] = {
    "scrollcase/store/base.py": ("tests/unit/test_store_publish.py", "tests/unit/test_store_s3_helpers.py"),
    "scrollcase/store/index.py": ("tests/unit/test_store_index.py",),
    "scrollcase/store/local.py": ("tests/unit/test_store_local.py", "tests/integration/test_publish_local.py"),
    "scrollcase/store/publish.py": ("tests/unit/test_store_publish.py", "tests/integration/test_publish_local.py"),
    "scrollcase/store/s3.py": ("tests/unit/test_store_s3_helpers.py", "tests/integration/test_publish_s3.py"),
    "scrollcase/store/http.py": ("tests/unit/test_store_http.py",),
    "scrollcase/box/paths.py": ("tests/unit/test_box_paths.py", "tests/unit/test_unpack.py"),
    "scrollcase/box/unpack.py": ("tests/unit/test_unpack.py", "tests/integration/test_unpack_cli.py"),
    "scrollcase/box/relocate.py": ("tests/unit/test_relocate.py", "tests/unit/test_relocate_mutations.py"),
    "scrollcase/box/verify.py": ("tests/unit/test_verify.py",),
    "scrollcase/pixi/classify.py": ("tests/unit/test_classify.py", "tests/unit/test_lockcheck.py"),
    "scrollcase/pixi/lockcheck.py": ("tests/unit/test_lockcheck.py",),
    "scrollcase/parity/compare.py": ("tests/unit/test_parity_compare.py",),
    "scrollcase/client/select.py": ("tests/unit/test_install_select.py",),
    "scrollcase/client/download.py": ("tests/unit/test_install_download.py",),
    "scrollcase/client/install.py": ("tests/integration/test_install_cli.py",),
}


def equivalent_reason(diff: str, postponed_annotations: bool) -> str | None:
    """Why a surviving mutant cannot change behaviour, for the one kind recognised mechanically: a
    mutated return annotation in a module with ``from __future__ import annotations``, where it stays a
    string that nothing evaluates.  Other equivalent mutants are argued by hand (README)."""
    removed = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    one_def_line = len(removed) == len(added) == 1 and removed[0].lstrip().startswith("def ") and " -> " in removed[0]
    if postponed_annotations and one_def_line and removed[0].split(" -> ")[0] == added[0].split(" -> ")[0]:
        return "return annotation (never evaluated)"
    return None


Span = tuple[tuple[int, int], tuple[int, int]]  # (line, column) of the first and past the last character
SKIPPED_ANNOTATION = "inside a function annotation (never evaluated)"


def annotation_spans(source: str) -> list[Span]:
    """Where each function's parameter and return annotations lie; empty unless annotations are
    postponed (then they stay strings: nothing in the core rooms calls ``get_type_hints`` on a function).
    Class-level annotations are left out on purpose: pydantic and dataclasses read those."""
    if "from __future__ import annotations" not in source:
        return []
    spans: list[Span] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
            for note in [node.returns, *(p.annotation for p in params)]:
                if note is not None and note.end_lineno is not None and note.end_col_offset is not None:
                    spans.append(((note.lineno, note.col_offset), (note.end_lineno, note.end_col_offset)))
    return spans


def skip_annotation_mutants(session: Path, spans: list[Span]) -> int:
    """Record every mutant that lies inside an annotation as skipped before ``exec``; returns how many."""
    with sqlite3.connect(session) as db:
        specs = db.execute(
            "SELECT job_id, start_pos_row, start_pos_col, end_pos_row, end_pos_col FROM mutation_specs"
        ).fetchall()
        inside = [
            job for job, *pos in specs if any(lo <= (pos[0], pos[1]) and (pos[2], pos[3]) <= hi for lo, hi in spans)
        ]
        db.executemany(
            "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
            "VALUES ('SKIPPED', ?, NULL, NULL, ?)",
            [(SKIPPED_ANNOTATION, job) for job in inside],
        )
    return len(inside)


@dataclass
class Outcome:
    module: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[str] = field(default_factory=list)  # the diff of each surviving mutant
    equivalent: int = 0  # skipped annotation mutants + survivors recognised by equivalent_reason
    recognised: int = 0  # of the survivors: those recognised as equivalent
    seconds: float = 0.0

    @property
    def mutants(self) -> int:
        return sum(self.counts.values())

    @property
    def score(self) -> float:
        """Killed of the non-equivalent mutants that ran (incompetent ones did not)."""
        killed, survived = self.counts.get("killed", 0), self.counts.get("survived", 0) - self.recognised
        return killed / (killed + survived) if killed + survived else 1.0


def config_text(module: str, tests: tuple[str, ...], timeout: float) -> str:
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider " + " ".join(tests)
    return (
        f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout}\nexcluded-modules = []\n'
        f'test-command = "{command}"\n\n[cosmic-ray.distributor]\nname = "local"\n'
    )


def copy_checkout(into: Path) -> None:
    """The files the tests need, without .git, venvs, caches or build output."""
    ignore = shutil.ignore_patterns("__pycache__", ".scrollcase", "*.pyc")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, into / name)


def cosmic_ray(work: Path, *args: str) -> float:
    """Run one cosmic-ray command in ``work``; returns its wall time in seconds."""
    tool = Path(sys.executable).with_name("cosmic-ray")
    start = time.monotonic()
    subprocess.run([str(tool), *args], cwd=work, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def read_session(module: str, session: Path) -> Outcome:
    outcome = Outcome(module)
    postponed = "from __future__ import annotations" in (REPO / module).read_text(encoding="utf-8")
    with sqlite3.connect(session) as db:
        rows = db.execute("SELECT worker_outcome, test_outcome, diff FROM work_results").fetchall()
    for worker, test, diff in rows:
        kind = str(test or worker).lower()
        outcome.counts[kind] = outcome.counts.get(kind, 0) + 1
        if kind == "skipped":
            outcome.equivalent += 1
        elif kind == "survived" and equivalent_reason(str(diff), postponed):
            outcome.equivalent += 1
            outcome.recognised += 1
        elif kind == "survived":
            outcome.survivors.append(str(diff))
    return outcome


def mutate(module: str, timeout: float | None) -> Outcome:
    """Run cosmic-ray on ``module`` in a fresh copy of the checkout."""
    tests = CORE.get(module)
    if tests is None:
        raise SystemExit(f"{module} is not a core room; --list shows them")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scrollcase-mutation-") as tmp:
        work = Path(tmp)
        copy_checkout(work)
        config = work / "mutation.toml"
        config.write_text(config_text(module, tests, timeout or 600.0), encoding="utf-8")
        baseline = cosmic_ray(work, "baseline", config.name)  # the unmutated tests must pass first
        if timeout is None:  # a few baseline runs: room for a busy machine, not for a mutant that loops
            config.write_text(config_text(module, tests, max(30.0, 5 * baseline)), encoding="utf-8")
        cosmic_ray(work, "init", config.name, "session.sqlite")
        skip_annotation_mutants(work / "session.sqlite", annotation_spans((REPO / module).read_text(encoding="utf-8")))
        cosmic_ray(work, "exec", config.name, "session.sqlite")
        outcome = read_session(module, work / "session.sqlite")
    outcome.seconds = time.monotonic() - start
    return outcome


def report(outcomes: list[Outcome]) -> None:
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, cosmic-ray, {' '.join(sys.argv)}")
    header = ("module", "mutants", "killed", "survived", "equivalent", "incompetent", "score", "minutes")
    print(f"{header[0]:<28} " + " ".join(f"{h:>{max(len(h), 6)}}" for h in header[1:]))
    for o in outcomes:
        c = o.counts
        print(
            f"{o.module.removeprefix('scrollcase/'):<28} {o.mutants:>7} {c.get('killed', 0):>6} "
            f"{c.get('survived', 0):>8} {o.equivalent:>10} {c.get('incompetent', 0):>11} {o.score:>6.1%} "
            f"{o.seconds / 60:>7.1f}"
        )
    for o in outcomes:
        for diff in o.survivors:
            print(f"\nsurvived in {o.module}:\n{diff}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="core modules to mutate (default: every core room)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per mutant's test run (default: 5 baseline runs, >= 30)"
    )
    parser.add_argument("--list", action="store_true", help="print the core rooms and their tests")
    args = parser.parse_args()
    if args.list:
        for module, tests in CORE.items():
            print(f"{module}: {' '.join(tests)}")
        return
    report([mutate(module, args.timeout) for module in args.modules or CORE])


if __name__ == "__main__":
    main()
