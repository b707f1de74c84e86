"""Small rules of the browser sign-in: where the app shell may return to, which provider URLs are
allowed, the presets, and the escaping of the pages."""
from __future__ import annotations

import pytest

from chalicelib.identity.pages import render as pages
from chalicelib.identity.sso import connections as sso_config
from chalicelib.identity.sso import http_client
from chalicelib.webapp.shell import safe_path


@pytest.mark.parametrize("path,expected", [
    ("/projects/42?tab=x", "/projects/42?tab=x"), ("/", "/"), ("//evil.example/x", "/"),
    ("https://evil.example/", "/"), ("/\\evil.example", "/"), ("relative", "/"), ("/" + "a" * 2000, "/"),
])
def test_app_shell_returns_only_to_local_paths(path: str, expected: str) -> None:
    assert safe_path(path) == expected


@pytest.mark.parametrize("url,ok", [
    ("https://login.example.com/x", True), ("http://127.0.0.1:9999/x", True), ("http://localhost/x", True),
    ("http://login.example.com/x", False), ("file:///etc/passwd", False), ("ftp://x.example/", False),
    ("https:///nohost", False),
])
def test_provider_urls_must_be_https_except_loopback(url: str, ok: bool) -> None:
    assert http_client.allowed_url(url) is ok


def test_presets_cover_the_five_kinds() -> None:
    kinds = {p["kind"] for p in sso_config.presets_view()}
    assert kinds == {"enterprise_directory", "identity_platform", "open_source_identity_server",
                     "workspace_suite", "code_hosting"}
    assert sso_config.PRESETS["workspace_suite"].hd_check
    assert sso_config.PRESETS["enterprise_directory"].email_claims[-1] == "upn"


@pytest.mark.parametrize("domain,ok", [("corp.example", True), ("a.b.example.org", True), ("localhost", False),
                                       ("evil.example/x", False), ("-bad.example", False), ("x", False)])
def test_domain_names(domain: str, ok: bool) -> None:
    assert bool(sso_config.DOMAIN_RE.match(domain)) is ok


def test_pages_escape_values_and_carry_autocomplete_tokens() -> None:
    page = pages.signin_page('/x"><script>alert(1)</script>')
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;" in page
    for token in ('autocomplete="username webauthn"', 'autocomplete="current-password"',
                  'autocomplete="one-time-code"'):
        assert token in page
    assert 'autocomplete="new-password"' in pages.reset_page("tok")
    assert 'autocomplete="email"' in pages.reset_page(None)
    assert "script-src 'self'" in pages.CSP
    assert "unsafe-inline" not in pages.CSP
    assert pages.static_file("../pages.py") is None
    assert pages.static_file("signin.js") is not None


def test_loopback_providers_only_in_local_and_test_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib.core.config import settings

    monkeypatch.setenv("STAGE", "prod")
    settings.cache_clear()
    try:
        assert not http_client.allowed_url("http://127.0.0.1:9999/x")
        assert http_client.allowed_url("https://login.example.com/x")
    finally:
        monkeypatch.delenv("STAGE")
        settings.cache_clear()


@pytest.mark.parametrize("address", ["10.0.0.7", "127.0.0.1", "169.254.169.254"])
def test_a_provider_host_resolving_to_a_private_address_is_refused_before_connecting(
        monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """An Admin's provider (discovery, token, keys) or domain-proof URL on an https name that resolves inside
    the platform's network: refused outside the local and test stages, and nothing is connected to."""
    import socket

    from chalicelib.core.config import settings

    connected: list[object] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))])
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connected.append(a) or None)
    monkeypatch.setenv("STAGE", "prod")
    settings.cache_clear()
    try:
        with pytest.raises(http_client.ProviderError, match="private address|forbidden address"):
            http_client.get_json("https://idp.corp.example/.well-known/openid-configuration")
        with pytest.raises(http_client.ProviderError, match="private address|forbidden address"):
            http_client.post_form("https://idp.corp.example/token", {"grant_type": "authorization_code"})
        assert http_client.get_text("https://corp.example/.well-known/aiplat-domain-verification.txt") is None
    finally:
        monkeypatch.delenv("STAGE")
        settings.cache_clear()
    assert connected == []
