"""scripts/split-actions end to end: the one-repository-per-action trees (``scrollcase/build@v1``) that it
writes from a tagged clone of this checkout are valid actions, use only SHA-pinned actions, and their
setup installs scrollcase at the tag's version (not the major tag's, not the HEAD after it).

Also the version story itself (setuptools-scm, pyproject.toml): a clone without tags, a release tag beside
the moving major tag, a commit after it, ``git archive`` output (what runners download actions as) and a
copied tree without ``.git``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.support import act as act_support
from tests.support.tools import tool
from tests.support.wheelhouse import build_wheelhouse

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "split-actions"
TAG = "v1.4.2"

pytestmark = pytest.mark.slow


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def scm_version(folder: Path) -> str:
    """The version setuptools-scm gives ``folder`` with pyproject.toml's configuration (as a build would)."""
    done = subprocess.run(
        [sys.executable, "-m", "setuptools_scm"], cwd=folder, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def split(repo: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--repo", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as a fresh repository: one commit without tags."""
    repo = tmp_path_factory.mktemp("scrollcase")
    act_support.copy_tree(repo, act_support.working_tree_files(), skip=["recipes", "tests", "benchmarks"])
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


@pytest.fixture(scope="module")
def released(clone: Path) -> Path:
    """``clone`` with the release tag and the major tag on it, then one more commit."""
    version = scm_version(clone)
    assert re.fullmatch(r"0\.1\.dev1\+g[0-9a-f]+", version), f"a clone without tags: {version}"
    git(clone, "tag", "-a", TAG, "-m", TAG)
    git(clone, "tag", "v1")  # what .github/workflows/major-tag.yml makes: lightweight, same commit
    assert scm_version(clone) == "1.4.2"
    (clone / "CHANGELOG.md").write_text("after the release\n", encoding="utf-8")
    git(clone, "add", "CHANGELOG.md")
    git(clone, "commit", "-q", "-m", "after")
    assert re.fullmatch(r"1\.4\.3\.dev1\+g[0-9a-f]+", scm_version(clone))
    return clone


@pytest.fixture(scope="module")
def trees(released: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("split") / "out"
    done = split(released, out, "--ref", TAG)
    assert done.returncode == 0, done.stderr
    assert f"version 1.4.2 ({TAG} = " in done.stdout
    return {p.name: p for p in sorted(out.iterdir())}


def test_every_action_gets_a_tree_with_its_action_yml_at_the_root(trees: dict[str, Path], released: Path) -> None:
    names = sorted(p.parent.name for p in (released / "actions").glob("*/action.yml"))
    assert sorted(trees) == names and len(names) >= 6
    for name, tree in trees.items():
        source = git(released, "show", f"{TAG}:actions/{name}/action.yml")
        assert (tree / "action.yml").read_text(encoding="utf-8").strip() == source
        assert (tree / "actions" / "setup_scrollcase.py").is_file()
        assert (tree / "scrollcase" / "cli.py").is_file() and (tree / "pyproject.toml").is_file()
        assert not (tree / "actions" / name).exists() and not (tree / "tests").exists()
        assert f"scrollcase/{name}" in (tree / "ACTION.md").read_text(encoding="utf-8")


def test_each_action_yml_matches_githubs_action_schema(trees: dict[str, Path]) -> None:
    files = [str(tree / "action.yml") for tree in trees.values()]
    done = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", *files],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_action_uses_only_actions_pinned_by_sha(trees: dict[str, Path]) -> None:
    for name, tree in trees.items():
        action = yaml.safe_load((tree / "action.yml").read_text(encoding="utf-8"))
        assert action["runs"]["using"] == "composite", name
        uses = [step["uses"] for step in action["runs"]["steps"] if "uses" in step]
        assert uses, f"{name}: no nested action at all (setup-python expected)"
        for ref in uses:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[^@]+)?@[0-9a-f]{40}", ref), f"{name}: {ref}"


def test_each_tree_installs_scrollcase_at_the_tags_version(trees: dict[str, Path]) -> None:
    for name, tree in trees.items():
        archival = (tree / ".git_archival.txt").read_text(encoding="utf-8")
        assert f"describe-name: {TAG}\n" in archival, name
        assert scm_version(tree) == "1.4.2", name


def test_the_setup_steps_install_that_version_from_the_tree(trees: dict[str, Path], tmp_path: Path) -> None:
    """setup_scrollcase.py locate + install, run as the action runs them, from the root of a tree."""
    tree = trees["build"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "INPUT_"))}
    env |= {"RUNNER_TEMP": str(tmp_path), "GITHUB_WORKSPACE": str(tmp_path), "SCROLLCASE_BASE_PYTHON": sys.executable}
    # Offline, as act runs install: every requirement and the build backend from wheels of this venv.
    build_wheelhouse(tmp_path / "wheels", extras=())
    env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "wheels")}
    script = tree / "actions" / "setup_scrollcase.py"
    located = subprocess.run(
        [sys.executable, str(script), "locate"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    assert located.returncode == 0, located.stdout + located.stderr
    outputs = dict(line.split("=", 1) for line in located.stdout.splitlines())
    assert outputs["root"] == str(tree.resolve())
    done = subprocess.run(
        [sys.executable, str(script), "install"], cwd=tree, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    installed = subprocess.run(
        [outputs["python"], "-m", "scrollcase", "--version"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert installed.stdout.strip() == "scrollcase 1.4.2"


def test_an_unpinned_nested_action_is_refused_and_nothing_written(released: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git(released, "clone", "-q", str(released), str(repo))
    action = repo / "actions" / "verify" / "action.yml"
    text = action.read_text(encoding="utf-8")
    action.write_text(re.sub(r"actions/setup-python@[0-9a-f]{40}", "actions/setup-python@v5", text), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "unpinned")
    done = split(repo, tmp_path / "out")
    assert done.returncode == 1
    assert "actions/verify/action.yml at HEAD: uses actions/setup-python@v5" in done.stderr
    assert not (tmp_path / "out").exists()


def test_git_archive_and_a_copied_tree_still_have_a_version(released: Path, tmp_path: Path) -> None:
    """A runner downloads an action as a tarball (git archive, no .git); a copied folder has neither."""
    tarball = tmp_path / "a.tar"
    git(released, "archive", "--format=tar", "-o", str(tarball), TAG)
    unpacked = tmp_path / "archive"
    unpacked.mkdir()
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(unpacked)], check=True)
    assert scm_version(unpacked) == "1.4.2"
    copied = tmp_path / "copied"
    act_support.copy_tree(copied, ["pyproject.toml", "README.md", "scrollcase/__init__.py"], root=released)
    assert scm_version(copied) == "0.0"


def test_an_sdist_keeps_the_version_without_git(released: Path, tmp_path: Path) -> None:
    """An sdist built from the clone (setuptools' own backend, as pip or build call it) carries its version in
    PKG-INFO; unpacked where there is no .git, it still builds as that version."""
    expected = scm_version(released)
    build = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path / "dist")],
        cwd=released,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip().splitlines()[-1]
    assert name == f"scrollcase-{expected}.tar.gz"
    subprocess.run(["tar", "-xzf", str(tmp_path / "dist" / name), "-C", str(tmp_path)], check=True)
    unpacked = tmp_path / f"scrollcase-{expected}"
    assert not (unpacked / ".git").exists()
    assert scm_version(unpacked) == expected


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("split_actions", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # its dataclasses look their module up there
    loader.exec_module(module)
    return module


def test_unpinned_reads_every_uses_form() -> None:
    unpinned = load_script().unpinned
    sha = "a" * 40
    text = f"steps:\n  - uses: actions/cache@{sha} # v4\n  - uses: './actions/x'\n  - name: n\n    uses: o/r/p@main\n"
    assert unpinned(text) == ["./actions/x", "o/r/p@main"]


def push(split_out: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "push-split-actions"), str(split_out), "--url", url, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def test_push_publishes_each_tree_as_its_own_repository(trees: dict[str, Path], tmp_path: Path) -> None:
    """Into empty bare repositories: the tree at the root of the default branch, vX.Y.Z and v1 on it; a rerun
    pushes nothing; a tree that differs under the same tag is refused."""
    for name in trees:
        subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / f"{name}.git")], check=True)
    url = str(tmp_path / "{name}.git")
    out = next(iter(trees.values())).parent
    done = push(out, url, "--tag", TAG)
    assert done.returncode == 0, done.stderr
    for name, tree in trees.items():
        assert f"{name}: pushed {TAG}; moved v1 to {TAG}" in done.stdout
        remote = tmp_path / f"{name}.git"
        assert git(remote, "rev-parse", f"{TAG}^{{commit}}") == git(remote, "rev-parse", "v1^{commit}")
        assert git(remote, "rev-parse", "HEAD") == git(remote, "rev-parse", "v1^{commit}")
        assert git(remote, "show", "v1:action.yml") == (tree / "action.yml").read_text(encoding="utf-8").strip()
        unpacked = tmp_path / f"{name}-archive"
        unpacked.mkdir()
        archive = subprocess.run(["git", "-C", str(remote), "archive", "v1"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(unpacked)], input=archive.stdout, check=True)
        assert scm_version(unpacked) == "1.4.2", name  # what a runner downloading scrollcase/<name>@v1 installs
    again = push(out, url, "--tag", TAG)
    assert again.returncode == 0 and again.stdout.count("already published") == len(trees), again.stdout
    (trees["build"] / "ACTION.md").write_text((trees["build"] / "ACTION.md").read_text() + "edited\n")
    try:
        refused = push(out, url, "--tag", TAG)
    finally:
        (trees["build"] / "ACTION.md").write_text((trees["build"] / "ACTION.md").read_text().removesuffix("edited\n"))
    assert refused.returncode == 1 and f"{TAG} already exists with other content" in refused.stderr


def test_push_refuses_trees_split_at_another_tag(trees: dict[str, Path], tmp_path: Path) -> None:
    done = push(next(iter(trees.values())).parent, str(tmp_path / "{name}.git"), "--tag", "v1.4.3")
    assert done.returncode == 1 and "were not split at v1.4.3" in done.stderr
