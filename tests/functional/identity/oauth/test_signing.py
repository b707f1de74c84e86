"""Identity core: discovery, JWKS, independent verification, introspection, exchange, rotation."""
from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode

import jwt as pyjwt
import pytest
from chalice.test import Client
from jose import jwt

from chalicelib.core import clock, process_state, tokens
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store import kms
from chalicelib.core.store.tables import global_model
from chalicelib.groups import create_app
from chalicelib.identity.oauth import signing
from chalicelib.identity.oauth.clients import create_client, register_client
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from tests.functional.conftest import Tenant, bearer, make_tenant

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _identity() -> Client:
    return Client(create_app("identity"))


def _basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def _introspect(token: str, headers: dict[str, str]) -> Any:
    with _identity() as c:
        return c.http.post("/oauth2/introspect", headers={**FORM, **headers}, body=urlencode({"token": token}))


def _exchange(subject_token: str, workspace_id: str) -> Any:
    body = urlencode({"grant_type": TOKEN_EXCHANGE, "subject_token": subject_token,
                      "subject_token_type": ACCESS_TOKEN_TYPE, "workspace_id": workspace_id})
    with _identity() as c:
        return c.http.post("/oauth2/token", headers=FORM, body=body)


def test_discovery_lists_existing_endpoints(stack: None) -> None:
    with _identity() as c:
        doc = json.loads(c.http.get("/.well-known/openid-configuration").body)
        assert doc["issuer"] == settings().auth_url
        for field in ("jwks_uri", "token_endpoint", "introspection_endpoint"):
            path = doc[field].removeprefix(settings().auth_url)
            method = "GET" if field == "jwks_uri" else "POST"
            r = c.http.request(method, path, headers=FORM, body=b"")
            assert r.status_code != 404, field


def test_jwks_has_rsa_keys_with_kid_use_alg(stack: None) -> None:
    with _identity() as c:
        keys = json.loads(c.http.get("/.well-known/jwks.json").body)["keys"]
    assert len(keys) == 1
    assert {"kty", "n", "e", "kid", "use", "alg"} <= set(keys[0])
    assert keys[0]["alg"] == "RS256"
    assert "d" not in keys[0]
    assert "p" not in keys[0]  # never private parts


def test_pyjwt_verifies_our_token_with_only_discovery_and_jwks(tenant: Tenant) -> None:
    with _identity() as c:
        doc = json.loads(c.http.get("/.well-known/openid-configuration").body)
        jwks = json.loads(c.http.get(doc["jwks_uri"].removeprefix(settings().auth_url)).body)
    kid = pyjwt.get_unverified_header(tenant.token)["kid"]
    key = pyjwt.PyJWK([k for k in jwks["keys"] if k["kid"] == kid][0])
    claims = pyjwt.decode(tenant.token, key.key, algorithms=["RS256"], audience="service-api", issuer=doc["issuer"])
    assert claims["sub"] == tenant.user_id
    assert claims["workspace_id"] == tenant.workspace_id
    assert {"roles", "email", "amr", "exp", "iat", "jti"} <= set(claims)


def test_private_key_is_stored_encrypted(stack: None) -> None:
    item = next(iter(global_model(tokens.SigningKeyAttrs).scan()))
    blob = base64.b64decode(item.private_blob)
    assert b"PRIVATE KEY" not in blob
    assert b"-----BEGIN" not in blob


def test_signer_loads_private_key_once(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = kms.decrypt

    def counting(*args: Any, **kwargs: Any) -> bytes:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kms, "decrypt", counting)
    process_state.reset_all()
    for _ in range(5):
        signing.issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                                   roles=["admin"], amr=["pwd"])
    assert len(calls) == 1


