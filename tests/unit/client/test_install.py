"""The installer's reads before a download (scrollcase/client/install.py): a real directory store holding
a real box index and release manifests, each checked against the others, and DEST against the release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase.client.install import (
    check_dest_fits,
    check_release_digest,
    fetch_manifest,
    gpu_accelerator,
    host_view,
    read_box_index,
)
from scrollcase.client.select import Candidate
from scrollcase.errors import BuildError, IntegrityError, StoreError
from scrollcase.format.release import ReleaseManifest, ReleaseRelocation, dump_release
from scrollcase.host.facts import HostProbes
from scrollcase.io.proc import RunResult
from scrollcase.recipe.model import Target
from scrollcase.store.index import BoxIndex, IndexEntry, dump_index, entry_for, index_key
from scrollcase.store.local import LocalStore
from scrollcase.targets.cuda import CUDA
from scrollcase.targets.hostgpu import GpuFacts
from tests.support.releases import make_manifest

BOX = "demo-box"
RELOCATION = ReleaseRelocation(placeholderBytes=255, maxDestBytes=200)


def manifest(version: str = "1.0.0", cuda: str | None = None) -> ReleaseManifest:
    return make_manifest(box_id=BOX, version=version, cuda=cuda, size=1234, sha256="b" * 64)


def put(root: Path, key: str, data: bytes) -> None:
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(data)


def publish_index(root: Path, *manifests: ReleaseManifest, box_id: str = BOX) -> BoxIndex:
    versions: dict[str, dict[str, IndexEntry]] = {}
    for made in manifests:
        put(root, made.keys.release, dump_release(made))
        versions.setdefault(made.version, {})[made.targetId] = entry_for(made)
    index = BoxIndex(boxId=box_id, versions=versions)
    put(root, index_key(BOX), dump_index(index))
    return index


def candidate(made: ReleaseManifest, **entry: object) -> Candidate:
    return Candidate(made.version, entry_for(made).model_copy(update=entry), ())


def test_read_box_index_reads_the_box_folder(tmp_path: Path) -> None:
    index = publish_index(tmp_path, manifest("1.0.0"), manifest("1.1.0"))
    assert read_box_index(LocalStore(tmp_path), BOX) == index


def test_a_store_without_the_box_names_the_missing_index(tmp_path: Path) -> None:
    publish_index(tmp_path, manifest())
    with pytest.raises(StoreError, match=r"has no box 'other': .*boxes/other/index.json does not exist") as raised:
        read_box_index(LocalStore(tmp_path), "other")
    assert "--store" in (raised.value.fix or "")


def test_an_index_of_another_box_is_refused(tmp_path: Path) -> None:
    publish_index(tmp_path, manifest(), box_id="someone-else")
    with pytest.raises(StoreError, match="is the index of box 'someone-else'"):
        read_box_index(LocalStore(tmp_path), BOX)


def test_gpus_are_asked_only_for_a_cuda_release_and_no_skip(tmp_path: Path) -> None:
    cpu_only = publish_index(tmp_path / "a", manifest("1.0.0"), manifest("1.1.0"))
    mixed = publish_index(tmp_path / "b", manifest("1.0.0"), manifest("1.1.0", cuda="12.4"))
    assert (gpu_accelerator(cpu_only, False), gpu_accelerator(mixed, False), gpu_accelerator(mixed, True)) == (
        None,
        CUDA,
        None,
    )
    assert gpu_accelerator(BoxIndex(boxId=BOX), False) is None
    mac = entry_for(manifest()).model_copy(
        update={"targetId": "osx-arm64-metal", "target": Target(platform="osx", arch="arm64", accelerator="metal")}
    )
    assert gpu_accelerator(BoxIndex(boxId=BOX, versions={"1.0.0": {"osx-arm64-metal": mac}}), False) is None


def test_host_view_asks_nvidia_smi_only_when_told() -> None:
    asked: list[str] = []

    def which(name: str) -> str | None:
        asked.append(name)
        return "/usr/bin/nvidia-smi"

    def run(argv: object) -> RunResult:
        return RunResult(("nvidia-smi",), 0, "550.54.14, 8.6, NVIDIA RTX\n", "", 0.0)

    probes = HostProbes(run=run, which=which, platform=lambda: ("linux", "x86_64"))
    quiet = host_view(probes, None)
    assert (quiet.platform, quiet.arch, quiet.gpus, asked) == ("linux", "x86_64", GpuFacts(), [])
    asked_view = host_view(probes, CUDA)
    assert [g.driver_version for g in asked_view.gpus.gpus] == ["550.54.14"] and asked == ["nvidia-smi"]


def test_fetch_manifest_returns_the_release_the_index_lists(tmp_path: Path) -> None:
    made = manifest()
    publish_index(tmp_path, made)
    assert fetch_manifest(LocalStore(tmp_path), BOX, candidate(made)) == made


def test_a_dangling_index_entry_is_a_store_error(tmp_path: Path) -> None:
    made = manifest()
    publish_index(tmp_path, made)
    (tmp_path / made.keys.release).unlink()
    with pytest.raises(StoreError, match=r"does not exist, although the index lists 1.0.0 linux-x86_64-cpu"):
        fetch_manifest(LocalStore(tmp_path), BOX, candidate(made))


@pytest.mark.parametrize(
    ("field", "update"),
    [
        ("targetId", {"targetId": "linux-x86_64-cuda12.4"}),
        ("archive.sha256", {"sha256": "c" * 64}),
        ("archive.size", {"size": 4321}),
        ("keys.archive", {"archive": "boxes/demo-box/1.0.0/elsewhere.tar.zst"}),
        ("relocation", {"relocation": RELOCATION}),
    ],
)
def test_a_manifest_field_the_index_contradicts_is_refused(
    tmp_path: Path, field: str, update: dict[str, object]
) -> None:
    made = manifest()
    publish_index(tmp_path, made)
    with pytest.raises(IntegrityError, match="it is not the release the index lists") as raised:
        fetch_manifest(LocalStore(tmp_path), BOX, candidate(made, **update))
    assert [p.key for p in raised.value.problems] == [field]
    assert "nothing was downloaded" in raised.value.message


def test_the_version_and_box_must_be_the_index_s_too(tmp_path: Path) -> None:
    made = manifest()
    publish_index(tmp_path, made)
    moved = Candidate("1.0.1", entry_for(made), ())
    with pytest.raises(IntegrityError) as raised:
        fetch_manifest(LocalStore(tmp_path), "other-box", moved)
    assert [(p.key, p.value) for p in raised.value.problems] == [("boxId", "'demo-box'"), ("version", "'1.0.0'")]


def test_an_older_index_entry_without_relocation_is_not_compared(tmp_path: Path) -> None:
    made = manifest().model_copy(update={"relocation": RELOCATION})
    publish_index(tmp_path, made)
    older = candidate(made, relocation=None)
    assert fetch_manifest(LocalStore(tmp_path), BOX, older).relocation == RELOCATION


def test_a_manifest_whose_bytes_the_index_does_not_vouch_for_is_refused(tmp_path: Path) -> None:
    made = manifest()
    publish_index(tmp_path, made)
    reformatted = json.dumps(json.loads(dump_release(made)), indent=4).encode()  # the same fields, other bytes
    put(tmp_path, made.keys.release, reformatted)
    with pytest.raises(IntegrityError, match=r"but the index lists the release manifest of 1.0.0"):
        fetch_manifest(LocalStore(tmp_path), BOX, candidate(made))
    assert fetch_manifest(LocalStore(tmp_path), BOX, candidate(made, releaseSha256=None)) == made  # an older index


def test_check_release_digest_passes_the_vouched_bytes() -> None:
    made = manifest()
    check_release_digest(dump_release(made), "url", candidate(made))
    with pytest.raises(IntegrityError, match="refusing url: its sha256 is"):
        check_release_digest(dump_release(made) + b" ", "url", candidate(made))


def test_dest_longer_than_the_release_allows_is_refused_before_anything(tmp_path: Path) -> None:
    short = tmp_path / "box"
    long = tmp_path / ("d" * (201 - len(str(tmp_path)) - 1))
    assert len(str(long).encode()) == 201
    check_dest_fits(short, RELOCATION, "; nothing done")
    check_dest_fits(long, None, "; nothing done")  # no limit known
    check_dest_fits(long, ReleaseRelocation(placeholderBytes=255), "; nothing done")  # no binary embeds it
    check_dest_fits(long.with_name(long.name[:-1]), RELOCATION, "; nothing done")  # exactly the limit
    with pytest.raises(BuildError, match=r"is 201 bytes, longer than the 200-byte build placeholder.*; nothing done"):
        check_dest_fits(long, RELOCATION, "; nothing done")


def test_a_dest_that_cannot_be_resolved_is_left_to_the_unpack(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    check_dest_fits(loop / ("d" * 300), RELOCATION, "; nothing done")
