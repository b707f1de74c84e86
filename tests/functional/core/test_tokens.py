"""Every API call's token check: what must be refused is tried and shown refused (401 problem+json)."""
from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt as pyjwt
import pytest
from chalice.test import Client
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity.oauth import signing
from tests.functional.conftest import Tenant, bearer


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(t: Tenant, **over: Any) -> dict[str, Any]:
    now = int(clock.now())
    claims = {"iss": settings().issuer, "aud": "service-api", "sub": t.user_id, "workspace_id": t.workspace_id,
              "roles": ["admin"], "email": t.email, "amr": ["pwd"], "iat": now, "exp": now + 600, "jti": "tok_x"}
    claims.update(over)
    return claims


def _active_kid() -> str:
    return signing.signer().current()[0]


def _sign_with_our_key(claims: dict[str, Any], kid: str | None = None, typ: str | None = "at+jwt") -> str:
    """Sign arbitrary claims with our real private key (to isolate the claim checks)."""
    real_kid, key = signing.signer().current()
    pem = key.to_pem()
    headers = {"kid": kid or real_kid, **({"typ": typ} if typ else {})}
    return pyjwt.encode(claims, pem, algorithm="RS256", headers=headers)


def _get_me(token: str | None, raw_header: str | None = None) -> Any:
    headers = {}
    if raw_header is not None:
        headers["Authorization"] = raw_header
    elif token is not None:
        headers = bearer(token)
    with Client(create_app("platform")) as client:
        return client.http.get("/v1/me", headers=headers)


def _assert_refused(response: Any) -> None:
    assert response.status_code == 401, response.body
    assert response.headers["Content-Type"] == "application/problem+json"
    body = json.loads(response.body)
    assert body["code"] == "invalid_token"
    assert body["status"] == 401
    assert body["correlation_id"]
    assert "Traceback" not in response.body.decode()


def test_our_token_is_accepted(tenant: Tenant) -> None:
    assert _get_me(tenant.token).status_code == 200
    assert _get_me(_sign_with_our_key(_claims(tenant))).status_code == 200


def test_no_token(tenant: Tenant) -> None:
    _assert_refused(_get_me(None))


@pytest.mark.parametrize("header", ["Bearer", "Basic abc", "Bearer not-a-jwt", "Bearer a.b.c", "Bearer " + "x" * 9000])
def test_malformed_token(tenant: Tenant, header: str) -> None:
    _assert_refused(_get_me(None, raw_header=header))


def _sign_raw_payload(payload: bytes) -> str:
    """A token with our real header and signature over an arbitrary payload segment (not necessarily JSON)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    kid, key = signing.signer().current()
    signing_input = f"{_b64(json.dumps({'alg': 'RS256', 'typ': 'at+jwt', 'kid': kid}).encode())}.{_b64(payload)}"
    sig = key.prepared_key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(sig)}"


@pytest.mark.parametrize("mangle", [
    lambda c: json.dumps(c).encode() + b" {}",  # a second document after the claims
    lambda c: json.dumps(c).encode() + b" ",  # trailing data of any kind
    lambda c: b" " + json.dumps(c).encode(),  # leading data
    lambda c: json.dumps(c).encode("utf-16"),  # JSON, but not UTF-8 (RFC 7519)
    lambda c: json.dumps([c]).encode(),  # not an object
    lambda c: json.dumps(c).encode()[:-1],  # truncated
])
def test_signed_payload_that_is_not_one_utf8_json_object(tenant: Tenant, mangle: Any) -> None:
    assert _get_me(_sign_raw_payload(json.dumps(_claims(tenant)).encode())).status_code == 200  # the control
    _assert_refused(_get_me(_sign_raw_payload(mangle(_claims(tenant)))))


@pytest.mark.parametrize("shape", ["{h}..{s}", ".{p}.{s}", "{h}.{p}.", "{h}.{p}.{s}.", "{h}.{p}", "{h}.{p}.{s}=",
                                   "{h}.{p}.{s}x", "{h}.{p}x.{s}", "{h}.{p}+.{s}", "{h}.{p}.{s}/"])
def test_token_segments_are_checked(tenant: Tenant, shape: str) -> None:
    h, p, s = tenant.token.split(".")
    _assert_refused(_get_me(shape.format(h=h, p=p, s=s)))


def test_expired_token(tenant: Tenant) -> None:
    _assert_refused(_get_me(_sign_with_our_key(_claims(tenant, iat=int(time.time()) - 7200, exp=int(time.time()) - 3600))))


def test_token_expires_by_platform_clock_even_when_cached(tenant: Tenant) -> None:
    assert _get_me(tenant.token).status_code == 200  # now cached
    clock.advance(settings().access_token_ttl + 1)
    _assert_refused(_get_me(tenant.token))


def test_wrong_audience(tenant: Tenant) -> None:
    _assert_refused(_get_me(_sign_with_our_key(_claims(tenant, aud="another-api"))))


def test_wrong_issuer(tenant: Tenant) -> None:
    _assert_refused(_get_me(_sign_with_our_key(_claims(tenant, iss="https://evil.example.com"))))


def test_missing_workspace_claims(tenant: Tenant) -> None:
    claims = _claims(tenant)
    del claims["workspace_id"]
    _assert_refused(_get_me(_sign_with_our_key(claims)))


@pytest.mark.parametrize("typ", ["JWT", "at+jwt2", None])
def test_a_jwt_not_typed_as_an_access_token_is_refused(tenant: Tenant, typ: str | None) -> None:
    """RFC 9068: an ID token (``typ: JWT``) signed by our own key, with every access-token claim, is not one."""
    _assert_refused(_get_me(_sign_with_our_key(_claims(tenant), typ=typ)))


def test_the_media_type_form_of_the_access_token_type_is_accepted(tenant: Tenant) -> None:
    assert _get_me(_sign_with_our_key(_claims(tenant), typ="application/AT+JWT")).status_code == 200


def test_unknown_kid(tenant: Tenant) -> None:
    _assert_refused(_get_me(_sign_with_our_key(_claims(tenant), kid="key_01HZZZZZZZZZZZZZZZZZZZZZZZ")))


def test_alg_none(tenant: Tenant) -> None:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": _active_kid()}).encode())
    payload = _b64(json.dumps(_claims(tenant)).encode())
    _assert_refused(_get_me(f"{header}.{payload}."))


def test_hs256_signed_with_our_public_key(tenant: Tenant) -> None:
    """The python-jose CVE-2024-33663 shape: HMAC keyed with the RSA public key."""
    kid = _active_kid()
    public_pem = signing.signer().current()[1].public_key().to_pem()
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    payload = _b64(json.dumps(_claims(tenant)).encode())
    import hashlib
    import hmac

    sig = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    _assert_refused(_get_me(f"{header}.{payload}.{_b64(sig)}"))


def test_token_signed_by_a_key_that_is_not_ours(tenant: Tenant) -> None:
    foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = foreign.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    # claims a kid of ours, signature from another key
    _assert_refused(_get_me(pyjwt.encode(_claims(tenant), pem, algorithm="RS256",
                                      headers={"kid": _active_kid(), "typ": "at+jwt"})))


def test_tampered_payload(tenant: Tenant) -> None:
    header, payload, sig = tenant.token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["roles"] = ["admin", "owner"]
    _assert_refused(_get_me(f"{header}.{_b64(json.dumps(claims).encode())}.{sig}"))


def test_revoked_token_refused_on_the_next_request(tenant: Tenant) -> None:
    from chalicelib.core import tokens

    assert _get_me(tenant.token).status_code == 200
    tokens.revoke_key(tenant.claims["jti"], tenant.claims["exp"], "test", tenant.user_id)
    _assert_refused(_get_me(tenant.token))


def _in_another_container(action: Any) -> None:
    """Run ``action`` as another Lambda container would: the same DynamoDB writes, but the in-process
    notice that clears this container's revocation cache never reaches us."""
    from chalicelib.core import tokens

    notice, tokens._note_local_revocation = tokens._note_local_revocation, lambda: None
    try:
        action()
    finally:
        tokens._note_local_revocation = notice