class TestIntrospection:
    def test_requires_client_credentials(self, tenant: Tenant) -> None:
        r = _introspect(tenant.token, {})
        assert r.status_code == 401
        assert json.loads(r.body)["error"] == "invalid_client"
        cid, _ = create_client("svc")
        assert _introspect(tenant.token, _basic(cid, "wrong-secret")).status_code == 401
        assert _introspect(tenant.token, _basic("cli_unknown", "x")).status_code == 401
        assert _introspect(tenant.token, {"Authorization": "Basic !!!"}).status_code == 401

    def test_public_client_cannot_introspect(self, tenant: Tenant) -> None:
        cid, _ = create_client("spa", confidential=False)
        assert _introspect(tenant.token, _basic(cid, "")).status_code == 401

    def test_active_token_returns_claims(self, tenant: Tenant) -> None:
        cid, secret = register_client("svc", confidential=True, grant_types=["client_credentials"],
                                      workspace_id=tenant.workspace_id, roles=["viewer"])
        assert secret is not None
        body = json.loads(_introspect(tenant.token, _basic(cid, secret)).body)
        assert body["active"] is True
        assert body["sub"] == tenant.user_id
        assert body["workspace_id"] == tenant.workspace_id
        assert body["aud"] == "service-api"
        assert body["roles"] == ["admin"]

    @pytest.mark.parametrize("case", ["expired", "revoked", "garbage"])
    def test_inactive(self, tenant: Tenant, case: str) -> None:
        cid, secret = register_client("svc", confidential=True, grant_types=["client_credentials"],
                                      workspace_id=tenant.workspace_id, roles=["viewer"])
        assert secret is not None
        token = tenant.token
        if case == "expired":
            clock.advance(settings().access_token_ttl + 5)
        elif case == "revoked":
            tokens.revoke_key(tenant.claims["jti"], tenant.claims["exp"], "test", tenant.user_id)
        else:
            token = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"
        r = _introspect(token, _basic(cid, secret))
        assert r.status_code == 200
        assert json.loads(r.body) == {"active": False}


class TestWorkspaceSwitch:
    def test_exchange_issues_token_for_other_workspace_with_roles_there(self, stack: None) -> None:
        a = make_tenant(email="alex@example.com", name="Alpha")
        b = make_tenant(email="alex@example.com", name="Beta EU", residency="eu-central")
        r = _exchange(a.token, b.workspace_id)
        assert r.status_code == 200, r.body
        body = json.loads(r.body)
        assert body["issued_token_type"] == ACCESS_TOKEN_TYPE
        assert body["token_type"] == "Bearer"
        with Client(create_app("platform")) as c:
            me = json.loads(c.http.get("/v1/me", headers=bearer(body["access_token"])).body)
        assert me["workspace_id"] == b.workspace_id
        assert me["roles"] == ["admin"]
        assert {w["workspace_id"] for w in me["workspaces"]} == {a.workspace_id, b.workspace_id}

    def test_exchange_refused_for_workspace_user_is_not_in(self, stack: None) -> None:
        a = make_tenant(email="alex@example.com", name="Alpha")
        other = make_tenant(email="mallory@example.com", name="Other")
        r = _exchange(a.token, other.workspace_id)
        unknown = _exchange(a.token, "ws_01HZZZZZZZZZZZZZZZZZZZZZZZ")
        # RFC 8693 section 2.2.2: an unacceptable target; the same answer whether the workspace exists or not
        assert r.status_code == 400
        assert unknown.status_code == 400
        assert json.loads(r.body)["error"] == json.loads(unknown.body)["error"] == "invalid_target"
        assert r.headers["Content-Type"] == "application/json"

    def test_exchange_refused_with_invalid_subject_token(self, tenant: Tenant) -> None:
        r = _exchange(tenant.token[:-4] + "AAAA", tenant.workspace_id)
        assert r.status_code == 400
        assert json.loads(r.body)["error"] == "invalid_grant"

    def test_exchange_into_mfa_workspace_needs_mfa(self, stack: None) -> None:
        a = make_tenant(email="alex@example.com", name="Alpha")
        strict = make_tenant(email="alex@example.com", name="Strict", enforce_mfa=True)
        no_mfa, _ = signing.issue_access_token(user_id=a.user_id, email=a.email, workspace_id=a.workspace_id,
                                               roles=["admin"], amr=["pwd"])
        r = _exchange(no_mfa, strict.workspace_id)
        assert r.status_code == 400
        assert json.loads(r.body)["error"] == "invalid_grant"
        assert json.loads(r.body)["reason"] == "mfa_required"
        assert _exchange(a.token, strict.workspace_id).status_code == 200

    @pytest.mark.parametrize("form", [
        {"grant_type": "password"},
        {"grant_type": TOKEN_EXCHANGE, "subject_token_type": "urn:x"},
        {"grant_type": TOKEN_EXCHANGE, "subject_token_type": ACCESS_TOKEN_TYPE},
    ])
    def test_bad_token_requests(self, tenant: Tenant, form: dict[str, str]) -> None:
        with _identity() as c:
            r = c.http.post("/oauth2/token", headers=FORM, body=urlencode(form))
        assert r.status_code == 400
        assert json.loads(r.body)["error"] in {"unsupported_grant_type", "invalid_request"}


