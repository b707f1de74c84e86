"""Account settings API at {auth_url}/account: signed in with the ``aiplat_sid`` cookie; every
state-changing call passes ``check_csrf``. Passkeys and security keys are served by ``mfa.webauthn_routes``;
connected apps (third-party OAuth clients the user allowed) by ``oauth/consent/grants.py``."""
from __future__ import annotations

from typing import Any

from chalicelib.core import audit
from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.http.validation import F, validate
from chalicelib.core.ids import is_id
from chalicelib.core.tenancy import workspaces_of
from chalicelib.identity import users as users_mod
from chalicelib.identity.account import api_tokens
from chalicelib.identity.mfa import factors as mfa
from chalicelib.identity.mfa import recovery_codes, totp
from chalicelib.identity.oauth.clients import get_client
from chalicelib.identity.oauth.consent import grants as consents
from chalicelib.identity.signin import lockout, sessions
from chalicelib.identity.signin import password_hashing as passwords
from chalicelib.identity.signin import password_policy as password_rule
from chalicelib.identity.signin import password_signin as signin

api = Api("identity")


def _session(ctx: Ctx, *, changes: bool = False, no_input: bool = False) -> sessions.SessionAttrs:
    """The caller's session; ``changes``: the call passes the CSRF guard; ``no_input``: its JSON body
    (optional) must be empty (400 for any field)."""
    record = sessions.require_session(ctx)
    if changes:
        sessions.check_csrf(ctx)
    if no_input:
        validate(ctx.json(required=False), {})
    return record


def _user(record: sessions.SessionAttrs) -> users_mod.UserAttrs:
    user = users_mod.get_user(record.user_id)
    if user is None or user.status != "active":
        raise ApiError(401, "session_required", "Sign in first: this call needs a signed-in browser session.")
    return user


# GET /account is registered by ``pages.routes``: browsers asking for HTML get the security
# settings page, every other caller this JSON summary.
def account(ctx: Ctx) -> Any:
    record = _session(ctx)
    user = _user(record)
    return {"user_id": user.id, "email": user.email, "email_verified": bool(user.email_verified),
            "display_name": user.display_name, "idp": user.idp, "has_password": bool(user.password_hash),
            "mfa": {"methods": mfa.methods(user.id), "totp": bool(user.totp_secret_enc),
                    "recovery_codes_left": recovery_codes.recovery_codes_left(user.id)},
            "session": {"id": record.session_id, "amr": record.amr},
            "workspaces": [{"workspace_id": w["workspace_id"], "role": w["role"]} for w in workspaces_of(user.id)]}


# --- sessions -------------------------------------------------------------------------------------

@api.route("/account/sessions", public=True)
def list_sessions(ctx: Ctx) -> Any:
    record = _session(ctx)
    items = [s.public(record.session_id) for s in sessions.list_sessions(record.user_id)]
    return {"sessions": items, "has_more": False, "next_cursor": None}


@api.route("/account/sessions/{session_id}", methods=["DELETE"], public=True)
def revoke_session(ctx: Ctx, session_id: str) -> Any:
    record = _session(ctx, changes=True, no_input=True)
    if not is_id(session_id, "sess") or not sessions.revoke_session(session_id, record.user_id):
        raise not_found("session")
    headers = {"Set-Cookie": sessions.clear_cookie_header()} if session_id == record.session_id else {}
    return json_response({"id": session_id, "revoked": True}, headers=headers)


# --- API tokens -----------------------------------------------------------------------------------

@api.route("/account/api-tokens", public=True)
def list_api_tokens(ctx: Ctx) -> Any:
    record = _session(ctx)
    return {"api_tokens": [t.public() for t in api_tokens.list_tokens(record.user_id)], "has_more": False,
            "next_cursor": None}


@api.route("/account/api-tokens", methods=["POST"], public=True)
def create_api_token(ctx: Ctx) -> Any:
    record = _session(ctx, changes=True)
    body = validate(ctx.json(), {
        "name": F(str, required=True, min_len=1, max_len=100),
        "workspace_id": F(str, required=True, min_len=1, max_len=64),
        "expires_in_days": F(int, minimum=1, maximum=api_tokens.max_days()),
    })
    if not is_id(body["workspace_id"], "ws"):
        raise validation_error([{"field": "workspace_id", "message": "must be a workspace id (ws_...)"}])
    token, item = api_tokens.create(record.user_id, record.amr, name=body["name"].strip(),
                                    workspace_id=body["workspace_id"],
                                    expires_in_days=body.get("expires_in_days", api_tokens.DEFAULT_DAYS))
    return json_response({**item.public(), "token": token}, 201)


