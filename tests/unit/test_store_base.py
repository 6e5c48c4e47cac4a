from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.errors import IntegrityError
from scrollcase.store.base import read_sidecar, sidecar_path, sidecar_text

SHA = "ab" * 32


def test_the_sidecar_reader_reads_what_the_writer_wrote(tmp_path: Path) -> None:
    archive = tmp_path / "box.tar.zst"
    sidecar_path(archive).write_bytes(sidecar_text(SHA, archive.name))
    assert sidecar_path(archive) == tmp_path / "box.tar.zst.sha256"
    assert read_sidecar(archive) == SHA


def test_no_sidecar_is_none(tmp_path: Path) -> None:
    assert read_sidecar(tmp_path / "box.tar.zst") is None


@pytest.mark.parametrize("text", ["", "not-a-digest  box.tar.zst\n", "ab" * 31])
def test_a_sidecar_without_a_digest_is_an_integrity_error(tmp_path: Path, text: str) -> None:
    archive = tmp_path / "box.tar.zst"
    sidecar_path(archive).write_text(text)
    with pytest.raises(IntegrityError, match="does not start with a sha256 digest"):
        read_sidecar(archive)
