"""A release repacked from another: its archive unpacked, changed (a planted file, another version in box.json),
packed again, and a manifest whose archive facts, keys and version match — what a publisher would make of a new
version, or an attacker with write access to a store of a planted one (the digests all consistent)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import pack_tree
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.boxjson import dump_box_json, parse_box_json
from scrollcase.format.release import ReleaseManifest, dump_release, load_release, object_keys

RECEIPT = "box.installed.json"


def repack(
    manifest_path: Path, work: Path, *, version: str | None = None, plant: Mapping[str, bytes] | None = None
) -> tuple[ReleaseManifest, Path]:
    """The release of ``manifest_path`` (its archive and SBOM beside it) repacked in ``work``: ``plant`` adds files
    (tree-relative path -> bytes), ``version`` renames it (box.json, manifest, keys, file names).  Returns the
    manifest and the archive path; the manifest file and the SBOM lie beside the archive, as a build leaves them."""
    old = load_release(manifest_path)
    tree = work / "tree"
    archive = manifest_path.with_name(old.archive.name)
    unpack_archive(archive, tree, expected_size=old.archive.size, expected_sha256=old.archive.sha256)
    (tree / RECEIPT).unlink(missing_ok=True)
    for rel, data in (plant or {}).items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_bytes(data)
    new_version = version or old.version
    name = old.archive.name.replace(old.version, new_version)
    if version is not None:
        box = parse_box_json((tree / "box.json").read_bytes(), file="box.json")
        (tree / "box.json").write_bytes(dump_box_json(box.model_copy(update={"version": version})))
    out = work / "dist"
    packed = pack_tree(tree, out / name, level=1)
    info = old.archive.model_copy(
        update={"name": name, "size": packed.size, "sha256": packed.sha256, "frames": frame_table(packed.frames)}
    )
    update: dict[str, object] = {"archive": info, "version": new_version}
    update["keys"] = object_keys(old.boxId, new_version, old.targetId, name)
    if old.sbom is not None:
        sbom_name = old.sbom.name.replace(old.version, new_version)
        shutil.copyfile(manifest_path.with_name(old.sbom.name), out / sbom_name)
        update["sbom"] = old.sbom.model_copy(update={"name": sbom_name})
    manifest = old.model_copy(update=update)
    (out / name.replace(".tar.zst", ".release.json")).write_bytes(dump_release(manifest))
    shutil.rmtree(tree)
    return manifest, packed.path
