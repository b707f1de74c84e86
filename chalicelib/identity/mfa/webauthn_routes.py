"""WebAuthn JSON endpoints at {auth_url}: passkey and security-key registration (signed-in session),
passkey sign-in (discoverable) and security key as the second factor after a password."""
from __future__ import annotations

from typing import Any

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, validate
from chalicelib.identity.mfa import webauthn as wa
from chalicelib.identity.signin import lockout, sessions
from chalicelib.identity.signin import password_signin as signin
from chalicelib.identity.signin.redirects import safe_return_to
from chalicelib.identity.users import get_user

api = Api("identity")

REGISTER_FIELDS = {"challenge_id": F(str, required=True, max_len=256),
                   "credential": F(dict, required=True), "name": F(str, max_len=64)}
VERIFY_FIELDS = {"challenge_id": F(str, required=True, max_len=256), "credential": F(dict, required=True),
                 "return_to": F(str, max_len=2048, nullable=True)}
MFA_OPTIONS_FIELDS = {"mfa_token": F(str, required=True, max_len=2048)}
MFA_VERIFY_FIELDS = {"challenge_id": F(str, required=True, max_len=256), "credential": F(dict, required=True),
                     "mfa_token": F(str, required=True, max_len=2048)}
PATHS = {wa.PASSKEY: "/account/passkeys", wa.SECURITY_KEY: "/account/security-keys"}


def _session_user(ctx: Ctx) -> Any:
    session = sessions.require_session(ctx)
    user = get_user(session.user_id)
    if user is None:
        raise ApiError(401, "not_signed_in", "Sign in first.")
    return user


def _signed_in(sid: str, record: Any, redirect_to: str) -> Response:
    return json_response({"redirect_to": redirect_to, "session_id": record.session_id, "amr": record.amr},
                         headers={"Set-Cookie": sessions.set_cookie_header(sid)})


def _register_routes(kind: str) -> None:
    base = PATHS[kind]

    def list_(ctx: Ctx) -> Any:
        user = _session_user(ctx)
        return {"credentials": [wa.public_view(c) for c in wa.list_credentials(user.id, kind)]}

    def options(ctx: Ctx) -> Any:
        user = _session_user(ctx)
        sessions.check_csrf(ctx)
        validate(ctx.json(required=False), {})
        return wa.registration_options(user, kind)

    def register(ctx: Ctx) -> Any:
        user = _session_user(ctx)
        sessions.check_csrf(ctx)
        body = validate(ctx.json(), REGISTER_FIELDS)
        cred = wa.verify_registration(user, body["challenge_id"], body["credential"], body.get("name") or "")
        return json_response(wa.public_view(cred), 201)

    def delete(ctx: Ctx, credential_id: str) -> Any:
        user = _session_user(ctx)
        sessions.check_csrf(ctx)
        validate(ctx.json(required=False), {})
        wa.delete_credential(user.id, credential_id, kind)
        return Response(body="", status_code=204, headers={"Cache-Control": "no-store"})

    for fn, path, method in ((list_, base, "GET"), (options, base + "/options", "POST"),
                             (register, base, "POST"), (delete, base + "/{credential_id}", "DELETE")):
        fn.__name__ = fn.__qualname__ = f"{kind}_{fn.__name__.strip('_')}"
        api.route(path, methods=[method], public=True)(fn)


for _kind in wa.KINDS:
    _register_routes(_kind)


@api.route("/signin/passkey/options", methods=["POST"], public=True)
def passkey_options(ctx: Ctx) -> Any:
    return wa.authentication_options(wa.PASSKEY)


@api.route("/signin/passkey/verify", methods=["POST"], public=True)
def passkey_verify(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), VERIFY_FIELDS)
    return_to = safe_return_to(body.get("return_to"))
    who = wa.verify_authentication(body["challenge_id"], body["credential"], wa.PASSKEY)
    user = get_user(who.user_id)
    if user is None or user.status != "active" or lockout.is_locked(who.user_id):
        # a locked or disabled account signs in with nothing until it is unlocked / enabled
        raise ApiError(400, "webauthn_failed", "The security key or passkey response could not be verified.")
    lockout.clear(who.user_id)
    sid, record = sessions.create_session(who.user_id, who.amr, caller=ctx.caller)
    return _signed_in(sid, record, return_to)


def _pending(token: str) -> Any:
    pending = signin.pending_from_mfa_token(token)
    if pending is None:
        raise ApiError(401, "mfa_token_invalid", "The sign-in step expired; enter your password again.")
    return pending


@api.route("/signin/mfa/webauthn/options", methods=["POST"], public=True)
def mfa_options(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), MFA_OPTIONS_FIELDS)
    pending = _pending(body["mfa_token"])
    return wa.authentication_options(wa.SECURITY_KEY, user_id=pending.user_id)


@api.route("/signin/mfa/webauthn/verify", methods=["POST"], public=True)
def mfa_verify(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), MFA_VERIFY_FIELDS)
    pending = _pending(body["mfa_token"])
    who = wa.verify_authentication(body["challenge_id"], body["credential"], wa.SECURITY_KEY)
    if who.user_id != pending.user_id:
        raise ApiError(400, "webauthn_failed", "The security key or passkey response could not be verified.")
    sid, record = signin.complete(pending, who.amr, caller=ctx.caller)
    return _signed_in(sid, record, pending.return_to)
