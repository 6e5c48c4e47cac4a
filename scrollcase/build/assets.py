"""Model assets: resolve against ``assetBaseUrl``, download with resume, verify size and sha256.

Downloads land in a content-addressed cache (``<cache>/<sha256>``) through a ``.part`` file that is
kept when a transfer breaks, so the next run resumes with an HTTP ``Range`` (or S3 ``Range``, or a
file seek) instead of starting over.  Transport is injected: a :class:`Fetcher` per URL scheme.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from scrollcase.errors import BuildError, IntegrityError, Problem, describe_path
from scrollcase.format.release import ReleaseAsset
from scrollcase.io.cache import ASSET_CACHE
from scrollcase.io.digest import sha256_file
from scrollcase.io.fetch import Fetcher, fetching, file_url_path
from scrollcase.io.files import finish_resumed, resume_path
from scrollcase.recipe.jsonpos import JsonPath, render_path
from scrollcase.recipe.loader import locate_in_recipe
from scrollcase.recipe.model import Asset, Recipe

if TYPE_CHECKING:  # boto3-stubs: types only
    pass


@dataclass(frozen=True)
class AssetSource:
    """Where one asset comes from and where it goes inside the box."""

    name: str
    url: str  # absolute
    box_path: str  # relative to the box root: <modelCacheSubdir>/<asset path>
    sha256: str
    size: int
    index: int = 0  # its place in recipe.json's ``assets`` list
    recipe_file: Path | None = None  # the recipe.json declaring it: problems point at its lines

    def problem(self, field: str, message: str, fix: str, value: str | None = None) -> Problem:
        """A problem located at this asset's ``field`` (``size``, ``sha256``, ``path``) in recipe.json,
        or at ``assetBaseUrl`` for that field name: the line a user edits to fix it."""
        path: JsonPath = (field,) if field == "assetBaseUrl" else ("assets", self.index, field)
        file, line, column = locate_in_recipe(self.recipe_file, path) if self.recipe_file else (None, None, None)
        return Problem(
            message=message, file=file, line=line, column=column, key=render_path(path), value=value, fix=fix
        )


class WrongSizeError(Exception):
    """The source is not the size recipe.json declares: ``total`` bytes when it said so, else more."""

    def __init__(self, total: int | None) -> None:
        super().__init__(total)
        self.total = total


class AssetSink:
    """The part file an asset downloads into, held to the size recipe.json declares: never more
    bytes than that are written, and a source that reports another size is refused before copying."""

    def __init__(self, out: BinaryIO, offset: int, size: int) -> None:
        self.out, self.position, self.size = out, offset, size
        self.total: int | None = None  # the full size the source reported, if it did

    def expect_total(self, total: int) -> None:
        self.total = total
        if total != self.size:
            raise WrongSizeError(total)

    def write(self, data: Any) -> int:
        if self.position + len(data) > self.size:
            raise WrongSizeError(self.total)
        written = self.out.write(data)
        self.position += written
        return written

    def seek(self, position: int, whence: int = 0) -> int:
        self.position = self.out.seek(position, whence)
        return self.position

    def truncate(self, size: int | None = None) -> int:
        return self.out.truncate(size)

    def tell(self) -> int:
        return self.position


def asset_url(base: str, path: str) -> str:
    """``path`` (POSIX, relative) below ``base``, percent-encoded."""
    return base.rstrip("/") + "/" + urllib.parse.quote(path)


def plan_assets(
    base_url: str, model_cache_subdir: str, assets: Sequence[Asset], recipe_file: Path | None = None
) -> list[AssetSource]:
    """Where each asset comes from and goes; ``recipe_file`` (the recipe.json declaring them) locates problems."""
    return [
        AssetSource(
            a.name, asset_url(base_url, a.path), f"{model_cache_subdir}/{a.path}", a.sha256, a.size, i, recipe_file
        )
        for i, a in enumerate(assets)
    ]


def release_assets(sources: Sequence[AssetSource], assets: Sequence[Asset], bundled: bool) -> list[ReleaseAsset]:
    """Manifest entries: bundled assets are inside the archive; on-demand ones carry their URL."""
    return [
        ReleaseAsset(
            name=a.name, path=a.path, sha256=a.sha256, size=a.size, bundled=bundled, url=None if bundled else s.url
        )
        for s, a in zip(sources, assets, strict=True)
    ]


def fetch_asset(source: AssetSource, cache: Path, fetchers: Mapping[str, Fetcher]) -> Path:
    """The verified file for ``source`` in ``cache``, downloading (or resuming) only what is missing."""
    done = ASSET_CACHE.entry(cache, source.sha256)
    if done.is_file() and done.stat().st_size == source.size:
        return done
    cache.mkdir(parents=True, exist_ok=True)
    part = resume_path(done)
    offset = part.stat().st_size if part.is_file() else 0
    if offset > source.size:
        part.unlink()
        offset = 0
    fetcher = _fetcher_for(source, fetchers)
    total: int | None = None
    if offset < source.size:
        try:
            with part.open("ab" if offset else "wb") as out:
                sink = AssetSink(out, offset, source.size)
                _transfer(fetcher, source, sink, offset)
        except WrongSizeError as wrong:
            part.unlink(missing_ok=True)  # bytes of another file: resuming would only extend them
            raise size_error(source, wrong.total) from None
        total = sink.total
    _verify(part, source, progressed=part.stat().st_size > offset, total=total)
    return finish_resumed(part, done)


def _transfer(fetcher: Fetcher, source: AssetSource, sink: AssetSink, offset: int) -> None:
    what = f"downloading asset {source.name!r} failed or was interrupted"
    fix = "rerun the build: the partial download is kept and resumed"
    with fetching(what, f"assets.{source.name}", source.url, fix, at=lambda p: _at_path(source, p)):
        fetcher(source.url, cast("BinaryIO", sink), offset)


def _at_path(source: AssetSource, problem: Problem) -> Problem:
    """A transfer's problem at the asset's ``path`` line: a 404 is most often a path the user changed."""
    return source.problem("path", problem.message, problem.fix or "", problem.value)


def size_error(source: AssetSource, total: int | None) -> IntegrityError:
    """The asset is another size than recipe.json's ``size`` (``total`` bytes, or more when unknown)."""
    has = f"{total} bytes" if total is not None else f"more than {source.size} bytes"
    new_size = f'"size": {total}' if total is not None else '"size" to its size in bytes'
    fix = (
        f'if {source.url} is the file you want, set {new_size} and its "sha256" '
        f"(`sha256sum`); otherwise restore the file the recipe was written for"
    )
    message = f"the file at {source.url} is {has}, not the {source.size} this field declares"
    return IntegrityError(
        f"asset {source.name!r} does not match its size in recipe.json",
        problems=[source.problem("size", message, fix)],
    )


