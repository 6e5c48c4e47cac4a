"""The docs point somewhere: every relative link, anchor and repository path named in README.md, CHANGELOG.md,
benchmarks/README.md and docs/*.md exists in this checkout, and no prose names a guide without linking it.

What counts as a repository path: a word in inline code or a code block, shaped like a relative path, whose
first folder is one of this repository's top-level entries (or a folder repositories commonly have, such as
``examples/``), or a ``.py`` module named from inside the package (``build/pipeline.py`` in architecture.md).
Paths inside a box, a user's repository or a store start elsewhere (``venv/``, ``.scrollcase/``, ``boxes/``)
and are not checked; the few names below that look like paths but are GitHub repositories or generated
folders are listed with the reason.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
DOCS = sorted([*READMES, *(ROOT / "docs").glob("*.md")])
# Folders a repository commonly has: a doc naming one that this repository lacks points nowhere.
USUAL_ROOTS = {"examples", "example", "src", "doc", "tools", "fixtures"}
NOT_PATHS = {
    # GitHub repositories (actions), named as `uses:` takes them.
    *(f"scrollcase/{n}" for n in ("build", "matrix", "lock-check", "parity", "verify", "publish", "scrollcase")),
    *(f"actions/{n}" for n in ("setup-python", "cache", "checkout", "upload-artifact", "download-artifact")),
    "actions/attest-build-provenance",
    "actions/attest",
    "aws-actions/configure-aws-credentials",
    "benchmarks/results/",  # written by the benchmarks (git-ignored)
    ".github/workflows/boxes.yml",  # the adopter's workflow that docs/github.md writes, in their repository
}
# A folder named my-… or your-… is an example of the reader's own (recipes/my-model-linux-x86_64-cpu/); a
# capitalised word stands for one (scrollcase/MODULE.py, recipes/ID).
READERS_OWN = re.compile(r"(^|/)((my|your)-|[A-Z][A-Z_]+(\.py)?(/|$))")
PATH_WORD = re.compile(r"^(?:\./)?[\w.@+-]+(?:/[\w.@+-]+)+/?$")
LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)[^)]*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
FENCE = re.compile(r"^([ \t]*)(```|~~~).*?^\1\2[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def top_level() -> frozenset[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    names = {line.split("/")[0] for line in tracked.splitlines() if line}
    return frozenset(names or {p.name for p in ROOT.iterdir()})


def prose(text: str) -> str:
    """The text outside code blocks and code spans (where links render)."""
    return CODE_SPAN.sub(" ", FENCE.sub(" ", text))


def code_words(text: str) -> list[str]:
    """Every word of every code block and code span, trimmed of quotes and punctuation."""
    chunks = [m.group(0) for m in FENCE.finditer(text)]
    chunks += [m.group(2) for m in CODE_SPAN.finditer(FENCE.sub(" ", text))]
    words = (w.strip("'\",;:()[]{}") for chunk in chunks for w in chunk.split())
    return [w for w in words if w]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: links and code reduced to their text, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    text = FENCE.sub(" ", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        slug = github_slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return frozenset(found)


def link_problems(doc: Path) -> list[str]:
    text = prose(doc.read_text(encoding="utf-8"))
    targets = [m.group(2) for m in LINK.finditer(text)] + IMAGE.findall(text) + REFERENCE.findall(text)
    problems = []
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
            continue
        path_part, _, anchor = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.exists():
            problems.append(f"{rel(doc)}: link to {target}: {path_part} does not exist")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            problems.append(f"{rel(doc)}: link to {target}: no heading #{anchor} in {rel(path)}")
    return problems


def path_problems(doc: Path) -> list[str]:
    package_folders = {p.name for p in (ROOT / "scrollcase").iterdir() if p.is_dir()}
    problems = []
    for word in code_words(doc.read_text(encoding="utf-8")):
        word = word.removeprefix("./")
        if not PATH_WORD.match(word) or "@" in word or word in NOT_PATHS or READERS_OWN.search(word):
            continue
        first = word.split("/")[0]
        if first in top_level() | USUAL_ROOTS and not (ROOT / word).exists():
            problems.append(f"{rel(doc)}: `{word}` is not a path in this repository")
        elif first in package_folders and word.endswith(".py") and not (ROOT / "scrollcase" / word).exists():
            problems.append(f"{rel(doc)}: `{word}` is not a module of scrollcase/")
    return problems


def guide_problems(doc: Path) -> list[str]:
    """'the CUDA guide', 'the guide's': a guide the reader cannot open.  Link text may say guide."""
    text = LINK.sub(" ", prose(doc.read_text(encoding="utf-8")))
    return [f"{rel(doc)}: '{m.group(0)}' names no file: link it" for m in re.finditer(r"[\w ]{0,20}\bguide\b", text)]


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_relative_link_and_anchor_exists(doc: Path) -> None:
    assert link_problems(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_repository_path_named_exists(doc: Path) -> None:
    assert path_problems(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_no_guide_without_a_link(doc: Path) -> None:
    assert guide_problems(doc) == []


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """The three checks on a page with one of each mistake (the ones issue 30 found)."""
    page = ROOT / "docs" / "_probe.md"
    page.write_text(
        "# Probe\n\nSee [locks](locks.md#no-such-heading), [gone](missing.md), [here](#probe).\n\n"
        "```\n$ scrollcase inspect examples/multi-machine/pixi.lock\n```\n\n"
        "`format/nowhere.py`, `scrollcase/errors.py`, `venv/bin/python`, `scrollcase/MODULE.py`, `docs/GONE.md`.\n"
        "The minimal recipe is in the CUDA guide.\n",
        encoding="utf-8",
    )
    try:
        assert link_problems(page) == [
            "docs/_probe.md: link to locks.md#no-such-heading: no heading #no-such-heading in docs/locks.md",
            "docs/_probe.md: link to missing.md: missing.md does not exist",
        ]
        assert path_problems(page) == [
            "docs/_probe.md: `examples/multi-machine/pixi.lock` is not a path in this repository",
            "docs/_probe.md: `format/nowhere.py` is not a module of scrollcase/",
            "docs/_probe.md: `docs/GONE.md` is not a path in this repository",
        ]
        assert len(guide_problems(page)) == 1
    finally:
        page.unlink()


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("`scrollcase inspect PATH/TO/pixi.lock`", "scrollcase-inspect-pathtopixilock"),
        ("Adopting scrollcase: one workflow file", "adopting-scrollcase-one-workflow-file"),
        ("Runner labels and the runner map", "runner-labels-and-the-runner-map"),
        ("Exit 10: ConflictError", "exit-10-conflicterror"),
    ],
)
def test_github_slugs(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_troubleshooting_has_a_section_for_every_exit_code() -> None:
    """Each error class of scrollcase/errors.py under a heading `Exit N: …Class…` with its causes and fix."""
    from scrollcase.errors import EXIT_CODES

    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## Exit (\d+)[^:\n]*: (.+)$", text, re.MULTILINE))
    missing = [f"{name} (exit {code})" for name, code in EXIT_CODES.items() if name not in sections.get(str(code), "")]
    assert missing == [], f"docs/troubleshooting.md has no '## Exit N: Class' section for {', '.join(missing)}"
    for code in sections:
        body = text.split(f"## Exit {code}", 1)[1].split("\n## ", 1)[0]
        assert len(body.split()) >= 20, f"exit {code}: causes and the fix, not just a title"


def test_changelog_keeps_a_changelog_shape() -> None:
    """Unreleased first, then releases newest first as `## [X.Y.Z] - YYYY-MM-DD`; sections of the standard kinds."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\](.*)$", text, re.MULTILINE)
    assert releases and releases[0] == ("Unreleased", ""), "the first section is ## [Unreleased]"
    versions = []
    for name, rest in releases[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", name) and re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest), (name, rest)
        versions.append(tuple(int(part) for part in name.split(".")))
    assert versions == sorted(versions, reverse=True), "releases newest first"
    kinds = set(re.findall(r"^### (.+)$", text, re.MULTILINE))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
