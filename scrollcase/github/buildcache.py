"""What the build action hands actions/cache to carry a recipe's build caches between runs.

Hosted runners start empty, so without it every build downloads the lock's conda packages and wheels
and the recipe's assets again, and compresses every frame again.  Pure: the command reads the lock
and the environment; :func:`build_cache` decides the folders and the keys.

The key is the recipe and the sha256 of its ``pixi.lock``: a new lock saves a new entry, which the
restore keys (the same recipe's latest, then any recipe's on this OS and architecture) start from,
so most packages and frames still come from the cache.  What is restored is checked as on any
build: packages and wheels by their sha256, assets against recipe.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scrollcase.io import cache as usercache
from scrollcase.io.digest import sha256_bytes

PREFIX = "scrollcase-build-v1"
# The user cache's build folders worth carrying: downloads by digest, and what a rebuild reuses.
# (unpacked/ only repeats wheels/ unpacked; metadata/ is for `lock`.)
USER_SECTIONS = (usercache.WHEELS, usercache.PACK_FRAMES, usercache.PYC)
STATE_SECTIONS = ("pkgs", "assets")  # below --state-dir/cache: conda packages, downloaded assets


@dataclass(frozen=True)
class BuildCache:
    paths: tuple[Path, ...]
    key: str
    restore_keys: tuple[str, ...]

    def outputs(self) -> dict[str, object]:
        """Step outputs as actions/cache takes them: one path and one restore key per line."""
        return {
            "path": "\n".join(str(p) for p in self.paths),
            "key": self.key,
            "restore-keys": "\n".join(self.restore_keys),
        }


def build_cache(
    recipe_id: str, lock: bytes | None, runner_os: str, runner_arch: str, user_cache: Path, state_cache: Path
) -> BuildCache:
    """The folders to carry and the keys for ``recipe_id`` whose pixi.lock holds ``lock`` (None: none yet)."""
    platform = f"{PREFIX}-{runner_os}-{runner_arch}"
    lock_hash = sha256_bytes(lock)[:20] if lock is not None else "no-lock"
    paths = tuple(user_cache / name for name in USER_SECTIONS) + tuple(state_cache / name for name in STATE_SECTIONS)
    return BuildCache(
        paths=paths,
        key=f"{platform}-{recipe_id}-{lock_hash}",
        restore_keys=(f"{platform}-{recipe_id}-", f"{platform}-"),
    )
