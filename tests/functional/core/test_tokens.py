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


def _issue(user_id: str, workspace_id: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return signing.issue_access_token(user_id=user_id, email=f"{user_id}@example.com", workspace_id=workspace_id,
                                      roles=["admin"], amr=["pwd"], extra=extra or None)


def test_fresh_tokens_of_many_users_cost_one_watermark_read(tenant: Tenant) -> None:
    """The common case: nothing revoked for these users since their tokens' issue: one read of the
    revocation watermark for all of them, no read per user."""
    from chalicelib.core import tokens

    tokens.revoke_key("tok_unrelated", clock.now() + 600, "t", "usr_someone_else")  # the watermark exists
    fresh = [_issue(f"usr_many{i}", tenant.workspace_id)[0] for i in range(60)]
    check = tokens.RevocationCheck()
    verifier = tokens.TokenVerifier(revocations=check)
    assert tokens.bucket_of("usr_someone_else") not in {tokens.bucket_of(f"usr_many{i}") for i in range(60)}
    for token in fresh:
        verifier.claims(token)
    assert check.reads == 1


def test_a_moved_bucket_costs_a_read_of_that_user_only_and_refuses_only_the_revoked(tenant: Tenant) -> None:
    """A user whose watermark bucket moved after their token's issue is read; another user's revocation that
    shares the bucket costs that read but refuses nothing of theirs."""
    from chalicelib.core import tokens

    target = tokens.bucket_of(tenant.user_id)
    neighbour = next(f"usr_n{i}" for i in range(100_000) if tokens.bucket_of(f"usr_n{i}") == target)
    bystander = next(f"usr_b{i}" for i in range(100_000) if tokens.bucket_of(f"usr_b{i}") != target)
    mine = _issue(tenant.user_id, tenant.workspace_id)[0]
    theirs, their_claims = _issue(neighbour, tenant.workspace_id)
    other = _issue(bystander, tenant.workspace_id)[0]
    check = tokens.RevocationCheck()
    verifier = tokens.TokenVerifier(revocations=check)
    tokens.revoke_key(their_claims["jti"], their_claims["exp"], "t", neighbour)
    reads = check.reads
    verifier.claims(other)
    assert check.reads == reads + 1  # the watermark only
    verifier.claims(mine)  # same bucket, moved: this user's item is read, nothing refuses the token
    assert check.reads == reads + 2
    with pytest.raises(Exception) as refused:
        verifier.claims(theirs)
    assert getattr(refused.value, "status", None) == 401


def test_an_item_read_after_its_bucket_moved_is_trusted_past_the_bound(tenant: Tenant) -> None:
    """A user's state read well after their bucket last moved needs no new read while the bucket stays;
    a new move of the bucket makes the next check read it again."""
    from chalicelib.core import tokens

    target = tokens.bucket_of(tenant.user_id)
    neighbours = [f"usr_n{i}" for i in range(200_000) if tokens.bucket_of(f"usr_n{i}") == target][:2]
    with clock.frozen():
        token = _issue(tenant.user_id, tenant.workspace_id)[0]
        clock.advance(10)
        _in_another_container(lambda: tokens.bump_epoch(neighbours[0]))  # moves the tenant's bucket after the issue
        clock.advance(tokens.LEEWAY_SECONDS + 1)
        check = tokens.RevocationCheck()
        verifier = tokens.TokenVerifier(revocations=check)
        verifier.claims(token)
        assert check.reads == 2  # the watermark, then the tenant's item (the bucket moved after the issue)
        for _ in range(3):
            clock.advance(tokens.REVOCATION_CACHE_SECONDS)
            verifier.claims(token)
        assert check.reads == 5  # one watermark read per bound, the item trusted: read long after the move
        _in_another_container(lambda: tokens.bump_epoch(neighbours[1]))
        clock.advance(tokens.REVOCATION_CACHE_SECONDS)
        verifier.claims(token)
        assert check.reads == 7  # the bucket moved again: the watermark and the tenant's item


def test_service_token_revoked_in_another_container_within_the_bound(tenant: Tenant) -> None:
    from chalicelib.core import tokens

    with clock.frozen():
        token, claims = _issue("cli_svc", tenant.workspace_id, token_use="service")
        clock.advance(tokens.LEEWAY_SECONDS + 1)
        check = tokens.RevocationCheck()
        verifier = tokens.TokenVerifier(revocations=check)
        verifier.claims(token)
        assert check.reads == 1  # the watermark; a service token's jti has no marker yet
        _in_another_container(lambda: tokens.revoke_key(claims["jti"], claims["exp"], "t", None))
        clock.advance(tokens.REVOCATION_CACHE_SECONDS - 1)
        verifier.claims(token)  # within the bound
        clock.advance(1)
        with pytest.raises(Exception) as refused:
            verifier.claims(token)
        assert getattr(refused.value, "status", None) == 401


def test_revocation_and_its_watermark_are_written_together(tenant: Tenant) -> None:
    """The marker, the user's ``mrev`` and the watermark bucket land in one transaction."""
    from chalicelib.core import aws, tokens

    ddb = aws.client("dynamodb", settings().global_region)
    table = aws.table_name("revoked_tokens")
    with clock.frozen():
        tokens.revoke_key("tok_pair", clock.now() + 600, "t", tenant.user_id)
        now = clock.now()
    mark = ddb.get_item(TableName=table, Key={"jti": {"S": tokens.WATERMARK_KEY}})["Item"]
    assert float(mark[tokens.bucket_of(tenant.user_id)]["N"]) >= now
    assert "Item" in ddb.get_item(TableName=table, Key={"jti": {"S": "tok_pair"}})
    user = ddb.get_item(TableName=table, Key={"jti": {"S": f"user:{tenant.user_id}"}})["Item"]
    assert float(user["mrev"]["N"]) >= now
