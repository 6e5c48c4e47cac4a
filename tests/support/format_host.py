"""A minimal host installer written from docs/format.md alone ("A minimal host, in order"), the way a C#,
Rust or Electron host app would be: Python's ``tarfile`` and ``zstandard``, never ``scrollcase``.

It is the proof of docs/format.md's promise: what it installs is byte for byte what ``scrollcase unpack``
installs, and ``scrollcase verify --installed`` accepts it (tests/integration/test_format_host.py on the demo
box, tests/unit/format/test_format_doc.py on the test vectors).  Where this file needed anything the page does not
say, the page was wrong: fix the page, then this file.  Each step names the section it follows.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import posixpath
import re
import shutil
import stat
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

ZSTD_MAGIC = bytes.fromhex("28b52ffd")  # §3.1
RECEIPT = "box.installed.json"  # §7
MAX_MEMBERS, MAX_BYTES, MAX_RATIO, RATIO_FLOOR = 1_000_000, 512 << 30, 200, 64 << 20  # §3.4
MAX_AFTER_END = 1 << 20  # §3.4, End
SHARED_FIELDS = ("boxId", "version", "target", "targetId", "pythonEntryPoint", "modelCacheSubdir", "gpu")  # §4
STAGES = ("dest", "frames", "box.json", "unpack")  # tests/vectors/README.md: the order refusals happen in


class Refused(Exception):
    """The host refuses the release at ``stage`` (one of STAGES); nothing is left at DEST."""

    def __init__(self, stage: str, why: str) -> None:
        super().__init__(f"{stage}: {why}")
        self.stage = stage


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(value: object) -> bytes:
    """§1 and §7: sorted keys, two-space indent, non-ASCII escaped, a trailing newline."""
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")


# ---------------------------------------------------------------- steps 1-4: index, DEST, manifest, archive


def install_from_store(store: Path, box_id: str, target_id: str, dest: Path) -> Path:
    """Steps 1-11 from a folder store (§1): the newest release of ``box_id`` for ``target_id``."""
    index = json.loads((store / "boxes" / box_id / "index.json").read_bytes())
    if index.get("schemaVersion") != 1:  # §9
        raise Refused("dest", "unknown index schemaVersion")
    version = max((v for v, t in index["versions"].items() if target_id in t), key=_semver)  # §5, simplified
    entry = index["versions"][version][target_id]
    where = dest_text(dest)
    check_dest_length(where, entry.get("relocation"))  # step 2
    manifest_bytes = (store / entry["release"]).read_bytes()  # step 3
    if "releaseSha256" in entry and sha256(manifest_bytes) != entry["releaseSha256"]:
        raise Refused("dest", "the manifest's sha256 is not the index entry's releaseSha256")
    manifest = json.loads(manifest_bytes)
    archive = manifest["archive"]
    pairs = [
        (manifest["boxId"], index["boxId"]),
        (manifest["version"], version),
        (manifest["targetId"], target_id),
        (archive["sha256"], entry["sha256"]),
        (archive["size"], entry["size"]),
        (manifest["keys"]["archive"], entry["archive"]),
    ]
    if "relocation" in entry:
        pairs.append((manifest.get("relocation"), entry["relocation"]))
    if any(a != b for a, b in pairs):
        raise Refused("dest", "the manifest disagrees with its index entry")
    return install_release(manifest, store / entry["archive"], dest, where)


def _semver(version: str) -> tuple[int, ...]:
    core = version.split("-", 1)[0].split("+", 1)[0]
    return tuple(int(p) for p in core.split("."))


def dest_text(dest: Path) -> str:
    """§6: DEST's absolute path as given (lexical), a symlink before a ``..`` resolved first."""
    given = os.path.abspath(dest)
    real_parent = os.path.realpath(dest.parent)
    if os.path.realpath(os.path.dirname(given)) != real_parent:
        given = os.path.join(real_parent, dest.name)
    return Path(given).as_posix()


