"""Make the box-format test vectors in tests/vectors/ (deterministic: the same bytes on every run).

    python -m tests.vectors.generate [--out DIR]      (from the repository root; default: tests/vectors)

Two kinds of vector (tests/vectors/README.md says how another implementation uses them):

* **valid**: a small box packed by scrollcase's own packer (one zstd frame per unit, the frame table in
  its release manifest), with the tree a host must produce for each of a few DESTs: a listing of every
  entry (type, mode, size, sha256, link target) and the exact bytes of every relocated file;
* **refused**: a hostile or broken archive (or a DEST the box cannot take) with its release manifest and
  the refusal expected: exit code, error class, the stage that refuses, a phrase of the message.

The expected trees are computed from the source tree and the relocation rules (format/relocate.py), not by
unpacking, so the test that unpacks every vector checks extraction and relocation against them.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from scrollcase.format.archive.frames import frame_table
from scrollcase.format.archive.pack import PackResult, pack_tree
from scrollcase.format.archive.packplan import plan_pack
from scrollcase.format.boxjson import BoxJson, dump_box_json
from scrollcase.format.filedigests import digest_tree
from scrollcase.format.receipt import RECEIPT, InstallReceipt, installed_modes
from scrollcase.format.release import (
    ArchiveFrame,
    ArchiveInfo,
    BuiltBy,
    CheckOutcome,
    ReleaseManifest,
    ReleaseRelocation,
    SelfTestReport,
    dump_release,
    object_keys,
    release_relocation,
)
from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER as PH
from scrollcase.format.relocate import RelocationInfo, replace_binary, replace_text, scan_prefix_files
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.documents import canonical_json
from scrollcase.recipe.model import Compatibility, SelfTest, Target

VECTORS = Path(__file__).resolve().parent
CATALOGUE = "vectors.json"
VERSION = "1.0.0"
TARGET = Target(platform="linux", arch="x86_64", accelerator="cpu")
TARGET_ID = "linux-x86_64-cpu"
FRAMES = "frames.json"  # beside a valid vector's manifest: what its frames hold
KEPT = ("README.md", "generate.py", "__init__.py")  # hand-written files of tests/vectors/, never generated
LONG_DEST = "/srv/" + "long/" * 37 + "box"  # 193 + 3 = 196 bytes: exactly the placeholder's length
TOO_LONG_DEST = "/srv/" + "too-long/" * 27 + "box"  # 251 bytes


# ---------------------------------------------------------------- the trees of the valid boxes

Tree = dict[str, bytes | str]  # path -> file bytes (mode 0644), or "->target" (a symlink), or "/" (a dir)
EXECUTABLE = {"venv/bin/python3.11", "venv/bin/tool", "venv/bin/tool-opts", "venv/bin/run.sh", "venv/bin/perl-crlf"}
LONG_NAME = "venv/lib/python3.11/site-packages/pkg/" + "a_module_with_a_name_longer_than_ustar_holds_" * 3 + ".py"


def demo_tree() -> Tree:
    """Text and binary relocation, every shebang rule, links, a pax name, a non-ASCII name, an empty folder."""
    p = PH.encode()
    elf = b"\x7fELF\x02\x01\x01" + bytes(9)
    return {
        "model-cache/org/model/config.json": b'{"model": "demo"}\n',
        "model-cache/org/model/tokenizer-\u00fc.json": b'{"vocab": ["\xc3\xbc"]}\n',
        "venv/bin/python": "->python3.11",
        "venv/bin/python3.11": elf + b"\x00RPATH=" + p + b"/venv/lib:" + p + b"/venv/lib64\x00tail\x00" + bytes(8),
        "venv/bin/tool": b"#!" + p + b"/venv/bin/python3.11\nimport sys\nprint(sys.prefix)\n",
        "venv/bin/tool-opts": b"#!" + p + b"/venv/bin/python3.11 -X pycache_prefix=" + p + b"/cache\nprint(1)\n",
        "venv/bin/run.sh": b"#!/usr/bin/env bash --init-file " + p + b"/venv/etc/rc\necho " + p + b"\n",
        "venv/bin/perl-crlf": b"#!" + p + b"/venv/bin/perl -w\r\nprint 1;\r\n",
        "venv/conda-meta/python-3.11.7-h0_0.json": json.dumps(
            {"name": "python", "files": ["bin/python3.11", "lib/libpython3.11.so"]}, sort_keys=True
        ).encode(),
        "venv/etc/rc": b"export BOX=" + p + b"\n",
        "venv/include": "/",
        "venv/lib/libpython3.11.so": p + b"/venv/lib\x00" + elf + b"\x00prefix=" + p + b"/venv",  # start and end
        "venv/lib/libpython3.11.so.1": "->libpython3.11.so",
        "venv/lib/python3.11/_sysconfigdata.py": b"build_time_vars = {'prefix': '" + p + b"/venv'}\n",
        "venv/lib/python3.11/site-packages/pkg/__init__.py": b"VERSION = '1.0'\n",
        LONG_NAME: b"LONG = True\n",
        "venv/lib/python3.11/site-packages/pkg-1.0.dist-info/METADATA": b"Name: pkg\nVersion: 1.0\n",
        "venv/lib/python3.11/site-packages/pkg-1.0.dist-info/RECORD": (
            "pkg/__init__.py,,\n" + LONG_NAME.split("site-packages/")[1] + ",,\npkg-1.0.dist-info/METADATA,,\n"
            "pkg-1.0.dist-info/RECORD,,\n"
        ).encode(),
    }


def textonly_tree() -> Tree:
    """Only text files embed the placeholder: the box takes a DEST of any length."""
    p = PH.encode()
    return {
        "venv/bin/tool": b"#!" + p + b"/venv/bin/python3.11\nprint(1)\n",
        "venv/etc/rc": b"export BOX=" + p + b"\n",
        "venv/bin/python3.11": b"#!/bin/sh\necho not really python\n",
    }


def write_tree(root: Path, tree: Tree) -> None:
    for rel, value in sorted(tree.items()):
        path = root.joinpath(*rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        if value == "/":
            path.mkdir()
        elif isinstance(value, str):
            path.symlink_to(value.removeprefix("->"))
        else:
            path.write_bytes(value)
            path.chmod(0o755 if rel in EXECUTABLE else 0o644)


# ---------------------------------------------------------------- documents


def box_id(name: str) -> str:
    return f"vec-{name}"


def archive_name(name: str) -> str:
    return f"{box_id(name)}-{VERSION}-{TARGET_ID}.tar.zst"


def make_box_json(name: str, relocation: RelocationInfo, root: Path | None = None) -> BoxJson:
    digests = digest_tree(root, skip=["box.json"]) if root is not None else None
    return BoxJson(
        boxId=box_id(name),
        modelId="vectors",
        runtimeId="python",
        version=VERSION,
        sourceRevision="tests/vectors",
        recipeId=box_id(name),
        target=TARGET,
        targetId=TARGET_ID,
        pythonVersion="3.11",
        pythonEntryPoint="venv/bin/python",
        envDir="venv",
        modelCacheSubdir="model-cache",
        weights="bundled",
        assets=[],
        selfTest=SelfTest(imports=["json"]),
        relocation=relocation,
        files=list(digests.files) if digests else [],
        links=list(digests.links) if digests else [],
    )


def make_manifest(name: str, box: BoxJson, archive: ArchiveInfo) -> ReleaseManifest:
    return ReleaseManifest(
        boxId=box.boxId,
        modelId=box.modelId,
        runtimeId=box.runtimeId,
        version=VERSION,
        sourceRevision=box.sourceRevision,
        recipeId=box.recipeId,
        recipeVersion=VERSION,
        target=TARGET,
        targetId=TARGET_ID,
        compatibility=Compatibility(minHostAppVersion="1.0.0", minRamGb=1),
        archive=archive,
        pythonEntryPoint=box.pythonEntryPoint,
        modelCacheSubdir=box.modelCacheSubdir,
        weights="bundled",
        assets=[],
        keys=object_keys(box.boxId, VERSION, TARGET_ID, archive_name(name)),
        builtBy=BuiltBy(scrollcase="0.1.0", pixi="0.40.0", lockSha256="0" * 64, pythonVersion="3.11"),
        selfTest=SelfTestReport(passed=True, checks=[CheckOutcome(name="import json", kind="import", passed=True)]),
        relocation=release_relocation(box.relocation),
    )


# ---------------------------------------------------------------- the expected tree for one DEST


def expected_tree(root: Path, relocation: RelocationInfo, dest: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the listing, the relocated files' bytes by path) of ``root`` unpacked and relocated for ``dest``."""
    placeholder, target = relocation.placeholder.encode(), dest.encode()
    rewrite = {f.path: f.mode for f in relocation.files}
    relocated: dict[str, bytes] = {}
    entries: list[dict[str, Any]] = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            entries.append({"path": rel, "type": "symlink", "target": path.readlink().as_posix()})
        elif path.is_dir():
            entries.append({"path": rel, "type": "dir", "mode": "0755"})
        else:
            data = path.read_bytes()
            if rel in rewrite:
                fix = replace_binary if rewrite[rel] == "binary" else replace_text
                data = relocated[rel] = fix(data, placeholder, target)
            entries.append(_file_entry(rel, data, 0o755 if path.stat().st_mode & 0o111 else 0o644))
    modes = {kind: {e["path"]: int(e["mode"], 8) for e in entries if e["type"] == kind} for kind in ("file", "dir")}
    receipt = _receipt(root, dest, [(f.path, relocated[f.path]) for f in relocation.files], modes)
    relocated[RECEIPT] = receipt
    entries.append(_file_entry(RECEIPT, receipt, 0o644))
    entries.sort(key=lambda e: e["path"])
    return {"dest": dest, "entries": entries, "relocated": sorted(relocated)}, relocated