@api.route("/account/api-tokens/{token_id}", methods=["DELETE"], public=True)
def revoke_api_token(ctx: Ctx, token_id: str) -> Any:
    record = _session(ctx, changes=True, no_input=True)
    if not is_id(token_id, "tok"):
        raise not_found("API token")
    return api_tokens.revoke(record.user_id, token_id).public()


# --- connected apps (third-party OAuth clients the user allowed) ---------------------------------------

@api.route("/account/connected-apps", public=True)
def list_connected_apps(ctx: Ctx) -> Any:
    record = _session(ctx)
    return {"connected_apps": consents.connected_apps(record.user_id, get_client), "has_more": False,
            "next_cursor": None}


@api.route("/account/connected-apps/{app_id}", methods=["DELETE"], public=True)
def revoke_connected_app(ctx: Ctx, app_id: str) -> Any:
    """Ends the app's access at once: its refresh and access tokens are refused, its consents deleted."""
    record = _session(ctx, changes=True, no_input=True)
    user = _user(record)
    removed = consents.withdraw(audit.Actor("user", user.id, user.email), app_id, caller=ctx.caller) \
        if len(app_id) <= 40 else []
    if not removed:
        raise not_found("connected app")
    return {"id": app_id, "revoked": True, "workspaces": sorted(c.workspace_id for c in removed)}


# --- TOTP and recovery codes ------------------------------------------------------------------------

@api.route("/account/totp/setup", methods=["POST"], public=True)
def totp_setup(ctx: Ctx) -> Any:
    record = _session(ctx, changes=True, no_input=True)
    user = _user(record)
    return totp.start_setup(user.id, user.email)


@api.route("/account/totp/confirm", methods=["POST"], public=True)
def totp_confirm(ctx: Ctx) -> Any:
    record = _session(ctx, changes=True)
    body = validate(ctx.json(), {"code": F(str, required=True, min_len=6, max_len=6)})
    codes = totp.confirm_setup(record.user_id, body["code"])
    return {"totp": True, "recovery_codes": codes,
            "detail": "Store these recovery codes now; each works once and they are not shown again."}


@api.route("/account/recovery-codes", methods=["POST"], public=True)
def regenerate_recovery_codes(ctx: Ctx) -> Any:
    record = _session(ctx, changes=True)
    body = validate(ctx.json(), {"code": F(str, required=True, min_len=6, max_len=6)})
    if not totp.has_totp(record.user_id):
        raise ApiError(409, "totp_not_enabled", "Set up an authenticator app first.")
    result = totp.check_totp(record.user_id, body["code"])
    if result == totp.REUSED:
        raise ApiError(400, "code_already_used", "This code was already used. Wait for the next code in your "
                                                 "authenticator app (a new one appears every 30 seconds).")
    if result != totp.ACCEPTED:
        raise ApiError(400, "invalid_code", "The authenticator code is not correct.")
    return {"recovery_codes": recovery_codes.regenerate_recovery_codes(record.user_id),
            "detail": "The previous recovery codes no longer work."}


# --- password -------------------------------------------------------------------------------------

@api.route("/account/password", methods=["POST"], public=True)
def set_password(ctx: Ctx) -> Any:
    record = _session(ctx, changes=True)
    body = validate(ctx.json(), {"current_password": F(str, max_len=1024), "new_password": F(str, required=True, max_len=1024)})
    user = _user(record)
    if user.idp:
        raise ApiError(409, "password_managed_by_idp", "Your password is managed by your organisation's identity provider.")
    problem = password_rule.problem(body["new_password"], email=user.email)
    if problem:
        raise validation_error([{"field": "new_password", "message": problem}])
    if user.password_hash:
        current = body.get("current_password")
        if not current:
            raise validation_error([{"field": "current_password", "message": "is required to change the password"}])
        reservation = lockout.reserve(user.id)
        if reservation is None:
            passwords.burn(current)
            raise ApiError(400, "invalid_current_password", "The current password is not correct.")
        if not passwords.verify_password(user.password_hash, current):
            lockout.failed(reservation, caller=ctx.caller)
            raise ApiError(400, "invalid_current_password", "The current password is not correct.")
        lockout.release(reservation)
    elif not mfa.has_second_factor(user.id):
        raise ApiError(409, "mfa_setup_required", "Set up an authenticator app or a security key first: password "
                                                  "sign-in always asks for a second factor.")
    signin.set_password_hash(user.id, passwords.hash_password(body["new_password"]))
    others = sessions.revoke_all(user.id, keep_session_id=record.session_id)
    return {"has_password": True, "other_sessions_signed_out": others}