def check_dest_length(dest: str, relocation: dict[str, Any] | None) -> None:
    """Step 2 (§6): a DEST longer than ``maxDestBytes`` is refused before anything is downloaded."""
    if "\n" in dest or "\r" in dest:
        raise Refused("dest", "DEST contains a line break")
    limit = (relocation or {}).get("maxDestBytes")
    if limit is not None and len(dest.encode("utf-8")) > limit:
        raise Refused("dest", f"DEST is {len(dest.encode())} bytes, the box allows {limit}")


def install_release(manifest: dict[str, Any], archive_path: Path, dest: Path, relocate_for: str | None = None) -> Path:
    """Steps 2 and 4-11 for a manifest and its archive; ``relocate_for``: the DEST the files name, when the
    tree is unpacked elsewhere (the vectors: unpack anywhere, relocate for their DEST)."""
    if manifest.get("schemaVersion") != 1:  # §9
        raise Refused("dest", "unknown manifest schemaVersion")
    where = relocate_for if relocate_for is not None else dest_text(dest)
    check_dest_length(where, manifest.get("relocation"))
    data = archive_path.read_bytes()  # step 4 (a real host streams it; the vectors and demo box are small)
    archive = manifest["archive"]
    if len(data) != archive["size"] or sha256(data) != archive["sha256"]:
        raise Refused("unpack", "the archive's size or sha256 is not the manifest's")
    frames = archive.get("frames")
    if archive.get("frameFormat", 1) != 1:  # step 5, §9: absent means 1
        raise Refused("frames", "unknown archive.frameFormat")
    if frames:  # step 5
        check_frame_table(data, frames, archive["size"])
    box = json.loads(read_box_json(data, frames))
    check_box_json(box, manifest)  # step 6, before extracting
    tmp = dest.parent / f".{dest.name}.{uuid.uuid4().hex}.host"
    tmp.mkdir(parents=True)
    try:
        extract(data, tmp)  # steps 7-8
        relocated = relocate_tree(tmp, box["relocation"], where)  # step 9
        write_receipt(tmp, where, relocated)  # step 10
        tmp.chmod(0o755)
        os.rename(tmp, dest)  # step 11 (an empty DEST folder would need a swap; the tests use a new one)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# ---------------------------------------------------------------- step 5: the frame table (§3.3)


def check_frame_table(data: bytes, frames: list[dict[str, Any]], size: int) -> None:
    position, names = 0, set()
    for row in frames:
        if row["offset"] != position or row["size"] <= 0 or row["name"] in names:
            raise Refused("frames", f"frame {row['name']!r}: the table does not cover the archive")
        names.add(row["name"])
        frame = data[position : position + row["size"]]
        if not frame.startswith(ZSTD_MAGIC) or sha256(frame) != row["sha256"]:
            raise Refused("frames", f"frame {row['name']!r} is not the table's")
        position += row["size"]
    if position != size or position != len(data):
        raise Refused("frames", "the frames do not end at the archive's size")


def frame_bytes(data: bytes, row: dict[str, Any]) -> bytes:
    """One frame decompressed on its own (§3.2: a whole number of tar members)."""
    return zstandard.ZstdDecompressor().decompress(data[row["offset"] : row["offset"] + row["size"]])


# ---------------------------------------------------------------- step 6: box.json (§4)


def read_box_json(data: bytes, frames: list[dict[str, Any]] | None) -> bytes:
    """box.json from its own frame (§3.2, §3.3), or from the start of the stream without a table."""
    if frames:
        row = next((f for f in frames if f["name"] == "box.json"), None)
        if row is None:
            raise Refused("box.json", "the frame table has no box.json frame")
        source: Any = io.BytesIO(frame_bytes(data, row) + bytes(1024))
    else:
        source = _stream(data)
    try:
        with tarfile.open(fileobj=source, mode="r|") as tar:
            for member in tar:
                if member.name == "box.json" and member.isfile():
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    return extracted.read()
    except (tarfile.TarError, zstandard.ZstdError) as exc:
        raise Refused("unpack", f"cannot read the archive: {exc}") from None
    raise Refused("box.json", "the archive has no box.json")