def _file_entry(rel: str, data: bytes, mode: int) -> dict[str, Any]:
    return {"path": rel, "type": "file", "mode": f"{mode:04o}", "size": len(data), "sha256": sha256_bytes(data)}


def _receipt(root: Path, dest: str, relocated: list[tuple[str, bytes]], modes: dict[str, dict[str, int]]) -> bytes:
    """box.installed.json as unpack writes it: box.json's digest, then each relocated file's, in box.json's order,
    and the modes of the files and folders (``modes["file"]``, ``modes["dir"]``: path -> permission bits)."""
    box = (root / "box.json").read_bytes()
    files = [{"path": p, "size": len(d), "sha256": sha256_bytes(d)} for p, d in relocated]
    receipt = InstallReceipt.model_validate(
        {
            "dest": dest,
            "boxJson": {"path": "box.json", "size": len(box), "sha256": sha256_bytes(box)},
            "relocated": files,
            "modes": installed_modes(modes["file"], modes["dir"]),
        }
    )
    return canonical_json(receipt.model_dump(mode="json"))


# ---------------------------------------------------------------- valid vectors


@dataclass(frozen=True)
class Install:
    label: str
    dest: str
    why: str


@dataclass(frozen=True)
class Valid:
    name: str
    description: str
    tree: Callable[[], Tree]
    installs: tuple[Install, ...]


