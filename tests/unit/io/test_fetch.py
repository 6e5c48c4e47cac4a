"""io/fetch.py's one http(s) opener: redirects only to http(s), never from https down to http (#32 item 5)."""

from __future__ import annotations

import http.client
import io
import urllib.request
from pathlib import Path

import pytest

from scrollcase.io.fetch import RedirectRefusedError, SafeRedirects, http_fetcher, safe_opener
from tests.support.hostilehttp import HostileState, Redirect, serve_hostile


def redirect(old: str, new: str) -> urllib.request.Request | None:
    headers = http.client.HTTPMessage()
    return SafeRedirects().redirect_request(urllib.request.Request(old), io.BytesIO(), 302, "Found", headers, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [("http://a/x", "http://b/y"), ("http://a/x", "https://b/y"), ("https://a/x", "https://b/y")],
)
def test_redirects_within_http_s_and_up_to_https_are_followed(old: str, new: str) -> None:
    followed = redirect(old, new)
    assert followed is not None and followed.full_url == new


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("https://a/x", "http://b/y", "never from https to http"),
        ("http://a/x", "ftp://b:21/y", "only http(s) redirects are followed"),
        ("https://a/x", "file:///etc/passwd", "only http(s) redirects are followed"),
    ],
)
def test_a_redirect_elsewhere_is_refused_naming_the_url(old: str, new: str, why: str) -> None:
    with pytest.raises(RedirectRefusedError) as refused:
        redirect(old, new)
    assert str(refused.value.reason) == f"refusing the redirect (HTTP 302) to {new}: {why}"


def test_the_opener_replaces_urllibs_redirect_handler() -> None:
    handlers: list[urllib.request.BaseHandler] = getattr(safe_opener(), "handlers")  # noqa: B009 - untyped
    assert [type(h) for h in handlers if isinstance(h, urllib.request.HTTPRedirectHandler)] == [SafeRedirects]


def test_an_asset_fetch_redirected_to_ftp_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build's asset fetcher shares the opener: a 302 to ftp:// is an OSError (a BuildError in `fetching`)."""
    for key in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "asset.bin").write_bytes(b"x")
    state = HostileState(attacks={"asset.bin": Redirect("ftp://127.0.0.1:1/asset.bin")})
    with serve_hostile(tmp_path, state) as server, pytest.raises(OSError, match="refusing the redirect"):
        http_fetcher(timeout=5)(f"{server.url}/asset.bin", io.BytesIO(), 0)