def check_box_json(box: dict[str, Any], manifest: dict[str, Any]) -> None:
    if box.get("schemaVersion") != 1:
        raise Refused("box.json", "unknown box.json schemaVersion")
    differ = [key for key in SHARED_FIELDS if box.get(key) != manifest.get(key)]
    if manifest.get("relocation") is not None and summary(box["relocation"]) != manifest["relocation"]:
        differ.append("relocation")
    if differ:
        raise Refused("box.json", f"box.json and the manifest disagree on {differ}")


def summary(relocation: dict[str, Any]) -> dict[str, int]:
    """§2/§6: the manifest's relocation from box.json's: the placeholder's bytes, and the DEST limit when a
    binary file embeds it."""
    size = len(relocation["placeholder"].encode("utf-8"))
    binary = any(f["mode"] == "binary" for f in relocation["files"])
    return {"placeholderBytes": size, "maxDestBytes": size} if binary else {"placeholderBytes": size}


# ---------------------------------------------------------------- steps 7-8: the stream and its members (§3)


def _stream(data: bytes) -> Any:
    """Step 7: every frame, in order, as one stream (§3.1): a plain zstd stream reader."""
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)


@dataclass
class _Tree:
    root: Path
    budget: int
    kinds: dict[str, str]
    links: dict[str, str]
    declared: int = 0


def extract(data: bytes, root: Path) -> None:
    budget = min(MAX_BYTES, max(RATIO_FLOOR, MAX_RATIO * len(data)))
    tree = _Tree(root, budget, {}, {})
    stream = _stream(data)
    try:
        with tarfile.open(fileobj=stream, mode="r|", format=tarfile.PAX_FORMAT) as tar:
            for member in tar:
                _extract_member(tar, member, tree)
        after = 0
        while chunk := stream.read(1 << 16):  # §3.4, End: what follows the end marker, bounded
            after += len(chunk)
            if after > MAX_AFTER_END:
                raise Refused("unpack", "more than 1 MiB after the end-of-archive marker")
    except (tarfile.TarError, zstandard.ZstdError) as exc:
        raise Refused("unpack", f"not a valid archive: {exc}") from None
    for name in tree.links:
        if _resolve(name, tree.links) is None:
            raise Refused("unpack", f"symlink {name} points outside the root")


def _member_name(raw: str) -> str:
    """§3.4, Names."""
    name = raw.rstrip("/") if raw.endswith("/") else raw
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or "\0" in name or re.match(r"^[A-Za-z]:", name):
        raise Refused("unpack", f"member {raw!r}: not a relative name")
    if ".." in parts or "" in parts or "." in parts:
        raise Refused("unpack", f"member {raw!r}: a '..', '.' or empty component")
    return name


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, tree: _Tree) -> None:
    name = _member_name(member.name)
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise Refused("unpack", f"member {name}: type not allowed")
    if name in tree.kinds or len(tree.kinds) >= MAX_MEMBERS:
        raise Refused("unpack", f"member {name}: a duplicate, or too many members")
    tree.declared += member.size + 512
    if tree.declared > tree.budget:
        raise Refused("unpack", f"member {name}: past the size limit (a decompression bomb?)")
    parent = posixpath.dirname(name)
    _make_parents(parent, tree)
    path = tree.root.joinpath(*name.split("/"))
    if member.isdir():
        path.mkdir(mode=0o755)
        path.chmod(0o755)
    elif member.issym():
        if member.linkname.startswith("/") or _resolve(name, {**tree.links, name: member.linkname}) is None:
            raise Refused("unpack", f"symlink {name} points outside the root")
        tree.links[name] = member.linkname
        os.symlink(member.linkname, path)
    elif member.islnk():
        source = _member_name(member.linkname)
        if tree.kinds.get(source) != "file":
            raise Refused("unpack", f"hardlink {name}: not to an earlier regular file")
        shutil.copyfile(tree.root.joinpath(*source.split("/")), path)
    else:
        extracted = tar.extractfile(member)
        assert extracted is not None
        with open(path, "xb") as out:
            shutil.copyfileobj(extracted, out, 1 << 20)
        path.chmod(0o755 if member.mode & 0o111 else 0o644)  # §3.4, Fixed fields
    tree.kinds[name] = "dir" if member.isdir() else "symlink" if member.issym() else "file"


