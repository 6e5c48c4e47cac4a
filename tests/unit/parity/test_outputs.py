"""Reading saved outputs chunk by chunk: .npz (stored and deflated), folders of .npy, bad files."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from scrollcase.errors import ParityError
from scrollcase.parity.compare import compare_sets
from scrollcase.parity.outputs import NpyDirOutputs, NpzOutputs, open_outputs, read_header
from scrollcase.recipe.model import Tolerances

TOL = Tolerances(absolute=1e-4, relative=1e-3, minimumCosine=0.9999)
ARRAYS = {"logits": np.arange(35, dtype=np.float32).reshape(5, 7) + 1, "hidden": np.linspace(1, 2, 11)}


def joined(outputs: NpzOutputs | NpyDirOutputs, name: str, size: int) -> np.ndarray:
    return np.concatenate(list(outputs.chunks(name, size)))


def test_read_header_from_a_stream() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((2, 3), dtype=">f8"))
    buffer.seek(0)
    info = read_header(buffer, "x.npy")
    assert info.shape == (2, 3) and info.dtype == np.dtype(">f8") and not info.fortran_order
    assert info.size == 6


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz_members_stream_in_chunks(tmp_path: Path, save: object) -> None:
    path = tmp_path / "outputs.npz"
    save(path, **ARRAYS)  # type: ignore[operator]
    outputs = open_outputs(path)
    assert isinstance(outputs, NpzOutputs)
    assert set(outputs.infos()) == {"logits", "hidden"}
    assert outputs.infos()["logits"].shape == (5, 7)
    chunks = list(outputs.chunks("logits", 8))
    assert [c.size for c in chunks] == [8, 8, 8, 8, 3]
    assert np.array_equal(np.concatenate(chunks), ARRAYS["logits"].reshape(-1))


def test_a_folder_holding_outputs_npz_is_read_as_that_file(tmp_path: Path) -> None:
    np.savez(tmp_path / "outputs.npz", **ARRAYS)
    assert isinstance(open_outputs(tmp_path), NpzOutputs)


def test_folder_of_npy_files_is_streamed(tmp_path: Path) -> None:
    for name, array in ARRAYS.items():
        np.save(tmp_path / f"{name}.npy", array)
    outputs = open_outputs(tmp_path)
    assert isinstance(outputs, NpyDirOutputs)
    assert np.array_equal(joined(outputs, "hidden", 4), ARRAYS["hidden"])
    npz = tmp_path / "other.npz"
    np.savez(npz, **ARRAYS)
    assert all(r.passed for r in compare_sets(open_outputs(npz), outputs, "cuda", TOL))


def test_fortran_ordered_arrays_stream_in_file_order(tmp_path: Path) -> None:
    array = np.asfortranarray(ARRAYS["logits"])
    np.save(tmp_path / "logits.npy", array)
    np.savez(tmp_path / "f.npz", logits=array)
    for outputs in (NpyDirOutputs(tmp_path), NpzOutputs(tmp_path / "f.npz")):
        assert outputs.infos()["logits"].fortran_order
        assert np.array_equal(joined(outputs, "logits", 6), array.reshape(-1, order="F"))
    # Same order on both sides: comparable, and the worst index is unravelled in Fortran order.
    shifted = array.copy(order="F")
    shifted[4, 1] += 1
    np.savez(tmp_path / "g.npz", logits=shifted)
    out = compare_sets(NpzOutputs(tmp_path / "f.npz"), NpzOutputs(tmp_path / "g.npz"), "cuda", TOL)[0]
    assert not out.passed and out.worstIndex == [4, 1]
    np.savez(tmp_path / "c.npz", logits=ARRAYS["logits"])
    mixed = compare_sets(NpzOutputs(tmp_path / "c.npz"), NpzOutputs(tmp_path / "f.npz"), "cuda", TOL)[0]
    assert "memory order mismatch" in mixed.message


def test_truncated_member_is_an_error_not_a_short_array(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.ones(100))
    with zipfile.ZipFile(tmp_path / "cut.npz", "w") as archive:
        archive.writestr("y.npy", buffer.getvalue()[:-80])
    outputs = NpzOutputs(tmp_path / "cut.npz")
    with pytest.raises(ParityError, match="truncated"):
        joined(outputs, "y", 16)
    result = compare_sets(outputs, outputs, "cuda", TOL)[0]
    assert not result.passed and "truncated" in result.message


def test_pickled_objects_are_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "obj.npz", y=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ParityError, match="Python objects"):
        NpzOutputs(tmp_path / "obj.npz").infos()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.write_bytes(b"not a zip"), "not a readable .npz"),
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "neither outputs.npz nor any .npy"),
    ],
)
def test_unreadable_output_sets(tmp_path: Path, make: object, match: str) -> None:
    path = tmp_path / "outputs"
    make(path)  # type: ignore[operator]
    with pytest.raises(ParityError, match=match):
        open_outputs(path).infos()


def test_a_member_that_is_not_npy_data(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as archive:
        archive.writestr("y.npy", b"garbage bytes")
    with pytest.raises(ParityError, match=r"bad.npz:y.npy is not a readable .npy array"):
        NpzOutputs(tmp_path / "bad.npz").infos()
