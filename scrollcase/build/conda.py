"""Installing locked conda records into a box's environment folder with py-rattler, offline-safe.

rattler checks the digest of packages it downloads, but not of ``file://`` packages it reads from a
local channel, so :func:`verify_local_packages` checks every such file against the lock first.
Files are linked as if the environment lived at the relocation placeholder, so the build folder never
leaks into the box; :func:`scrub_conda_meta` then removes the host paths rattler records.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scrollcase.errors import BuildError, IntegrityError, Problem
from scrollcase.io.digest import sha256_file
from scrollcase.io.documents import canonical_json
from scrollcase.io.files import write_atomic
from scrollcase.lock.rattler_errors import rattler_errors

# Keys of conda-meta/<pkg>.json that name paths on the build machine (or when it indexed).
HOST_KEYS = ("extracted_package_dir", "package_tarball_full_path", "indexed_timestamp")


def local_package_path(url: str) -> Path | None:
    """The file behind a ``file://`` package URL, None for remote URLs."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parts.path))


def record_digest(record: Any) -> str | None:
    """A record's sha256 as hex (rattler exposes it as bytes)."""
    value = record.sha256
    if value is None:
        return None
    return value.hex() if isinstance(value, bytes | bytearray) else str(value)


def verify_local_packages(records: Sequence[Any], lock_file: str) -> None:
    """Every ``file://`` package must exist with exactly the size and sha256 the lock records."""
    problems = []
    for record in records:
        path = local_package_path(record.url)
        if path is None:
            continue
        problem = _package_problem(record, path, lock_file)
        if problem:
            problems.append(problem)
    if problems:
        raise IntegrityError(
            f"{len(problems)} package(s) do not match {lock_file}",
            problems=problems,
            fix="re-lock against the channel you build from (`scrollcase lock`), "
            "or restore the channel the lock was made with",
        )


def _package_problem(record: Any, path: Path, lock_file: str) -> Problem | None:
    want = record_digest(record)
    key = f"packages.{record.name.normalized}" if hasattr(record.name, "normalized") else "packages"
    if not want:
        return Problem(
            message=f"{record.file_name}: the lock records no sha256",
            file=lock_file,
            key=key,
            fix="re-lock with `scrollcase lock` so every package carries its sha256",
        )
    if not path.is_file():
        return Problem(
            message=f"{record.file_name}: package file is missing",
            file=lock_file,
            key=key,
            value=str(path),
            fix="restore the local channel the lock points to",
        )
    size = path.stat().st_size
    if record.size is not None and size != record.size:
        return Problem(
            message=f"{record.file_name}: size differs from the lock",
            file=lock_file,
            key=key,
            value=f"{size} bytes, lock says {record.size}",
        )
    got = sha256_file(path)[0]
    if got != want:
        return Problem(
            message=f"{record.file_name}: sha256 differs from the lock",
            file=lock_file,
            key=key,
            value=f"{got}, lock says {want}",
        )
    return None


def install_records(records: Sequence[Any], env: Path, *, subdir: str, cache_dir: Path, placeholder: str) -> None:
    """Link ``records`` into ``env`` as though it lived at ``placeholder``; no link scripts run."""
    import rattler

    env.parent.mkdir(parents=True, exist_ok=True)
    with rattler_errors(lambda exc: _install_error(exc, env, cache_dir)):
        asyncio.run(
            rattler.install(
                list(records),
                target_prefix=env,
                cache_dir=cache_dir,
                platform=rattler.Subdir(subdir),
                execute_link_scripts=False,
                show_progress=False,
                alternative_target_prefix=placeholder,
            )
        )
    (env / "CACHEDIR.TAG").unlink(missing_ok=True)


def _install_error(exc: Exception, env: Path, cache_dir: Path) -> BuildError:
    return BuildError(
        f"installing the environment into {env} failed",
        problems=[
            Problem(
                message=f"{type(exc).__name__}: {exc}",
                fix=f"check free disk space and the package cache {cache_dir}; delete it to start clean",
            )
        ],
    )


def scrub_record(data: dict[str, Any]) -> dict[str, Any]:
    """A conda-meta record without the build machine's paths or local channel locations."""
    out = {k: v for k, v in data.items() if k not in HOST_KEYS}
    link = out.get("link")
    if isinstance(link, dict):
        out["link"] = {k: v for k, v in link.items() if k != "source"}
    for key in ("url", "channel"):
        value = out.get(key)
        if isinstance(value, str) and value.startswith("file:"):
            out[key] = _local_channel_name(value, key)
    return out


def _local_channel_name(url: str, key: str) -> str:
    """``file:///any/where/chan/linux-64/x.tar.bz2`` -> ``local/linux-64/x.tar.bz2`` (host-free)."""
    parts = urllib.parse.urlsplit(url).path.rstrip("/").split("/")
    return "local" if key == "channel" else "local/" + "/".join(parts[-2:])


def scrub_conda_meta(env: Path) -> int:
    """Rewrite every conda-meta/*.json without host paths (temp file + rename); returns the count."""
    meta = env / "conda-meta"
    count = 0
    for path in sorted(meta.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        write_atomic(path, canonical_json(scrub_record(data)), mode=0o644)
        count += 1
    return count