class TestKeyRotation:
    def test_previous_key_verifies_until_retired(self, tenant: Tenant) -> None:
        old_kid = pyjwt.get_unverified_header(tenant.token)["kid"]
        new_kid = signing.rotate()
        assert new_kid != old_kid
        tokens.verifier().clear()
        with _identity() as c:
            kids = {k["kid"] for k in json.loads(c.http.get("/.well-known/jwks.json").body)["keys"]}
        assert kids == {old_kid, new_kid}
        new_token, _ = signing.issue_access_token(user_id=tenant.user_id, email=tenant.email,
                                                  workspace_id=tenant.workspace_id, roles=["admin"], amr=["pwd"])
        assert pyjwt.get_unverified_header(new_token)["kid"] == new_kid
        assert tokens.verifier().claims(tenant.token)["sub"] == tenant.user_id  # old key still accepted
        assert tokens.verifier().claims(new_token)["sub"] == tenant.user_id

    def test_retired_key_tokens_refused(self, tenant: Tenant) -> None:
        """A token of a retired key is refused for the key, even if its own exp were still in the future
        (no issued token can outlive its key's retirement, so one is forged with the old private key)."""
        old_kid, old_key = signing.signer().current()
        far = int(clock.now()) + 10 * settings().max_api_token_ttl
        forged = jwt.encode({**tenant.claims, "exp": far, "jti": "tok_far"}, old_key, algorithm="RS256",
                            headers={"kid": old_kid, "typ": "at+jwt"})
        signing.rotate()
        tokens.verifier().clear()
        assert tokens.verifier().claims(forged)["jti"] == "tok_far"  # retiring: still published
        clock.advance(settings().max_api_token_ttl + 120)
        assert old_kid in signing.retire_expired()
        tokens.verifier().clear()
        with pytest.raises(ApiError) as err:
            tokens.verifier().claims(forged)
        assert err.value.status == 401
        assert "not signed by a key of this issuer" in err.value.detail
        with _identity() as c:
            kids = {k["kid"] for k in json.loads(c.http.get("/.well-known/jwks.json").body)["keys"]}
        assert old_kid not in kids

    def test_retiring_key_unpublished_at_retire_time_even_without_the_job(self, tenant: Tenant) -> None:
        old_kid, old_key = signing.signer().current()
        far = int(clock.now()) + 10 * settings().max_api_token_ttl
        forged = jwt.encode({**tenant.claims, "exp": far, "jti": "tok_far2"}, old_key, algorithm="RS256",
                            headers={"kid": old_kid, "typ": "at+jwt"})
        signing.rotate()
        clock.advance(settings().max_api_token_ttl + 120)  # retire_at passed; the hourly job has not run
        tokens.verifier().keyring.invalidate()
        with pytest.raises(ApiError) as err:
            tokens.verifier().claims(forged)
        assert "not signed by a key of this issuer" in err.value.detail


class TestIntrospectionTenancy:
    """A confidential client of workspace B must not learn anything about a token of workspace A."""

    def test_other_workspace_client_sees_inactive(self, tenant: Tenant) -> None:
        other = make_tenant("b-owner@example.com", name="B")
        cid, secret = register_client("b-service", confidential=True, grant_types=["client_credentials"],
                                      workspace_id=other.workspace_id, roles=["viewer"])
        assert secret is not None
        r = _introspect(tenant.token, _basic(cid, secret))
        assert r.status_code == 200
        assert json.loads(r.body) == {"active": False}
        # the same client does see a token of its own workspace
        assert json.loads(_introspect(other.token, _basic(cid, secret)).body)["active"] is True

    def test_unbound_client_sees_only_tokens_issued_to_it(self, tenant: Tenant) -> None:
        cid, secret = create_client("svc")
        assert json.loads(_introspect(tenant.token, _basic(cid, secret)).body) == {"active": False}


def test_client_credentials_token_cannot_act_as_a_user(tenant: Tenant) -> None:
    """A service principal's token creates no workspace (nor any other user-level action)."""
    cid, secret = register_client("svc", confidential=True, grant_types=["client_credentials"],
                                  workspace_id=tenant.workspace_id, roles=["admin"])
    assert secret is not None
    with Client(create_app("identity")) as c:
        r = c.http.post("/oauth2/token", headers={**_basic(cid, secret),
                                                  "Content-Type": "application/x-www-form-urlencoded"},
                        body="grant_type=client_credentials")
        assert r.status_code == 200, r.body
        service_token = json.loads(r.body)["access_token"]
    with Client(create_app("platform")) as p:
        before = p.http.get("/v1/workspaces", headers=bearer(tenant.token)).json_body
        r = p.http.post("/v1/workspaces", headers={**bearer(service_token), "Content-Type": "application/json"},
                        body=json.dumps({"name": "Squat", "residency": "us-east"}))
        assert r.status_code == 403
        assert json.loads(r.body)["code"] == "user_token_required"
        assert p.http.get("/v1/workspaces", headers=bearer(tenant.token)).json_body == before
