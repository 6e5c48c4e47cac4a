"""Running the pixi binary (``scrollcase lock --use-pixi``): version check, solve in a scratch copy."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from scrollcase.errors import HostError, Problem, SolveError
from scrollcase.io import proc
from scrollcase.io.files import move_into_place
from scrollcase.recipe.loader import RecipeDir


def pixi_version(executable: str) -> str | None:
    """``0.73.0`` from ``pixi --version`` (prints ``pixi 0.73.0``), None when it does not run."""
    out = proc.run([executable, "--version"], timeout=60)
    match = re.search(r"(\d+\.\d+\.\d+)", out.stdout)
    return match.group(1) if match else None


def find_pixi(expected: str) -> str:
    executable = shutil.which("pixi")
    if executable is None:
        raise HostError(
            "--use-pixi: no pixi on PATH",
            fix=f"install pixi {expected} (https://pixi.sh), or drop --use-pixi to solve with py-rattler",
        )
    found = pixi_version(executable)
    if found != expected:
        raise HostError(
            f"--use-pixi: {executable} is pixi {found or 'unknown'}, the recipe pins pixi {expected}",
            fix=f"install pixi {expected}, or update pixiVersion in recipe.json",
        )
    return executable


def lock_with_pixi(recipe_dir: RecipeDir) -> Path:
    """Run ``pixi lock`` on a scratch copy of pixi.toml, then move the lock in place (atomic)."""
    executable = find_pixi(recipe_dir.recipe.pixiVersion)
    with tempfile.TemporaryDirectory(dir=recipe_dir.path, prefix=".pixi-lock-") as scratch:
        work = Path(scratch)
        shutil.copy2(recipe_dir.manifest_file, work / "pixi.toml")
        if recipe_dir.lock_file.exists():
            shutil.copy2(recipe_dir.lock_file, work / "pixi.lock")
        done = proc.run([executable, "lock", "--manifest-path", str(work / "pixi.toml")], timeout=None)
        if done.returncode != 0 or not (work / "pixi.lock").is_file():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-30:])
            raise SolveError(
                f"pixi lock failed for {recipe_dir.recipe.recipeId} (target {recipe_dir.recipe.target.target_id})",
                problems=[
                    Problem(
                        message=tail or f"exit code {done.returncode}",
                        file=str(recipe_dir.manifest_file),
                        key="dependencies",
                        fix="fix the specs or channels pixi names above",
                    )
                ],
            )
        move_into_place(work / "pixi.lock", recipe_dir.lock_file)
    return recipe_dir.lock_file
