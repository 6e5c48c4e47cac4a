"""Model assets: resolve against ``assetBaseUrl``, download with resume, verify size and sha256.

Downloads land in a content-addressed cache (``<cache>/<sha256>``) through a ``.part`` file that is
kept when a transfer breaks, so the next run resumes with an HTTP ``Range`` (or S3 ``Range``, or a
file seek) instead of starting over.  Transport is injected: a :class:`Fetcher` per URL scheme.
"""

from __future__ import annotations

import http.client
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from scrollcase.box.release import ReleaseAsset
from scrollcase.errors import BuildError, IntegrityError, Problem
from scrollcase.io.digest import sha256_file
from scrollcase.io.files import finish_resumed, resume_path
from scrollcase.recipe.model import Asset

if TYPE_CHECKING:  # boto3-stubs: types only
    from mypy_boto3_s3 import S3Client

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class AssetSource:
    """Where one asset comes from and where it goes inside the box."""

    name: str
    url: str  # absolute
    box_path: str  # relative to the box root: <modelCacheSubdir>/<asset path>
    sha256: str
    size: int


class Fetcher(Protocol):
    def __call__(self, url: str, out: BinaryIO, offset: int) -> None:
        """Write the bytes of ``url`` from ``offset`` on to ``out`` (positioned at ``offset``)."""


def asset_url(base: str, path: str) -> str:
    """``path`` (POSIX, relative) below ``base``, percent-encoded."""
    return base.rstrip("/") + "/" + urllib.parse.quote(path)


def plan_assets(base_url: str, model_cache_subdir: str, assets: Sequence[Asset]) -> list[AssetSource]:
    return [
        AssetSource(a.name, asset_url(base_url, a.path), f"{model_cache_subdir}/{a.path}", a.sha256, a.size)
        for a in assets
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
    done = cache / source.sha256
    if done.is_file() and done.stat().st_size == source.size:
        return done
    cache.mkdir(parents=True, exist_ok=True)
    part = resume_path(done)
    offset = part.stat().st_size if part.is_file() else 0
    if offset > source.size:
        part.unlink()
        offset = 0
    fetcher = _fetcher_for(source, fetchers)
    if offset < source.size:
        with part.open("ab" if offset else "wb") as out:
            _transfer(fetcher, source, out, offset)
    _verify(part, source, progressed=part.stat().st_size > offset)
    return finish_resumed(part, done)


def _transfer(fetcher: Fetcher, source: AssetSource, out: BinaryIO, offset: int) -> None:
    what = f"downloading asset {source.name!r} failed or was interrupted"
    fix = "rerun the build: the partial download is kept and resumed"
    with fetching(what, f"assets.{source.name}", source.url, fix):
        fetcher(source.url, out, offset)


@contextmanager
def fetching(what: str, key: str, url: str, fix: str) -> Iterator[None]:
    """A fetcher's network or file error as a BuildError saying ``what`` failed, located at ``key``."""
    try:
        yield
    except (OSError, http.client.HTTPException) as exc:
        problem = Problem(message=str(exc) or type(exc).__name__, key=key, value=url, fix=fix)
        raise BuildError(what, problems=[problem]) from None


def _verify(part: Path, source: AssetSource, *, progressed: bool) -> None:
    size = part.stat().st_size
    if size < source.size and progressed:  # the connection ended early: keep the part, resume later
        raise BuildError(
            f"downloading asset {source.name!r} was interrupted",
            problems=[
                Problem(
                    message=f"got {size} of {source.size} bytes",
                    key=f"assets.{source.name}",
                    value=source.url,
                    fix="rerun the build: the partial download is kept and resumed",
                )
            ],
        )
    digest = sha256_file(part)[0] if size == source.size else None
    if digest == source.sha256:
        return
    part.unlink()  # wrong bytes: resuming would only extend them
    got = f"{size} bytes" if digest is None else f"sha256 {digest}"
    want = f"{source.size} bytes" if digest is None else f"sha256 {source.sha256}"
    raise IntegrityError(
        f"asset {source.name!r} from {source.url} does not match the recipe",
        problems=[
            Problem(
                message=f"expected {want}",
                key=f"assets.{source.name}",
                value=got,
                fix="fix sha256/size in recipe.json, or the file at the URL",
            )
        ],
    )


def _fetcher_for(source: AssetSource, fetchers: Mapping[str, Fetcher]) -> Fetcher:
    scheme = urllib.parse.urlsplit(source.url).scheme
    if scheme not in fetchers:
        raise BuildError(
            f"no way to fetch {scheme}:// assets here",
            problems=[
                Problem(
                    message=f"asset {source.name!r} needs a {scheme} client",
                    key="assetBaseUrl",
                    value=source.url,
                    fix="configure credentials for that store, or host the assets over https or file://",
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


# --- transports ------------------------------------------------------------------------------------


def fetch_file(url: str, out: BinaryIO, offset: int) -> None:
    path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    with path.open("rb") as src:
        src.seek(offset)
        shutil.copyfileobj(src, out, CHUNK)


def http_fetcher(timeout: float = 60.0, opener: Callable[..., Any] = urllib.request.urlopen) -> Fetcher:
    def fetch(url: str, out: BinaryIO, offset: int) -> None:
        # only http(s) URLs reach this fetcher: default_fetchers registers it for those schemes
        request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})  # noqa: S310
        try:
            response = opener(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416:  # nothing left to send: the part file is already complete
                return
            raise OSError(f"HTTP {exc.code} {exc.reason}") from None
        with response:
            if offset and response.status != 206:
                out.seek(0)  # server ignored Range: start over
                out.truncate()
            shutil.copyfileobj(response, out, CHUNK)

    return fetch


def s3_fetcher(client: S3Client) -> Fetcher:
    """``s3://bucket/key`` through an injected boto3 S3 client."""

    def fetch(url: str, out: BinaryIO, offset: int) -> None:
        parts = urllib.parse.urlsplit(url)
        key = urllib.parse.unquote(parts.path.lstrip("/"))
        try:
            if offset:
                body = client.get_object(Bucket=parts.netloc, Key=key, Range=f"bytes={offset}-")["Body"]
            else:
                body = client.get_object(Bucket=parts.netloc, Key=key)["Body"]
        except Exception as exc:  # botocore's ClientError and friends
            raise OSError(f"S3 get_object failed: {exc}") from None
        shutil.copyfileobj(body, out, CHUNK)

    return fetch


def default_fetchers(s3_client: S3Client | None = None) -> dict[str, Fetcher]:
    fetchers: dict[str, Fetcher] = {"file": fetch_file, "http": http_fetcher(), "https": http_fetcher()}
    if s3_client is not None:
        fetchers["s3"] = s3_fetcher(client=s3_client)
    return fetchers
