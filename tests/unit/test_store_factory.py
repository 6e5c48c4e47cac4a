from __future__ import annotations

from pathlib import Path

import pytest

from scrollcase.errors import UsageError
from scrollcase.store.factory import DEFAULT_STORE, STORE_ENV, open_store
from scrollcase.store.local import LocalStore


def test_a_directory_is_a_local_store(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"), None, env={})
    assert isinstance(store, LocalStore)


def test_the_default_store_comes_from_the_environment_then_the_default(tmp_path: Path) -> None:
    assert str(tmp_path / "env-store") in open_store(None, None, env={STORE_ENV: str(tmp_path / "env-store")}).url
    assert Path(open_store(None, None, env={}).url).as_posix().endswith(DEFAULT_STORE)


@pytest.mark.parametrize(
    ("destination", "endpoint", "message"),
    [
        ("  ", None, "--to is empty"),
        ("gs://bucket/prefix", None, "unsupported store URL"),
        ("some/dir", "http://localhost:9000", "--endpoint-url only applies to s3:// stores"),
    ],
)
def test_what_names_no_store_is_a_usage_error(destination: str, endpoint: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        open_store(destination, endpoint, env={})
