"""Planning the PyPI side of real pixi locks: which wheels a box build would install, which it refuses.

Outcomes pinned from the 14 public workspaces in shared/real-world: every wheel pinned by URL and
sha256 is planned; sdists, git URLs, editable folders and path wheels (pixi records no hash for
those) are refused, all listed in one error.
"""

from __future__ import annotations

from scrollcase.errors import BuildError
from scrollcase.wheels.source import locked_wheels, plan_wheels
from tests.support.corpus import corpus_root, skip_without

ROOT = corpus_root()  # shared/ beside the checkout; an error only where .ci/run requires it
# (environment, platform) rows across the corpus whose PyPI side plans / is refused
PLANNED, REFUSED = 201, 20  # 201 include the rows with no PyPI packages at all
pytestmark = skip_without(ROOT)


def outcome(workspace: str, subdir: str, environment: str = "default") -> tuple[int, list[str]]:
    """(wheels planned, values of the refused packages)."""
    lock = ROOT / workspace / "pixi.lock"
    locked = locked_wheels(lock, subdir, environment)
    try:
        return len(plan_wheels(locked, lock, subdir)), []
    except BuildError as exc:
        assert all(p.fix and p.file == str(lock) for p in exc.problems)
        return 0, sorted(p.value or "" for p in exc.problems)


def test_hash_pinned_wheels_are_planned() -> None:
    assert outcome("UH-LMU__microscopy-ai-envs", "linux-64", "plate-sampler") == (25, [])
    assert outcome("ruben-arts__haystack-pixi-example", "osx-arm64") == (50, [])
    assert outcome("scipy__scipy__github-workflows", "win-64", "lint") == (15, [])


def test_sdists_git_urls_and_editable_folders_are_refused() -> None:
    _, refused = outcome("pablovela5620__wilor-nano", "linux-64")
    assert "./" in refused and any(v.startswith("git+https://") for v in refused)
    _, refused = outcome("prefix-dev__pixi__examples-llama-index-inference", "linux-64")
    assert refused == [
        "https://files.pythonhosted.org/packages/1f/19/89836022affc1bf470e2485e28872b489254a66fe587155edba731a07112/llama_cpp_python-0.2.90.tar.gz"
    ]


def test_path_wheels_without_a_hash_are_refused_and_v7_platform_names_map_to_subdirs() -> None:
    # Takobox's v7 lock names its platform "p1" for win-64 beside a plain "win-64".
    locked = locked_wheels(ROOT / "Takobox710__yolo-tool" / "pixi.lock", "win-64")
    assert len(locked) == 126
    _, refused = outcome("Takobox710__yolo-tool", "win-64")
    assert "./installer/vendor/sam3-0.1.0-py3-none-any.whl" in refused and len(refused) == 7


def test_every_real_lock_plans_or_refuses_cleanly() -> None:
    """No real lock makes planning crash: each (environment, platform) ends in a plan or a BuildError."""
    from rattler import LockFile

    planned = refused = 0
    for lock in sorted(ROOT.glob("*/pixi.lock")):
        for name, env in LockFile.from_path(lock).environments():
            for platform in env.platforms():
                subdir = str(platform.subdir)
                try:
                    plan_wheels(locked_wheels(lock, subdir, name), lock, subdir)
                    planned += 1
                except BuildError:
                    refused += 1
    assert (planned, refused) == (PLANNED, REFUSED)
