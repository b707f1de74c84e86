"""Pure pieces of sign-in: cookie attributes, return_to paths, password hashing policy, PKCE, codes."""
from collections.abc import Iterator

import pytest
from argon2 import PasswordHasher

from chalicelib.core.config import settings
from chalicelib.identity.oauth.grants.authorization_code import _s256
from chalicelib.identity.oauth.issuing import _half_hash
from chalicelib.identity.opaque import digest, numeric_code
from chalicelib.identity.signin import password_hashing as passwords
from chalicelib.identity.signin import sessions
from chalicelib.identity.signin.redirects import is_safe_relative


@pytest.fixture
def auth_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AUTH_URL", "https://auth.example.com")
    settings.cache_clear()
    yield
    monkeypatch.delenv("AUTH_URL")
    settings.cache_clear()


def test_cookie_attributes_and_secure_on_https(auth_url: None) -> None:
    header = sessions.set_cookie_header("abc")
    assert header.startswith("aiplat_sid=abc; ")
    for attr in ("HttpOnly", "SameSite=Lax", "Path=/", "Secure", f"Max-Age={sessions.SESSION_TTL_SECONDS}"):
        assert attr in header.split("; ")
    cleared = sessions.clear_cookie_header()
    assert "Max-Age=0" in cleared
    assert "Secure" in cleared
    assert cleared.startswith("aiplat_sid=;")


def test_cookie_not_secure_on_plain_http_loopback() -> None:
    settings.cache_clear()
    assert "Secure" not in sessions.set_cookie_header("abc").split("; ")


def test_cookie_parsing() -> None:
    assert sessions.sid_from_cookie_header("a=1; aiplat_sid=xyz; b=2") == "xyz"
    assert sessions.sid_from_cookie_header("a=1") is None
    assert sessions.sid_from_cookie_header(None) is None


@pytest.mark.parametrize("value,ok", [
    ("/account", True), ("/oauth2/authorize?client_id=a&state=b", True), ("/", True),
    ("//evil.example", False), ("/\\evil.example", False), ("https://evil.example/", False),
    ("javascript:alert(1)", False), ("account", False), ("/a\nb", False), ("/a\\b", False),
])
def test_relative_return_to(value: str, ok: bool) -> None:
    assert is_safe_relative(value) is ok


def test_password_hash_and_rehash() -> None:
    h = passwords.hash_password("a long enough passphrase")
    assert h.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert passwords.verify_password(h, "a long enough passphrase")
    assert not passwords.verify_password(h, "another passphrase")
    assert not passwords.verify_password("not a hash", "x")
    assert not passwords.needs_rehash(h)
    old = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash("a long enough passphrase")
    assert passwords.needs_rehash(old)
    assert passwords.verify_password(old, "a long enough passphrase")


def test_pkce_s256_matches_rfc7636_appendix_b() -> None:
    assert _s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert len(_half_hash("token")) == 22


def test_codes_and_digests() -> None:
    codes = {numeric_code(8) for _ in range(200)}
    assert all(len(c) == 8 and c.isdigit() for c in codes)
    assert len(codes) > 190
    assert digest("123", salt="a@x") != digest("123", salt="b@x")