VALID = (
    Valid(
        "demo",
        "text and binary relocation (C strings at the start, middle and end of a file), every shebang rule, "
        "symlinks, a pax long name, a non-ASCII name, an empty folder; DEST at most 196 bytes",
        demo_tree,
        (
            Install("short", "/srv/box", "shebangs stay plain lines; binary strings padded with NULs"),
            Install("spaced", "/srv/My Boxes/it's $HOME", "a space, a quote and a $: trampolines and env -S"),
            Install("longest", LONG_DEST, "196 bytes, the longest this box allows: shebangs over 127 bytes"),
        ),
    ),
    Valid(
        "textonly",
        "only text files embed the placeholder: no DEST limit (the manifest has no relocation.maxDestBytes)",
        textonly_tree,
        (Install("beyond-placeholder", "/srv/" + "x" * 295, "300 bytes, longer than the placeholder"),),
    ),
)


def make_valid(out: Path, vector: Valid) -> dict[str, Any]:
    folder = out / vector.name
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="scrollcase-vectors-") as tmp:
        root = Path(tmp) / "tree"
        write_tree(root, vector.tree())
        relocation = RelocationInfo(placeholder=PH, files=scan_prefix_files(root, PH))
        (root / "box.json").write_bytes(dump_box_json(make_box_json(vector.name, relocation, root)))
        packed = pack_tree(root, folder / archive_name(vector.name))
        frames = folder / FRAMES
        frames.write_bytes(canonical_json(frame_contents(root, packed)))
        box = make_box_json(vector.name, relocation, root)
        info = ArchiveInfo(
            name=packed.path.name, size=packed.size, sha256=packed.sha256, frames=frame_table(packed.frames)
        )
        manifest = make_manifest(vector.name, box, info)
        release = folder / manifest.keys.release.rsplit("/", 1)[1]
        release.write_bytes(dump_release(manifest))
        installs = [_write_install(folder, root, relocation, install) for install in vector.installs]
    return {
        "name": vector.name,
        "kind": "valid",
        "description": vector.description,
        "release": release.relative_to(out).as_posix(),
        "archive": packed.path.relative_to(out).as_posix(),
        "frames": frames.relative_to(out).as_posix(),
        "installs": installs,
    }


