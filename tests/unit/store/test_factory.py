from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import scrollcase.store
from scrollcase import cli
from scrollcase.errors import UsageError
from scrollcase.store.factory import DEFAULT_STORE, STORE_ENV, open_read_store, open_store
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


def test_an_s3_read_store_checks_the_endpoint_of_the_environment_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str | None] = []

    def client(endpoint: str | None) -> object:
        made.append(endpoint)
        return object()

    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")  # a good one: only the given env is read
    with pytest.raises(UsageError, match=r"\$AWS_ENDPOINT_URL 'minio' is not an endpoint URL"):
        open_read_store("s3://bucket/p", env={"AWS_ENDPOINT_URL": "minio"}, s3_client=client)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "minio")  # no env given: the process's is read
    with pytest.raises(UsageError, match=r"\$AWS_ENDPOINT_URL 'minio' is not an endpoint URL"):
        open_read_store("s3://bucket/p", s3_client=client)
    assert made == []
    open_read_store("s3://bucket/p", env={}, s3_client=client)
    assert made == [None]


def test_the_factory_imports_without_the_type_stubs(monkeypatch: pytest.MonkeyPatch) -> None:
    # boto3-stubs is a test dependency only; None in sys.modules fails its import, as in a plain install
    monkeypatch.setitem(sys.modules, "mypy_boto3_s3", None)
    monkeypatch.setattr(scrollcase.store, "factory", scrollcase.store.factory)  # both put back afterwards
    monkeypatch.delitem(sys.modules, "scrollcase.store.factory")
    fresh = importlib.import_module("scrollcase.store.factory")
    assert fresh.DEFAULT_STORE == DEFAULT_STORE


@pytest.mark.parametrize("location", ["s3://", "s3:///prefix"])
def test_an_s3_url_without_a_bucket_is_a_usage_error_exit_2(location: str, capsys: pytest.CaptureFixture[str]) -> None:
    """#32 item 11: docs/install.md lists an empty or unknown store URL under exit 2 (it was StoreError, 9)."""
    with pytest.raises(UsageError, match="is not an S3 URL"):
        open_read_store(location, env={})
    with pytest.raises(UsageError, match="is not an S3 URL"):
        open_store(location, None, env={})
    assert cli.main(["install", "--store", location, "--box", "demo-box", "dest"]) == 2
    assert "is not an S3 URL" in capsys.readouterr().err
