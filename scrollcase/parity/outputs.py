"""Reading saved parity outputs in bounded memory: an ``.npz`` archive or a folder of ``.npy`` files.

``.npz`` members are streamed (zip member stream + the ``.npy`` header read with
``numpy.lib.format``), so compressed archives work too; ``.npy`` files are read the same way.
Either way a caller only ever holds one chunk.  Pickled (object) arrays are refused: outputs are numbers.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from scrollcase.errors import ParityError
from scrollcase.parity.compare import ArrayInfo

OUTPUTS_FILE = "outputs.npz"
META_FILE = "meta.json"
SAVE_FIX = "save outputs with numpy.savez(DIR/outputs.npz, name=array, ...) (numeric arrays only)"


def read_header(stream: IO[bytes], where: str) -> ArrayInfo:
    """Parse an ``.npy`` header from ``stream``, leaving it positioned at the first data byte."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except (ValueError, OSError, EOFError) as exc:
        raise ParityError(f"{where} is not a readable .npy array: {exc}", fix=SAVE_FIX) from None
    if dtype.hasobject:
        raise ParityError(f"{where} holds Python objects (pickled data), not numbers", fix=SAVE_FIX)
    return ArrayInfo(tuple(int(n) for n in shape), dtype, bool(fortran))


def _read_chunks(stream: IO[bytes], info: ArrayInfo, size: int, where: str) -> Iterator[NDArray[np.generic]]:
    remaining = info.size
    itemsize = info.dtype.itemsize
    while remaining:
        count = min(size, remaining)
        data = stream.read(count * itemsize)
        if len(data) != count * itemsize:
            raise ParityError(f"{where} is truncated: {remaining} element(s) missing", fix=SAVE_FIX)
        remaining -= count
        yield np.frombuffer(data, dtype=info.dtype, count=count)


@dataclass
class NpzOutputs:
    """The members of an ``.npz`` archive, each streamed on demand."""

    path: Path
    _infos: dict[str, ArrayInfo] = field(default_factory=dict, init=False)

    @property
    def label(self) -> str:
        return str(self.path)

    def infos(self) -> Mapping[str, ArrayInfo]:
        if not self._infos:
            self._infos = self._scan()
        return self._infos

    def _scan(self) -> dict[str, ArrayInfo]:
        try:
            with zipfile.ZipFile(self.path) as archive:
                out = {}
                for member in archive.namelist():
                    if not member.endswith(".npy"):
                        continue
                    with archive.open(member) as stream:
                        out[member.removesuffix(".npy")] = read_header(stream, f"{self.path}:{member}")
                return out
        except (zipfile.BadZipFile, OSError) as exc:
            raise ParityError(f"{self.path} is not a readable .npz archive: {exc}", fix=SAVE_FIX) from None

    def chunks(self, name: str, size: int) -> Iterator[NDArray[np.generic]]:
        where = f"{self.path}:{name}.npy"
        try:
            with zipfile.ZipFile(self.path) as archive, archive.open(f"{name}.npy") as stream:
                info = read_header(stream, where)
                yield from _read_chunks(stream, info, size, where)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:  # includes a bad CRC at the end
            raise ParityError(f"cannot read {where}: {exc}", fix=SAVE_FIX) from None


@dataclass
class NpyDirOutputs:
    """A folder of ``NAME.npy`` files, each streamed on demand."""

    path: Path

    @property
    def label(self) -> str:
        return str(self.path)

    def infos(self) -> Mapping[str, ArrayInfo]:
        out = {}
        for file in sorted(self.path.glob("*.npy")):
            try:
                with file.open("rb") as stream:
                    out[file.stem] = read_header(stream, str(file))
            except OSError as exc:
                raise ParityError(f"cannot read {file}: {exc.strerror}") from None
        return out

    def chunks(self, name: str, size: int) -> Iterator[NDArray[np.generic]]:
        # Plain reads rather than np.load(mmap_mode="r"): a memory map's touched pages count as
        # resident, so a 1 GB output would show as 1 GB of RSS; reads keep one chunk at a time.
        file = self.path / f"{name}.npy"
        try:
            with file.open("rb") as stream:
                info = read_header(stream, str(file))
                yield from _read_chunks(stream, info, size, str(file))
        except OSError as exc:
            raise ParityError(f"cannot read {file}: {exc.strerror}", fix=SAVE_FIX) from None


def open_outputs(path: Path) -> NpzOutputs | NpyDirOutputs:
    """``outputs.npz``, any ``.npz`` file, a folder holding ``outputs.npz``, or a folder of ``.npy``."""
    if path.is_file():
        return NpzOutputs(path)
    if (path / OUTPUTS_FILE).is_file():
        return NpzOutputs(path / OUTPUTS_FILE)
    if path.is_dir():
        if not any(path.glob("*.npy")):
            raise ParityError(f"{path} holds neither {OUTPUTS_FILE} nor any .npy file", fix=SAVE_FIX)
        return NpyDirOutputs(path)
    raise ParityError(f"{path} does not exist", fix="pass an .npz file or a folder of .npy files")
