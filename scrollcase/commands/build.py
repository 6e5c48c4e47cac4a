"""``scrollcase build RECIPE``: install, prune, place assets, pack, self-test, write the release."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import about_recipe
from scrollcase.io.pathcheck import require_file_path, require_folder_path

if TYPE_CHECKING:  # boto3-stubs: types only
    from mypy_boto3_s3 import S3Client

    from scrollcase.build.plan import BuildPlan, Weights

NAME = "build"
HELP = "build a box archive and its release manifest"
DESCRIPTION = (
    "Install the recipe's locked environment into a box, prune it, place "
    "assets, pack a reproducible .tar.zst, run the self-test on an unpacked "
    "copy with the box's own interpreter, and write the release manifest. "
    "Boxes are built natively: a target must match this machine."
)


@dataclass(frozen=True)
class BuildArgs(CommandArgs):
    recipe: str
    weights: Weights
    out: Path
    state_dir: Path
    recipes_root: Path
    junit: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("recipe", help="recipe ID (folder under recipes/), recipe folder, or recipe.json path")
    p.add_argument(
        "--weights",
        choices=("bundled", "on-demand"),
        default="bundled",
        help="bundle assets into the box (default) or list their URLs in the release manifest",
    )
    p.add_argument("--out", type=Path, default=Path(".scrollcase/dist"), help="output folder (default: %(default)s)")
    p.add_argument(
        "--state-dir", type=Path, default=Path(".scrollcase"), help="work folder and caches (default: %(default)s)"
    )
    p.add_argument(
        "--recipes-root",
        type=Path,
        default=Path("recipes"),
        help="where recipe IDs are looked up (default: %(default)s)",
    )
    p.add_argument(
        "--junit",
        type=Path,
        default=None,
        help="self-test JUnit report (default: .scrollcase/reports/selftest-<recipeId>.xml)",
    )
    p.set_defaults(handler=handler(BuildArgs, run))


def run(args: BuildArgs, console: Console) -> int:
    from scrollcase.build.pipeline import execute_build
    from scrollcase.build.plan import locked_install, plan_build
    from scrollcase.io.fetch import default_fetchers
    from scrollcase.recipe.loader import resolve_recipe

    require_folder_path(args.out, "--out")
    require_folder_path(args.state_dir, "--state-dir")
    if args.junit is not None:
        require_file_path(args.junit, "--junit")
    recipe_dir = resolve_recipe(args.recipe, args.recipes_root)
    with about_recipe(recipe_dir.recipe.recipeId):
        plan = plan_build(
            recipe_dir, weights=args.weights, out_dir=args.out, state_dir=args.state_dir, junit=args.junit
        )
        locked = locked_install(plan)
        fetchers = default_fetchers(_s3_client(plan))
        result = execute_build(plan, locked=locked, fetchers=fetchers, progress=console.progress, meter=console.meter)
    m = result.manifest
    data = {
        "release": str(result.release),
        "archive": str(result.archive),
        "sbom": str(result.plan.sbom_path),
        "sha256": m.archive.sha256,
        "size": m.archive.size,
        "targetId": m.targetId,
        "weights": m.weights,
        "junit": str(result.junit),
        "selfTest": m.selfTest.model_dump(mode="json") if m.selfTest else None,
        "timings": result.timings,
    }
    checks = len(m.selfTest.checks) if m.selfTest else 0
    console.result(
        data,
        f"built {result.archive} ({m.archive.size / 1e6:.1f} MB)\n"
        f"sha256 {m.archive.sha256}\nrelease manifest: {result.release}\n"
        f"self-test: {checks} checks passed (JUnit: {result.junit})",
    )
    return 0


def _s3_client(plan: BuildPlan) -> S3Client | None:
    """The store's S3 client, only when a bundled asset lives in S3 (credentials from the usual places)."""
    if not plan.bundled or not any(a.url.startswith("s3://") for a in plan.assets):
        return None
    from scrollcase.store.factory import make_s3_client

    return make_s3_client()
