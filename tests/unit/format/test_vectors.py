"""The box-format test vectors (tests/vectors/): the committed files are what the generator makes, and
scrollcase's own host procedure (docs/format.md §1: DEST limit, frame table, box.json identity, unpack and
relocate) gives every valid vector's expected tree and refuses every hostile one as its expectation says."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from scrollcase import cli
from scrollcase.client.install import check_dest_fits
from scrollcase.client.preflight import check_identity
from scrollcase.errors import ScrollcaseError
from scrollcase.format.archive.frames import check_frame_table
from scrollcase.format.archive.unpack import unpack_archive
from scrollcase.format.release import parse_release, release_json_schema
from tests.vectors.generate import CATALOGUE, KEPT, TOO_LONG_DEST, VECTORS, generate

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the vectors' trees hold POSIX symlinks and DESTs")

CATALOGUE_DATA: dict[str, Any] = json.loads((VECTORS / CATALOGUE).read_bytes())
VALID = [v for v in CATALOGUE_DATA["vectors"] if v["kind"] == "valid"]
REFUSED = [v for v in CATALOGUE_DATA["vectors"] if v["kind"] == "refused"]
INSTALLS = [(v, i) for v in VALID for i in v["installs"]]


def _generated(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in (*KEPT, "__pycache__")
    }


def test_the_committed_vectors_are_a_fresh_generation(tmp_path: Path) -> None:
    generate(tmp_path / "fresh")
    fresh, committed = _generated(tmp_path / "fresh"), _generated(VECTORS)
    assert sorted(fresh) == sorted(committed), "run `python -m tests.vectors.generate` and commit the result"
    differing = [name for name in fresh if fresh[name] != committed[name]]
    assert not differing, f"regenerate the vectors: {differing}"


def test_the_vectors_are_small_and_their_manifests_valid() -> None:
    validator = jsonschema.Draft202012Validator(release_json_schema())
    for vector in CATALOGUE_DATA["vectors"]:
        assert (VECTORS / vector["archive"]).stat().st_size < 16_384, vector["name"]
        validator.validate(json.loads((VECTORS / vector["release"]).read_bytes()))
    assert {v["refusal"]["stage"] for v in REFUSED} == {"dest", "frames", "box.json", "unpack"}


def host_install(vector: dict[str, Any], dest: Path, relocate_to: Path) -> str:
    """docs/format.md §1 as scrollcase does it; returns the stage reached (raises at the refusing one)."""
    release = VECTORS / vector["release"]
    manifest = parse_release(release.read_bytes(), file=release.name)
    archive = release.parent / manifest.archive.name
    check_dest_fits(relocate_to, manifest.relocation, "; nothing was extracted")
    if manifest.archive.frames:
        check_frame_table(archive, manifest.archive.frames, manifest.archive.size, release.name)
    check_identity(manifest, archive)
    unpack_archive(
        archive,
        dest,
        expected_size=manifest.archive.size,
        expected_sha256=manifest.archive.sha256,
        relocate_to=relocate_to,
    )
    return "done"


def listing(root: Path) -> list[dict[str, Any]]:
    """The tree as the vectors list it: every entry but the root, by path."""
    entries: list[dict[str, Any]] = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        rel, st = path.relative_to(root).as_posix(), path.lstat()
        if path.is_symlink():
            entries.append({"path": rel, "type": "symlink", "target": os.readlink(path)})
        elif path.is_dir():
            entries.append({"path": rel, "type": "dir", "mode": f"{st.st_mode & 0o7777:04o}"})
        else:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            mode = f"{st.st_mode & 0o7777:04o}"
            entries.append({"path": rel, "type": "file", "mode": mode, "size": len(data), "sha256": digest})
    return entries


@pytest.mark.parametrize(("vector", "install"), INSTALLS, ids=[f"{v['name']}-{i['label']}" for v, i in INSTALLS])
def test_a_valid_vector_unpacks_to_its_expected_tree(
    tmp_path: Path, vector: dict[str, Any], install: dict[str, Any]
) -> None:
    dest = tmp_path / "box"
    assert host_install(vector, dest, Path(install["dest"])) == "done"
    expected = json.loads((VECTORS / install["expected"]).read_bytes())
    assert expected["dest"] == install["dest"]
    assert listing(dest) == expected["entries"]
    for rel in expected["relocated"]:
        assert (dest / rel).read_bytes() == (VECTORS / install["files"] / rel).read_bytes(), rel


def test_the_spaced_dest_gets_the_documented_trampoline_and_env_lines() -> None:
    """docs/archive.md's worked examples, written out by hand (not by the relocation code under test)."""
    files = VECTORS / "demo" / "expected" / "spaced" / "venv" / "bin"
    quoted = "'/srv/My Boxes/it'\"'\"'s $HOME"
    assert (files / "tool").read_text().splitlines()[:3] == [
        "#!/bin/sh",
        f"'''exec' {quoted}/venv/bin/python3.11' \"$0\" \"$@\"",
        "' '''",
    ]
    assert (files / "run.sh").read_text().splitlines()[0] == (
        "#!/usr/bin/env -S bash --init-file '/srv/My Boxes/it\\'s $HOME/venv/etc/rc'"
    )
    assert (files / "perl-crlf").read_bytes().startswith(b"#!/usr/bin/env -S perl -w\r\n")


