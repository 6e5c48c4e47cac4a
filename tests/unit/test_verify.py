"""verify_release on a synthetic release (a real archive, no build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.box import verify
from scrollcase.errors import HostError
from tests.support.releases import write_release


def test_self_test_on_another_platform_is_refused_with_exit_11(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/build.md (verify): "`--self-test` on a machine of another platform is refused (exit 11)"
    -- before anything is unpacked."""
    release = write_release(tmp_path / "dist")
    monkeypatch.setattr(verify, "host_platform", lambda: ("osx", "arm64"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(HostError, match=r"linux-x86_64-cuda12\.4 on a osx-arm64 machine") as caught:
        verify.verify_release(release.manifest_path, self_test=True, temp_parent=scratch)
    assert caught.value.exit_code == 11
    assert list(scratch.iterdir()) == []
