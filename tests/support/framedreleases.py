"""Framed releases for the publish tests: a real framed archive (one zstd frame per package, its frame
table in the manifest) of a box shaped like tests/support/framedbox.py, whose box.json matches the manifest."""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.boxjson import dump_box_json
from scrollcase.format.release import dump_release
from tests.support.framedbox import SITE, make_framed_box
from tests.support.releases import SyntheticRelease, box_json_for, make_manifest

BOX = "reuse-box"


def write_framed_release(
    work: Path,
    version: str,
    *,
    payload: int = 2_000_000,
    packages: int = 8,
    rewritten: Iterable[int] = (),
) -> SyntheticRelease:
    """Release ``version`` of the box: ``packages`` wheels of ``payload`` incompressible bytes each; ``pkg0``
    holds the version (so it differs between versions) and the packages in ``rewritten`` get new bytes too."""
    draft = make_manifest(box_id=BOX, version=version, cuda=None, size=0, sha256="0" * 64)
    tree = make_framed_box(work / f"tree-{version}", version=version, payload=payload, packages=packages)
    for n in rewritten:
        (tree / SITE / f"pkg{n}" / "data.bin").write_bytes(random.Random(f"{version}-{n}").randbytes(payload))
    (tree / "box.json").write_bytes(dump_box_json(box_json_for(draft)))
    packed = pack_tree(tree, work / f"dist-{version}" / draft.archive.name, level=1)
    archive = draft.archive.model_copy(
        update={"size": packed.size, "sha256": packed.sha256, "frames": frame_table(packed.frames)}
    )
    manifest = draft.model_copy(update={"archive": archive})
    path = packed.path.with_name(archive.name.removesuffix(".tar.zst") + ".release.json")
    path.write_bytes(dump_release(manifest))
    return SyntheticRelease(manifest, path, packed.path)


def new_frame_bytes(old: SyntheticRelease, new: SyntheticRelease) -> int:
    """The compressed bytes of the frames of ``new`` that ``old`` lacks (by digest and size)."""
    have = {(f.sha256, f.size) for f in old.manifest.archive.frames or []}
    return sum(f.size for f in new.manifest.archive.frames or [] if (f.sha256, f.size) not in have)
