"""Finding what a parity run needs: the recipe folder, the release manifest, the box and its python."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scrollcase.errors import BuildError, RecipeError, UsageError
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.release import ReleaseManifest, dump_release, load_release
from scrollcase.io.files import write_atomic
from scrollcase.recipe.loader import RecipeDir, resolve_recipe
from scrollcase.recipe.model import Parity, Recipe
from scrollcase.targets import registry

DIST_DIR = Path(".scrollcase/dist")
RELEASE_SUFFIX = ".release.json"


@dataclass(frozen=True)
class ReleaseFile:
    path: Path
    manifest: ReleaseManifest


def is_release_arg(arg: str) -> bool:
    return arg.endswith(RELEASE_SUFFIX)


def read_release(path: Path) -> ReleaseFile:
    return ReleaseFile(path, load_release(path))


def built_release(recipe: Recipe, dist: Path = DIST_DIR) -> Path | None:
    """The release manifest `scrollcase build` wrote for ``recipe``, if it exists."""
    path = dist / recipe.release_name
    return path if path.is_file() else None


def recipe_for_release(
    manifest: ReleaseManifest, recipe_dir: Path | None, recipes_root: Path = Path("recipes")
) -> RecipeDir:
    """``--recipe-dir`` when given, else ``recipes/<recipeId>/``; it must be the manifest's recipe."""
    found = resolve_recipe(str(recipe_dir) if recipe_dir else manifest.recipeId, recipes_root)
    if found.recipe.recipeId != manifest.recipeId:
        raise UsageError(
            f"{found.recipe_file} is recipe {found.recipe.recipeId!r} but the release was "
            f"built from {manifest.recipeId!r}",
            fix="pass the matching --recipe-dir",
        )
    return found


def parity_block(recipe_dir: RecipeDir) -> Parity:
    """The recipe's parity settings, and a check that its script exists."""
    parity = recipe_dir.recipe.parity
    if parity is None:
        raise RecipeError(
            f"{recipe_dir.recipe_file} has no parity block",
            fix=(
                'add "parity": {"script": "checks/parity.py", '
                f'"accelerators": ["cpu", "{recipe_dir.recipe.target.accelerator}"], '
                '"tolerances": {"absolute": 1e-4, "relative": 1e-3, "minimumCosine": 0.9999}}'
            ),
        )
    if not (recipe_dir.path / parity.script).is_file():
        raise RecipeError(
            f"parity.script {parity.script!r} does not exist in {recipe_dir.path}",
            fix=f"create {recipe_dir.path / parity.script} or fix parity.script",
        )
    return parity


def parse_accelerators(text: str | None, default: list[str]) -> list[str]:
    """``--accelerators cpu,cuda`` (first = reference); the recipe's list when not given."""
    if text is None:
        return list(default)
    chosen = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in chosen if not registry.known(a)]
    if not chosen or unknown or len(set(chosen)) != len(chosen):
        names = ", ".join(registry.ACCELERATORS)
        best = max(registry.ranks().items(), key=lambda item: item[1])[0]
        raise UsageError(
            f"--accelerators {text!r} is not a list of distinct accelerators",
            fix=f"e.g. --accelerators cpu,{best} ({names}; the first is the reference)",
        )
    return chosen


def box_python(box_dir: Path, entry_point: str) -> Path:
    """The box's own interpreter (``pythonEntryPoint`` is relative to the box root on every OS)."""
    python = box_dir / entry_point
    if not python.is_file():
        raise BuildError(
            f"the box at {box_dir} has no interpreter at {entry_point}",
            fix="rebuild the box, or pass --box/--python pointing at a complete one",
        )
    return python


def unpack_release(release: ReleaseFile, dest: Path) -> Path:
    """Verify and extract the release's archive (next to the manifest) into ``dest``."""

    archive = release.path.parent / release.manifest.archive.name
    unpack_archive(
        archive, dest, expected_size=release.manifest.archive.size, expected_sha256=release.manifest.archive.sha256
    )
    return dest


def write_release(release: ReleaseFile, manifest: ReleaseManifest) -> None:
    """Rewrite the manifest atomically (temp file beside it, then rename)."""
    try:
        write_atomic(release.path, dump_release(manifest))
    except OSError as exc:
        raise BuildError(f"cannot rewrite {release.path}: {exc.strerror}") from None