def _make_parents(parent: str, tree: _Tree) -> None:
    """A member's folders: implied ones made, none of them a symlink or a file (§3.4, Refuse)."""
    if not parent:
        return
    kind = tree.kinds.get(parent)
    if kind == "dir":
        return
    if kind is not None:
        raise Refused("unpack", f"a member below {parent}, which is a {kind}")
    _make_parents(posixpath.dirname(parent), tree)
    tree.root.joinpath(*parent.split("/")).mkdir(mode=0o755)
    tree.kinds[parent] = "dir"


def _resolve(name: str, links: dict[str, str]) -> list[str] | None:
    """Where the symlink ``name`` leads, following the archive's own links; None when it leaves the root."""
    return _walk(posixpath.dirname(name).split("/") + links[name].split("/"), links, 0)


def _walk(parts: list[str], links: dict[str, str], depth: int) -> list[str] | None:
    out: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                return None
            out.pop()
            continue
        key = "/".join([*out, part])
        if key in links:
            if depth > 40 or links[key].startswith("/"):
                return None
            found = _walk([*out, *links[key].split("/")], links, depth + 1)
            if found is None:
                return None
            out = found
        else:
            out.append(part)
    return out


# ---------------------------------------------------------------- step 9: relocation (§6, archive.md)

SAFE_WORD = re.compile(rb"[A-Za-z0-9_@%+=:,./-]+")
BLANK = re.compile(rb"[ \t\r\n]")


def relocate_tree(root: Path, relocation: dict[str, Any], dest: str) -> list[dict[str, Any]]:
    """Each file of ``relocation.files`` rewritten through a temp file and a rename, mode kept; returns the
    receipt's ``relocated`` rows, in the list's order (§7)."""
    placeholder, new = relocation["placeholder"].encode("utf-8"), dest.encode("utf-8")
    if any(f["mode"] == "binary" for f in relocation["files"]) and len(new) > len(placeholder):
        raise Refused("dest", "DEST is longer than the placeholder")
    rows = []
    for item in relocation["files"]:
        path = root.joinpath(*item["path"].split("/"))
        data = path.read_bytes()
        fix = relocate_binary if item["mode"] == "binary" else relocate_text
        data = fix(data, placeholder, new)
        temp = path.with_name(path.name + ".host-relocating")
        temp.write_bytes(data)
        temp.chmod(path.stat().st_mode & 0o777)
        os.replace(temp, path)
        rows.append({"path": item["path"], "size": len(data), "sha256": sha256(data)})
    return rows


def relocate_binary(data: bytes, placeholder: bytes, new: bytes) -> bytes:
    """From each placeholder up to the next NUL (or the end): every placeholder replaced, NULs appended."""
    pad = len(placeholder) - len(new)

    def one(match: re.Match[bytes]) -> bytes:
        run = match.group(0)
        return run.replace(placeholder, new) + bytes(pad * run.count(placeholder))

    return re.sub(re.escape(placeholder) + rb"[^\x00]*", one, data)


