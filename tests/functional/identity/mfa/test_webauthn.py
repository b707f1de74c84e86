"""Passkeys and security keys through the identity routes, driven by a software authenticator:
registration needs a session, sign-in with a discoverable passkey, the security key as second
factor, and what must be refused (replayed challenge, wrong origin, wrong RP ID, no user
verification, a cloned authenticator's stale counter, another user's key)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.mfa import webauthn as wa
from chalicelib.identity.signin import password_signin as signin
from chalicelib.identity.signin import sessions
from tests.softauthn import SoftAuthenticator

ORIGIN = "http://localhost:8002"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, stack: None) -> Any:
    monkeypatch.setenv("AUTH_URL", ORIGIN)
    settings.cache_clear()
    user = users.create_user("ada@example.com", email_verified=True)
    sid, _ = sessions.create_session(user.id, ["email"], caller=None)
    with Client(create_app("identity")) as client:
        yield client, user, {"Cookie": f"{sessions.COOKIE_NAME}={sid}", "Content-Type": "application/json",
                             "X-Requested-With": "test"}
    settings.cache_clear()


def post(client: Client, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return client.http.post(path, body=json.dumps(body),
                            headers={"Content-Type": "application/json", "X-Requested-With": "test", **(headers or {})})


def register(client: Client, headers: dict[str, str], kind_path: str, auth: SoftAuthenticator, **kw: Any) -> Any:
    opts = post(client, kind_path + "/options", {}, headers).json_body
    cred = auth.create(opts["publicKey"], kw.pop("origin", ORIGIN), **kw)
    return post(client, kind_path, {"challenge_id": opts["challenge_id"], "credential": cred, "name": "Laptop"}, headers)


def test_passkey_register_needs_a_session(env: Any) -> None:
    client, _, _ = env
    res = post(client, "/account/passkeys/options", {})
    assert res.status_code == 401


def test_passkey_register_then_sign_in_discoverable(env: Any) -> None:
    client, user, headers = env
    auth = SoftAuthenticator()
    res = register(client, headers, "/account/passkeys", auth)
    assert res.status_code == 201, res.body
    assert res.json_body["kind"] == "passkey"
    opts = client.http.get("/account/passkeys", headers=headers).json_body
    assert [c["name"] for c in opts["credentials"]] == ["Laptop"]

    options = post(client, "/signin/passkey/options", {}).json_body
    assert options["publicKey"]["userVerification"] == "required"
    assert options["publicKey"]["rpId"] == "localhost"
    assert not options["publicKey"].get("allowCredentials")  # discoverable: no e-mail needed
    res = post(client, "/signin/passkey/verify",
               {"challenge_id": options["challenge_id"], "credential": auth.get(options["publicKey"], ORIGIN)})
    assert res.status_code == 200, res.body
    assert sorted(res.json_body["amr"]) == ["hwk", "mfa", "user"]
    assert res.json_body["redirect_to"] == "http://localhost:8002/account"
    cookie = res.headers["Set-Cookie"]
    assert cookie.startswith(f"{sessions.COOKIE_NAME}=")
    assert "HttpOnly" in cookie
    stored = wa.list_credentials(user.id)[0]
    assert stored.sign_count == 1
    assert stored.last_used_at


def test_registration_options_require_resident_key_and_uv(env: Any) -> None:
    client, _, headers = env
    opts = post(client, "/account/passkeys/options", {}, headers).json_body["publicKey"]
    assert opts["authenticatorSelection"]["residentKey"] == "required"
    assert opts["authenticatorSelection"]["userVerification"] == "required"
    assert opts["rp"]["id"] == "localhost"


def test_replayed_challenge_is_refused(env: Any) -> None:
    client, _, headers = env
    auth = SoftAuthenticator()
    assert register(client, headers, "/account/passkeys", auth).status_code == 201
    options = post(client, "/signin/passkey/options", {}).json_body
    body = {"challenge_id": options["challenge_id"], "credential": auth.get(options["publicKey"], ORIGIN)}
    assert post(client, "/signin/passkey/verify", body).status_code == 200
    body["credential"] = auth.get(options["publicKey"], ORIGIN)  # fresh signature, same challenge
    again = post(client, "/signin/passkey/verify", body)
    assert again.status_code == 400
    assert again.json_body["code"] == "webauthn_failed"
    assert "Set-Cookie" not in again.headers


def test_registration_challenge_is_single_use(env: Any) -> None:
    client, _, headers = env
    opts = post(client, "/account/passkeys/options", {}, headers).json_body
    first = SoftAuthenticator().create(opts["publicKey"], ORIGIN)
    assert post(client, "/account/passkeys", {"challenge_id": opts["challenge_id"], "credential": first},
                headers).status_code == 201
    second = SoftAuthenticator().create(opts["publicKey"], ORIGIN)
    res = post(client, "/account/passkeys", {"challenge_id": opts["challenge_id"], "credential": second}, headers)
    assert res.status_code == 400


@pytest.mark.parametrize("where", ["register", "signin"])
@pytest.mark.parametrize("attack", [{"origin": "http://evil.example:8002"}, {"rp_id": "evil.example"}])
def test_wrong_origin_or_rp_id_is_refused(env: Any, where: str, attack: dict[str, str]) -> None:
    client, user, headers = env
    auth = SoftAuthenticator()
    if where == "register":
        res = register(client, headers, "/account/passkeys", auth, **attack)
        assert res.status_code == 400
        assert res.json_body["code"] == "webauthn_failed"
        assert wa.list_credentials(user.id) == []
        return
    assert register(client, headers, "/account/passkeys", auth).status_code == 201
    options = post(client, "/signin/passkey/options", {}).json_body
    cred = auth.get(options["publicKey"], attack.get("origin", ORIGIN), rp_id=attack.get("rp_id"))
    res = post(client, "/signin/passkey/verify", {"challenge_id": options["challenge_id"], "credential": cred})
    assert res.status_code == 400
    assert "Set-Cookie" not in res.headers


def test_passkey_without_user_verification_is_refused(env: Any) -> None:
    client, user, headers = env
    auth = SoftAuthenticator()
    assert register(client, headers, "/account/passkeys", auth, uv=False).status_code == 400
    assert register(client, headers, "/account/passkeys", auth).status_code == 201
    options = post(client, "/signin/passkey/options", {}).json_body
    res = post(client, "/signin/passkey/verify", {"challenge_id": options["challenge_id"],
                                                  "credential": auth.get(options["publicKey"], ORIGIN, uv=False)})
    assert res.status_code == 400


def test_stale_sign_counter_is_refused(env: Any) -> None:
    client, _, headers = env
    auth = SoftAuthenticator()
    assert register(client, headers, "/account/passkeys", auth).status_code == 201
    for expected, counter in ((200, 5), (400, 5), (400, 3), (200, 6)):
        options = post(client, "/signin/passkey/options", {}).json_body
        res = post(client, "/signin/passkey/verify", {
            "challenge_id": options["challenge_id"],
            "credential": auth.get(options["publicKey"], ORIGIN, counter=counter)})
        assert res.status_code == expected, (counter, res.body)


def test_security_key_as_second_factor(env: Any) -> None:
    client, user, headers = env
    key = SoftAuthenticator()
    res = register(client, headers, "/account/security-keys", key, uv=False)
    assert res.status_code == 201
    assert res.json_body["kind"] == "security_key"
    # a security key is not a passkey: it cannot sign in alone
    options = post(client, "/signin/passkey/options", {}).json_body
    res = post(client, "/signin/passkey/verify",
               {"challenge_id": options["challenge_id"], "credential": key.get(options["publicKey"], ORIGIN, uv=False)})
    assert res.status_code == 400

    token = signin.new_pending(user.id, ["pwd"], "http://localhost:8002/account")
    options = post(client, "/signin/mfa/webauthn/options", {"mfa_token": token}).json_body
    assert [c["id"] for c in options["publicKey"]["allowCredentials"]] == [wa.list_credentials(user.id)[0].credential_id]
    cred = key.get(options["publicKey"], ORIGIN, uv=False)
    res = post(client, "/signin/mfa/webauthn/verify",
               {"mfa_token": token, "challenge_id": options["challenge_id"], "credential": cred})
    assert res.status_code == 200, res.body
    assert {"pwd", "hwk", "mfa"} <= set(res.json_body["amr"])
    # the pending sign-in is consumed: the same token cannot finish twice
    options = post(client, "/signin/mfa/webauthn/options", {"mfa_token": token})
    assert options.status_code == 401


def test_someone_elses_security_key_is_refused(env: Any) -> None:
    client, user, headers = env
    mallory = users.create_user("mallory@example.com", email_verified=True)
    msid, _ = sessions.create_session(mallory.id, ["email"], caller=None)
    mkey = SoftAuthenticator()
    assert register(client, {"Cookie": f"{sessions.COOKIE_NAME}={msid}", "X-Requested-With": "test"}, "/account/security-keys", mkey,
                    uv=False).status_code == 201
    assert register(client, headers, "/account/security-keys", SoftAuthenticator(), uv=False).status_code == 201
    token = signin.new_pending(user.id, ["pwd"], "http://localhost:8002/account")
    options = post(client, "/signin/mfa/webauthn/options", {"mfa_token": token}).json_body
    res = post(client, "/signin/mfa/webauthn/verify", {
        "mfa_token": token, "challenge_id": options["challenge_id"],
        "credential": mkey.get(options["publicKey"], ORIGIN, uv=False)})
    assert res.status_code == 400


def test_delete_and_cross_site_refused(env: Any) -> None:
    client, user, headers = env
    assert register(client, headers, "/account/passkeys", SoftAuthenticator()).status_code == 201
    cid = wa.list_credentials(user.id)[0].credential_id
    evil = {**headers, "Origin": "http://evil.example"}
    assert client.http.delete(f"/account/passkeys/{cid}", headers=evil).status_code == 403
    assert client.http.delete(f"/account/passkeys/{cid}", headers=headers).status_code == 204
    assert wa.list_credentials(user.id) == []


def test_passkey_refused_while_locked(env: Any) -> None:
    from chalicelib.identity.signin import lockout

    client, user, headers = env
    auth = SoftAuthenticator()
    assert register(client, headers, "/account/passkeys", auth).status_code == 201
    for _ in range(10):
        reservation = lockout.reserve(user.id)
        assert reservation is not None
        lockout.failed(reservation)
    assert lockout.is_locked(user.id)
    options = post(client, "/signin/passkey/options", {}).json_body
    res = post(client, "/signin/passkey/verify",
               {"challenge_id": options["challenge_id"], "credential": auth.get(options["publicKey"], ORIGIN)})
    assert res.status_code == 400
    assert "Set-Cookie" not in res.headers
    lockout.unlock(user.id)
    options = post(client, "/signin/passkey/options", {}).json_body
    res = post(client, "/signin/passkey/verify",
               {"challenge_id": options["challenge_id"], "credential": auth.get(options["publicKey"], ORIGIN)})
    assert res.status_code == 200


def test_admin_mfa_reset_removes_security_keys_not_passkeys(env: Any) -> None:
    from chalicelib.identity.mfa import factors as mfa

    client, user, headers = env
    assert register(client, headers, "/account/passkeys", SoftAuthenticator()).status_code == 201
    assert register(client, headers, "/account/security-keys", SoftAuthenticator(), uv=False).status_code == 201
    assert "webauthn" in mfa.methods(user.id)
    mfa.reset(user.id)
    assert [c.kind for c in wa.list_credentials(user.id)] == ["passkey"]
    assert "webauthn" not in mfa.methods(user.id)