def digest_error(source: AssetSource, digest: str) -> IntegrityError:
    """The asset has recipe.json's size but another sha256."""
    fix = (
        f'if {source.url} is the file you want, set "sha256": "{digest}"; '
        "otherwise restore the file the recipe was written for"
    )
    message = f"the file at {source.url} has sha256 {digest}, not the one this field declares"
    return IntegrityError(
        f"asset {source.name!r} does not match its sha256 in recipe.json",
        problems=[source.problem("sha256", message, fix)],
    )


def _verify(part: Path, source: AssetSource, *, progressed: bool, total: int | None) -> None:
    size = part.stat().st_size
    # Shorter than declared is a broken transfer only when more bytes may come: the source said it has
    # the declared size, or said nothing and sent bytes.  A source that sent nothing more has ended.
    if size < source.size and (total == source.size or (total is None and progressed)):
        raise BuildError(
            f"downloading asset {source.name!r} was interrupted",
            problems=[
                source.problem(
                    "path",
                    f"got {size} of {source.size} bytes from {source.url}",
                    "rerun the build: the partial download is kept and resumed",
                )
            ],
        )
    if size != source.size:
        part.unlink()
        raise size_error(source, size)
    digest = sha256_file(part)[0]
    if digest != source.sha256:
        part.unlink()  # wrong bytes: resuming would only extend them
        raise digest_error(source, digest)


def _fetcher_for(source: AssetSource, fetchers: Mapping[str, Fetcher]) -> Fetcher:
    scheme = urllib.parse.urlsplit(source.url).scheme
    if scheme not in fetchers:
        raise BuildError(
            f"no way to fetch {scheme}:// assets here",
            problems=[
                source.problem(
                    "assetBaseUrl",
                    f"asset {source.name!r} needs a {scheme} client",
                    "configure credentials for that store, or host the assets over https or file://",
                    value=source.url,
                )
            ],
        )
    return fetchers[scheme]


def place_assets(
    sources: Sequence[AssetSource], cache: Path, fetchers: Mapping[str, Fetcher], box_root: Path
) -> list[Path]:
    """Fetch every asset and copy it into the box under the model cache."""
    placed = []
    for source in sources:
        cached = fetch_asset(source, cache, fetchers)
        target = box_root / source.box_path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached, target)
        placed.append(target)
    return placed


def check_local_sizes(sources: Sequence[AssetSource]) -> None:
    """IntegrityError naming every file:// asset whose file is another size than recipe.json declares:
    a stat each, so a build learns it before installing anything rather than at its assets stage."""
    problems: list[Problem] = []
    for source in sources:
        if urllib.parse.urlsplit(source.url).scheme != "file":
            continue
        path = file_url_path(source.url)
        size = path.stat().st_size if path.is_file() else None
        if size is not None and size != source.size:
            problems.extend(size_error(source, size).problems)
    if problems:
        raise IntegrityError(
            f"{len(problems)} asset(s) do not match their size in recipe.json, so nothing was installed",
            problems=problems,
        )


def local_asset_problems(recipe: Recipe, recipe_file: Path) -> list[Problem]:
    """What ``validate`` tells of file:// assets before any build: each file exists, has recipe.json's
    size and then its sha256, every problem at the line that declares it.  Remote assets are the build's."""
    if urllib.parse.urlsplit(recipe.assetBaseUrl).scheme != "file":
        return []
    problems: list[Problem] = []
    for source in plan_assets(recipe.assetBaseUrl, recipe.modelCacheSubdir, recipe.assets, recipe_file):
        problems.extend(_local_problems(source))
    return problems


def _local_problems(source: AssetSource) -> Sequence[Problem]:
    path = file_url_path(source.url)
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        size = None
    if size is None:
        fix = "put the asset there, or fix this path or assetBaseUrl"
        return [source.problem("path", f"no file at {describe_path(path)}", fix, value=source.url)]
    if size != source.size:
        return size_error(source, size).problems
    digest = sha256_file(path)[0]
    return digest_error(source, digest).problems if digest != source.sha256 else []