@pytest.mark.parametrize("kind", ["jti", "session", "epoch"])
def test_revocation_in_another_container_applies_within_the_cache_bound(tenant: Tenant, kind: str) -> None:
    """Across containers a revocation is refused at most ``REVOCATION_CACHE_SECONDS`` later (controlled clock)."""
    from chalicelib.core import tokens

    with clock.frozen():
        clock.advance(tokens.LEEWAY_SECONDS + 1)  # the revocation comes well after the token's issue
        assert _get_me(tenant.token).status_code == 200  # read and cached here now: markers and epochs
        if kind == "jti":
            _in_another_container(lambda: tokens.revoke_key(tenant.claims["jti"], tenant.claims["exp"], "t",
                                                            tenant.user_id))
        elif kind == "session":
            _in_another_container(lambda: tokens.revoke_key(f"sid:{tenant.claims['sid']}", tenant.claims["exp"],
                                                            "t", tenant.user_id))
        else:
            _in_another_container(lambda: tokens.bump_epoch(tenant.user_id))
        clock.advance(tokens.REVOCATION_CACHE_SECONDS - 1)
        assert _get_me(tenant.token).status_code == 200  # within the bound: this container has not read it yet
        clock.advance(1)
        _assert_refused(_get_me(tenant.token))  # at the bound: refused


def test_fresh_tokens_of_a_known_user_cost_no_revocation_read(tenant: Tenant) -> None:
    """Within the cache bound, new tokens of a user whose markers are older than them need no read."""
    from chalicelib.core import tokens

    check = tokens.RevocationCheck()
    verifier = tokens.TokenVerifier(revocations=check)
    first = signing.issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                                       roles=["admin"], amr=["pwd"])[0]
    verifier.claims(first)
    reads = check.reads
    for _ in range(5):
        verifier.claims(signing.issue_access_token(user_id=tenant.user_id, email=tenant.email,
                                                   workspace_id=tenant.workspace_id, roles=["admin"], amr=["pwd"])[0])
    assert check.reads == reads


def test_a_token_issued_around_a_marker_reads_its_markers(tenant: Tenant) -> None:
    """A marker written for the user makes the next verification of their recent tokens read the markers."""
    from chalicelib.core import tokens

    other = signing.issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                                       roles=["admin"], amr=["pwd"])[1]
    tokens.revoke_key(other["jti"], other["exp"], "t", tenant.user_id)
    assert _get_me(tenant.token).status_code == 200  # another token's marker refuses only that token
    _assert_refused(_get_me(_sign_with_our_key(other)))
