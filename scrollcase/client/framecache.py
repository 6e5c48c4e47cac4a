"""The frame cache: the frames of installed releases, kept by sha256, so an upgrade fetches only new ones.

``<user cache dir>/frames/<sha[:2]>/<sha256>`` holds the bytes of one zstd frame of an archive (see
:mod:`scrollcase.box.frames`); a frame gets that name only after its bytes hashed to it, so a file in the
cache is always right (a killed run leaves only a ``.part`` temp, removed by the next).  ``install`` fills
it from the archive it downloaded (which is also where it checks the manifest's frame table against the
archive); ``upgrade`` reads the missing frames from the store with ranged reads, checks each against the
new manifest's table as it arrives, and reassembles the archive from the cache, whose whole sha256 is
checked before anything is unpacked.  The relocated tree in DEST no longer matches the archive, so the
cache is what an installer keeps of a release.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scrollcase.box.frames import FrameLike, iter_frame_bytes, table_problems
from scrollcase.box.tarbuffer import HashingWriter
from scrollcase.client.download import make_cache_dir
from scrollcase.errors import IntegrityError
from scrollcase.io.files import cache_entry, replacing, user_cache_dir
from scrollcase.progress import MeterFactory, silent_meter
from scrollcase.store.base import ReadableStore

FRAMES = "frames"


@dataclass(frozen=True)
class FrameCache:
    root: Path

    @classmethod
    def default(cls, cache_dir: Path | None = None) -> FrameCache:
        return cls((cache_dir or user_cache_dir()) / FRAMES)

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def has(self, frame: FrameLike) -> bool:
        try:
            return self.path_for(frame.sha256).stat().st_size == frame.size
        except OSError:
            return False

    def missing(self, frames: Iterable[FrameLike]) -> list[FrameLike]:
        """The frames not in the cache (each distinct sha256 once, in archive order)."""
        seen: set[str] = set()
        out = []
        for frame in frames:
            if frame.sha256 not in seen and not self.has(frame):
                out.append(frame)
            seen.add(frame.sha256)
        return out

    @contextlib.contextmanager
    def adding(self, frame: FrameLike, source: str) -> Iterator[HashingWriter]:
        """A temp file to write ``frame``'s bytes into; it becomes the cache entry only if they hash to
        ``frame.sha256`` with ``frame.size`` bytes, else IntegrityError naming ``source``."""
        target = self.path_for(frame.sha256)
        make_cache_dir(target.parent, "frame cache")
        with cache_entry(target) as out:
            hashing = HashingWriter(out)
            yield hashing
            _check_frame(frame, hashing.sha.hexdigest(), hashing.size, source)


def _check_frame(frame: FrameLike, sha256: str, size: int, source: str) -> None:
    if size != frame.size or sha256 != frame.sha256:
        raise IntegrityError(
            f"refusing frame {frame.name!r} of {source}: {size} bytes with sha256 {sha256}, the release "
            f"manifest's frame table says {frame.size} bytes with sha256 {frame.sha256}; nothing was installed",
            fix="the store's archive and release manifest disagree, or the archive was tampered with: "
            "republish the release (or use another store)",
        )


def fill_from_archive(cache: FrameCache, archive: Path, frames: Sequence[FrameLike], size: int, source: str) -> int:
    """Put every frame of a checked ``archive`` into the cache: the install-time check of the frame
    table (IntegrityError when it disagrees with the archive); the number of frames added."""
    problems = table_problems(frames, size)
    if problems:
        raise IntegrityError(
            f"the frame table of {source} is not a table of its archive: {problems[0]}",
            fix="republish the release (or use another store)",
        )
    added = 0
    with archive.open("rb") as raw:
        for frame in frames:
            raw.seek(frame.offset)
            if cache.has(frame):
                _check_frame(frame, *_hash(iter_frame_bytes(raw, frame)), source)
                continue
            with cache.adding(frame, source) as out:
                for data in iter_frame_bytes(raw, frame):
                    out.write(data)
            added += 1
    return added


def _hash(chunks: Iterable[bytes]) -> tuple[str, int]:
    sha = hashlib.sha256()
    size = 0
    for data in chunks:
        sha.update(data)
        size += len(data)
    return sha.hexdigest(), size


def fetch_frames(
    store: ReadableStore, key: str, frames: Sequence[FrameLike], cache: FrameCache, meter: MeterFactory = silent_meter
) -> int:
    """Read each frame's byte range of ``key`` from the store into the cache, checked; the bytes fetched.

    A frame that arrives with other bytes than the table says is an IntegrityError and is not kept;
    frames fetched before a failure or a kill stay (they are right), so a rerun fetches only the rest."""
    fetched = 0
    bar = meter("downloading frames", sum(f.size for f in frames))
    for frame in frames:
        with store.read_from(key, frame.offset, frame.size) as stream, cache.adding(frame, store.url_for(key)) as out:
            for chunk in stream.chunks:
                out.write(chunk)
                fetched += len(chunk)
                bar(len(chunk))
    bar.finish()
    return fetched


def assemble(cache: FrameCache, frames: Sequence[FrameLike], out: Path, size: int, sha256: str, source: str) -> Path:
    """Concatenate the frames from the cache into ``out``; IntegrityError unless the whole is ``sha256``."""
    make_cache_dir(out.parent, "frame cache")
    with replacing(out) as partial, partial.open("xb") as raw:
        dest = HashingWriter(raw)
        for frame in frames:
            with cache.path_for(frame.sha256).open("rb") as piece:
                while data := piece.read(1 << 20):
                    dest.write(data)
        if dest.size != size or dest.sha.hexdigest() != sha256:
            raise IntegrityError(
                f"the archive reassembled from the frames of {source} is {dest.size} bytes with sha256 "
                f"{dest.sha.hexdigest()}, the release manifest says {size} bytes with sha256 {sha256}; "
                "nothing was installed",
                fix="the release manifest's frame table does not describe its archive: republish the release",
            )
    return out