def relocate_text(data: bytes, placeholder: bytes, new: bytes) -> bytes:
    """Every placeholder replaced; then archive.md's shebang rule on a first line that held one."""
    end = data.find(b"\n")
    line, rest = (data, b"") if end < 0 else (data[:end], data[end:])
    rest = rest.replace(placeholder, new)
    if not line.startswith(b"#!") or placeholder not in line:
        return line.replace(placeholder, new) + rest
    body, cr = (line[:-1], b"\r") if line.endswith(b"\r") else (line, b"")
    replaced = body.replace(placeholder, new) + cr
    if len(replaced) <= 127 and not BLANK.search(new):
        return replaced + rest
    words = [w.replace(placeholder, new) for w in re.split(rb"[ \t]+", body[2:].strip(b" \t"))]
    if _runs_python(words):
        quoted = b" ".join(_sh_quote(w) for w in words)
        return b"#!/bin/sh\n'''exec' " + quoted + b' "$0" "$@"\n' + b"' '''" + cr + rest
    return _env_line(words) + cr + rest


def _runs_python(words: list[bytes]) -> bool:
    name = words[0].rsplit(b"/", 1)[-1]
    if name == b"env":
        after = [w for w in words[1:] if not w.startswith(b"-") and b"=" not in w]
        return bool(after) and after[0].rsplit(b"/", 1)[-1].startswith(b"python")
    return name.startswith(b"python")


def _sh_quote(word: bytes) -> bytes:
    if SAFE_WORD.fullmatch(word):
        return word
    return b"'" + word.replace(b"'", b"'\"'\"'").replace(b"\\", b"'\\\\'") + b"'"


def _env_quote(word: bytes) -> bytes:
    if SAFE_WORD.fullmatch(word):
        return word
    return b"'" + word.replace(b"\\", b"\\\\").replace(b"'", b"\\'") + b"'"


def _env_line(words: list[bytes]) -> bytes:
    """``#!/usr/bin/env NAME`` or ``#!/usr/bin/env -S NAME ARG...``: an ``env`` interpreter kept as written
    (``/usr/bin/env`` when its path has a blank), an ``-S`` after it dropped, added back when needed."""
    if words[0].rsplit(b"/", 1)[-1] == b"env":
        interpreter = b"/usr/bin/env" if BLANK.search(words[0]) else words[0]
        rest = words[1:]
    else:
        interpreter, rest = b"/usr/bin/env", [words[0].rsplit(b"/", 1)[-1], *words[1:]]
    if rest[:1] == [b"-S"]:
        rest = rest[1:]
    if len(rest) <= 1 and all(SAFE_WORD.fullmatch(w) for w in rest):
        return b"#!" + b" ".join([interpreter, *rest])
    return b"#!" + interpreter + b" -S " + b" ".join(_env_quote(w) for w in rest)


# ---------------------------------------------------------------- step 10: the install receipt (§7)


def installed_modes(root: Path) -> dict[str, Any]:
    """§7's ``modes``: the most common file and folder modes (a tie: the lower), and every other entry's."""
    found: dict[str, dict[str, int]] = {"file": {}, "dir": {}}
    for path in root.rglob("*"):
        st = path.lstat()
        kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else None
        rel = path.relative_to(root).as_posix()
        if kind is not None and rel != RECEIPT:
            found[kind][rel] = stat.S_IMODE(st.st_mode)
    modes: dict[str, Any] = {"other": {}}
    for kind, default in (("file", 0o644), ("dir", 0o755)):
        counts = collections.Counter(found[kind].values())
        common = min(counts, key=lambda m: (-counts[m], m)) if counts else default
        modes[kind] = f"{common:04o}"
        modes["other"].update({p: f"{m:04o}" for p, m in found[kind].items() if m != common})
    modes["other"] = dict(sorted(modes["other"].items()))
    return modes


def write_receipt(root: Path, dest: str, relocated: list[dict[str, Any]]) -> None:
    box = (root / "box.json").read_bytes()
    receipt = {
        "schemaVersion": 1,
        "dest": dest,
        "boxJson": {"path": "box.json", "size": len(box), "sha256": sha256(box)},
        "relocated": relocated,
        "modes": installed_modes(root),
    }
    path = root / RECEIPT
    path.write_bytes(canonical(receipt))
    path.chmod(0o644)