def frame_contents(root: Path, packed: PackResult) -> dict[str, Any]:
    """``frames.json``: the tar stream all frames decompress to (size, sha256), and per frame of the table
    the members the packer planned for it (docs/format.md §3.2), for a reader that ignores frames and one
    that decompresses each frame on its own (tests/unit/format/test_format_doc.py runs both)."""
    data = packed.path.read_bytes()
    stream = b"".join(
        zstandard.ZstdDecompressor().decompress(data[f.offset : f.offset + f.size]) for f in packed.frames
    )
    planned = {unit.name: unit.members for unit in plan_pack(root).units}
    rows = [
        {
            "name": frame.name,
            "uncompressedSize": frame.uncompressed_size,
            "members": [{"path": m.name, "type": m.kind} for m in planned.get(frame.name, ())],
        }
        for frame in packed.frames
    ]
    return {"stream": {"size": len(stream), "sha256": sha256_bytes(stream)}, "frames": rows}


def _write_install(folder: Path, root: Path, relocation: RelocationInfo, install: Install) -> dict[str, Any]:
    listing, relocated = expected_tree(root, relocation, install.dest)
    expected = folder / "expected"
    expected.mkdir(exist_ok=True)
    (expected / f"{install.label}.json").write_bytes(canonical_json(listing))
    for rel, data in relocated.items():
        path = expected.joinpath(install.label, *rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    base = folder.name + "/expected/" + install.label
    return {"label": install.label, "dest": install.dest, "why": install.why, "expected": base + ".json", "files": base}


# ---------------------------------------------------------------- refused vectors

Member = tuple[tarfile.TarInfo, bytes | None]


def _info(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "", mode: int = 0o644
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)  # mtime 0, uid/gid 0, empty uname/gname: as scrollcase writes them
    info.type, info.size, info.linkname, info.mode = kind, size, link, mode
    return info


def _file(name: str, data: bytes) -> Member:
    return _info(name, size=len(data)), data


def _dir(name: str) -> Member:
    return _info(name, tarfile.DIRTYPE, mode=0o755), None


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> Member:
    return _info(name, kind, link=target, mode=0o777 if kind == tarfile.SYMTYPE else 0o644), None


def hostile_archive(name: str, members: list[Member]) -> bytes:
    """A valid box.json first (so the refusal is about the members that follow), then ``members``."""
    box = dump_box_json(make_box_json(name, RelocationInfo(placeholder=PH, files=[])))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in [_file("box.json", box), _dir("venv"), *members]:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return zstandard.ZstdCompressor(level=3, write_checksum=False).compress(raw.getvalue())


def bad_zstd(name: str) -> bytes:
    """A zstd frame header with its reserved bit set, after the magic: no decoder may accept it."""
    return bytes.fromhex("28b52ffd") + b"\x08" + b"scrollcase test vector: not a zstd frame\n"


def trailing_data(name: str) -> bytes:
    return hostile_archive(name, [_file("venv/a.txt", b"a\n")]) + b"trailing bytes that are not a zstd frame\n"


ZEROS = 65 << 20  # past the 64 MiB floor of the 200x ratio limit, from an archive of a few KiB


@dataclass(frozen=True)
class Refused:
    name: str
    description: str
    stage: str  # dest (before downloading) | frames (the table against the archive) | box.json (against the
    # manifest, before extracting) | unpack (extracting)
    error: str
    exit_code: int
    phrase: str  # a phrase of scrollcase's message (its wording: other implementations match the class)
    archive: Callable[[str], bytes] | None = None  # None: the demo vector's archive
    members: list[Member] = field(default_factory=list)
    dest: str = "/srv/box"
    member: str | None = None  # the member refused, as the archive names it


def unsafe(name: str, description: str, member: str, rule: str, members: list[Member]) -> Refused:
    """An archive unpack refuses for one member: IntegrityError, exit 8, naming the member and the rule."""
    return Refused(name, description, "unpack", "IntegrityError", 8, rule, members=members, member=member)


_OUT, _UP = "vectors-escape.txt", "symlink points outside the archive root"
REFUSED = (
    unsafe(
        "path-traversal",
        "a member named ../x",
        f"../{_OUT}",
        "'..' component (path traversal)",
        [_file(f"../{_OUT}", b"outside\n")],
    ),
    unsafe(
        "path-traversal-inner",
        "a name that climbs out after a folder: venv/../../x",
        f"venv/../../{_OUT}",
        "'..' component (path traversal)",
        [_file(f"venv/../../{_OUT}", b"outside\n")],
    ),
    unsafe(
        "absolute-name",
        "a member with an absolute name",
        f"/tmp/{_OUT}",
        "absolute path",
        [_file(f"/tmp/{_OUT}", b"outside\n")],
    ),
    unsafe(
        "symlink-escape",
        "a relative symlink that points outside the root",
        "venv/escape",
        _UP,
        [_link("venv/escape", "../../outside")],
    ),
    unsafe(
        "symlink-absolute",
        "a symlink to an absolute path",
        "venv/etc",
        "symlink target is an absolute path",
        [_link("venv/etc", "/etc")],
    ),
    unsafe(
        "symlink-chain-escape",
        "links inside one by one that escape when followed: venv/up -> .., venv/up2 -> up/..",
        "venv/up2",
        _UP,
        [_link("venv/up", ".."), _link("venv/up2", "up/..")],
    ),
    unsafe(
        "hardlink-outside",
        "a hardlink to a file outside the archive",
        "venv/hard",
        "hardlink target",
        [_link("venv/hard", "../outside.txt", tarfile.LNKTYPE)],
    ),
    unsafe(
        "duplicate-name",
        "the same name twice",
        "venv/a.txt",
        "duplicate member",
        [_file("venv/a.txt", b"first\n"), _file("venv/a.txt", b"second\n")],
    ),
    unsafe(
        "through-symlink",
        "a symlinked folder inside the root, then a file written through it",
        "venv/lib/x.txt",
        "which is a symlink, not a directory",
        [_dir("venv/real"), _link("venv/lib", "real"), _file("venv/lib/x.txt", b"through\n")],
    ),
    unsafe(
        "device",
        "a character device member",
        "venv/null",
        "member type device is not allowed",
        [(_info("venv/null", tarfile.CHRTYPE), None)],
    ),
    unsafe(
        "oversize",
        f"{ZEROS >> 20} MiB of zeros from a few KiB: past the 200x ratio limit (64 MiB floor)",
        "venv/zeros.bin",
        "a decompression bomb?",
        [_file("venv/zeros.bin", bytes(ZEROS))],
    ),
    Refused(
        "bad-zstd",
        "zstd magic, then a frame header with its reserved bit set",
        "unpack",
        "IntegrityError",
        8,
        "zstd frame header",
        archive=bad_zstd,
    ),
    Refused(
        "trailing-data",
        "a valid archive followed by bytes that are not a zstd frame",
        "unpack",
        "IntegrityError",
        8,
        "data after the end of the zstd frame",
        archive=trailing_data,
    ),
    Refused(
        "wrong-sha256",
        "an archive whose sha256 is not the manifest's",
        "unpack",
        "IntegrityError",
        8,
        "sha256 is",
        members=[_file("venv/a.txt", b"a\n")],
    ),
    Refused(
        "frame-table",
        "the demo archive, with a manifest whose frame table gives the box.json frame another sha256",
        "frames",
        "IntegrityError",
        8,
        "frame table",
    ),
    Refused(
        "relocation-disagrees",
        "the demo archive, with a manifest that allows a longer DEST (250 bytes) than its box.json (196)",
        "box.json",
        "IntegrityError",
        8,
        "box.json and the release manifest disagree",
    ),
    Refused(
        "dest-too-long",
        "the demo box (binary relocation) into a 251-byte DEST",
        "dest",
        "BuildError",
        5,
        "unpack into a shorter path (at most 196 bytes)",
        dest=TOO_LONG_DEST,
    ),
)


def make_refused(out: Path, vector: Refused, demo: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": vector.name,
        "kind": "refused",
        "description": vector.description,
        "dest": vector.dest,
        "refusal": {
            "stage": vector.stage,
            "error": vector.error,
            "exitCode": vector.exit_code,
            "phrase": vector.phrase,
            **({"member": vector.member} if vector.member else {}),
        },
    }
    if vector.stage == "dest":
        return {**entry, "release": demo["release"], "archive": demo["archive"]}
    folder = out / vector.name
    folder.mkdir(parents=True)
    if vector.stage in ("frames", "box.json"):
        release, archive = _edited_demo(out, folder, demo, vector.stage)
    else:
        release, archive = _own_archive(folder, vector)
    return {**entry, "release": release.relative_to(out).as_posix(), "archive": archive.relative_to(out).as_posix()}


def _own_archive(folder: Path, vector: Refused) -> tuple[Path, Path]:
    data = vector.archive(vector.name) if vector.archive else hostile_archive(vector.name, vector.members)
    archive = folder / archive_name(vector.name)
    archive.write_bytes(data)
    sha256 = sha256_bytes(b"the archive this manifest was written for" if vector.name == "wrong-sha256" else data)
    box = make_box_json(vector.name, RelocationInfo(placeholder=PH, files=[]))
    manifest = make_manifest(vector.name, box, ArchiveInfo(name=archive.name, size=len(data), sha256=sha256))
    release = folder / manifest.keys.release.rsplit("/", 1)[1]
    release.write_bytes(dump_release(manifest))
    return release, archive


def _edited_demo(out: Path, folder: Path, demo: dict[str, Any], stage: str) -> tuple[Path, Path]:
    """The demo archive as it is, beside its manifest edited: a frame with another sha256 (stage frames),
    or a longer DEST limit than box.json's relocation gives (stage box.json)."""
    source = out / demo["archive"]
    archive = folder / source.name
    shutil.copyfile(source, archive)
    manifest = ReleaseManifest.model_validate_json((out / demo["release"]).read_bytes())
    if stage == "frames":
        frames = list(manifest.archive.frames or [])
        frames[1] = ArchiveFrame.model_validate({**frames[1].model_dump(), "sha256": sha256_bytes(b"another frame")})
        manifest = manifest.model_copy(update={"archive": manifest.archive.model_copy(update={"frames": frames})})
    else:
        limit = ReleaseRelocation(placeholderBytes=196, maxDestBytes=250)
        manifest = manifest.model_copy(update={"relocation": limit})
    release = folder / (out / demo["release"]).name
    release.write_bytes(dump_release(manifest))
    return release, archive


# ---------------------------------------------------------------- the catalogue


def generate(out: Path) -> Path:
    """Write every vector and ``vectors.json`` into ``out`` (its generated content replaced)."""
    out.mkdir(parents=True, exist_ok=True)
    for child in out.iterdir():
        if child.name not in KEPT and child.name != "__pycache__":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    valid = [make_valid(out, vector) for vector in VALID]
    refused = [make_refused(out, vector, valid[0]) for vector in REFUSED]
    catalogue = {
        "schemaVersion": 1,
        "placeholder": PH,
        "generator": "tests/vectors/generate.py",
        "vectors": valid + refused,
    }
    path = out / CATALOGUE
    path.write_bytes(canonical_json(catalogue))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=VECTORS, help="folder to write (default: tests/vectors)")
    args = parser.parse_args(argv)
    print(f"wrote {generate(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
