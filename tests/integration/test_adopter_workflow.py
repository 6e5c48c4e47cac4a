"""The adopter's workflow (tests/fixtures/adopter) IS the one docs/github.md's adoption section shows, and
GitHub's schema and jactionlint accept it.  test_adopter.py runs it under act; this keeps the docs honest
about what was run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.adopter import FIXTURE, WORKFLOW
from tests.support.tools import tool

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "github.md"
ADOPTED = FIXTURE / "repo" / WORKFLOW
# The docs pin scrollcase's actions by SHA, with the release in a comment; the fixture uses the tag act maps.
DOCS_PIN = re.compile(r"@<(?:40-hex )?SHA> # v1\.0\.0")
LINE_BUDGET = 60  # issue 30: the adopter's trial needed 134 lines of workflow


def docs_workflow() -> str:
    section = DOCS.read_text(encoding="utf-8").split("## Adopting scrollcase", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    (workflow,) = [b for b in blocks if b.startswith("name: ")]
    return workflow


def test_the_adopters_workflow_is_the_one_the_docs_show() -> None:
    assert DOCS_PIN.sub("@v1", docs_workflow()) == ADOPTED.read_text(encoding="utf-8")


def test_the_adopters_workflow_stays_short() -> None:
    workflows = sorted((FIXTURE / "repo" / ".github" / "workflows").glob("*.yml"))
    assert workflows == [ADOPTED]
    assert len(ADOPTED.read_text(encoding="utf-8").splitlines()) < LINE_BUDGET


def test_github_schema_and_jactionlint_accept_the_adopters_workflow() -> None:
    for argv in (
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(ADOPTED)],
        [tool("jactionlint"), "--profile", "correctness", "--no-online", "--no-color", str(ADOPTED)],
    ):
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