def test_binary_strings_are_padded_in_place() -> None:
    """\\0RPATH=PH/venv/lib:PH/venv/lib64\\0 for /srv/box: both replaced, 2 x (196 - 8) NULs after."""
    relocated = (VECTORS / "demo" / "expected" / "short" / "venv" / "bin" / "python3.11").read_bytes()
    start = relocated.index(b"RPATH=")
    assert relocated[start:].startswith(b"RPATH=/srv/box/venv/lib:/srv/box/venv/lib64" + bytes(2 * 188) + b"\x00tail")
    assert len(relocated) == 16 + 1 + len("RPATH=") + (196 + 9) + 1 + (196 + 11) + 1 + 4 + 1 + 8  # as packed


def _refuse(vector: dict[str, Any], tmp_path: Path) -> ScrollcaseError:
    dest = tmp_path / "box"
    with pytest.raises(ScrollcaseError) as caught:
        host_install(vector, dest, Path(vector["dest"]))
    assert not dest.exists() and sorted(p.name for p in tmp_path.iterdir()) == [], "DEST or a temp folder left"
    return caught.value


@pytest.mark.parametrize("vector", REFUSED, ids=[v["name"] for v in REFUSED])
def test_a_refused_vector_is_refused_as_expected(tmp_path: Path, vector: dict[str, Any]) -> None:
    error, want = _refuse(vector, tmp_path), vector["refusal"]
    assert (type(error).__name__, error.exit_code) == (want["error"], want["exitCode"])
    assert want["phrase"] in error.render()
    if "member" in want:  # the member the archive names, as scrollcase quotes it
        assert f"member {want['member']!r}" in error.message


CLI_REFUSED = [v for v in REFUSED if v["refusal"]["stage"] != "frames"]  # unpack does not read frame tables


@pytest.mark.parametrize("vector", CLI_REFUSED, ids=[v["name"] for v in CLI_REFUSED])
def test_scrollcase_unpack_exits_as_the_vector_expects(
    tmp_path: Path, vector: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "box"
    if vector["dest"] == TOO_LONG_DEST:  # a real path of that length: the limit counts DEST's bytes
        dest = tmp_path / ("d" * (len(TOO_LONG_DEST) - len(str(tmp_path)) - 1))
    code = cli.main(["unpack", str(VECTORS / vector["release"]), str(dest)])
    assert code == vector["refusal"]["exitCode"]
    assert vector["refusal"]["phrase"] in capsys.readouterr().err
    assert not dest.exists()


def test_scrollcase_verify_refuses_the_frame_table_that_disagrees(capsys: pytest.CaptureFixture[str]) -> None:
    (vector,) = [v for v in REFUSED if v["refusal"]["stage"] == "frames"]
    assert cli.main(["verify", str(VECTORS / vector["release"])]) == vector["refusal"]["exitCode"]
    assert vector["refusal"]["phrase"] in capsys.readouterr().err
