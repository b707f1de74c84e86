"""JSON sign-in API at {auth_url} (called with fetch() by the hosted pages).

Every POST here passes ``check_csrf`` (JSON content type + our Origin, or ``X-Requested-With`` for a
non-browser caller), which also blocks login CSRF, then the per-address and per-IP limits of
``limits`` (429 with ``Retry-After``). Answers that could reveal whether an address has an
account are identical for every address (status and body).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.http.api import Api, Ctx, json_response
from chalicelib.core.http.validation import F, email, validate
from chalicelib.identity.signin import email_codes, limits, reset, sessions
from chalicelib.identity.signin import password_signin as signin
from chalicelib.identity.signin.redirects import safe_return_to

api = Api("identity")

ACCEPTED = {"status": "accepted",
            "detail": "If the address can receive it, a message is on its way. Check your inbox."}


def _signed_in(redirect_to: str, sid: str, record: sessions.SessionAttrs) -> Any:
    return json_response({"redirect_to": redirect_to, "session_id": record.session_id, "amr": record.amr},
                         headers={"Set-Cookie": sessions.set_cookie_header(sid)})


def _limit_signin(ctx: Ctx, subject: str) -> None:
    limits.hit(limits.SIGNIN_PER_IP, ctx.caller.ip)
    limits.hit(limits.SIGNIN_PER_ADDRESS, subject)


def _limit_mail(ctx: Ctx, address: str) -> None:
    limits.hit(limits.MAIL_PER_IP, ctx.caller.ip)
    limits.hit(limits.MAIL_PER_ADDRESS, address)


@api.route("/signin/password", methods=["POST"], public=True)
def signin_password(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), {"email": F(str, required=True, check=email),
                                 "password": F(str, required=True, min_len=1, max_len=1024),
                                 "return_to": F(str, max_len=2048, nullable=True)})
    return_to = safe_return_to(body.get("return_to"))
    _limit_signin(ctx, body["email"])
    return signin.password_signin(body["email"], body["password"], return_to, caller=ctx.caller)


@api.route("/signin/mfa", methods=["POST"], public=True)
def signin_mfa(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), {"mfa_token": F(str, required=True, min_len=1, max_len=128),
                                 "code": F(str, required=True, min_len=1, max_len=32)})
    _limit_signin(ctx, body["mfa_token"])
    pending, sid, record = signin.mfa_step(body["mfa_token"], body["code"], caller=ctx.caller)
    return _signed_in(pending.return_to, sid, record)


@api.route("/signin/email-code", methods=["POST"], public=True)
def signin_email_code(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), {"email": F(str, required=True, check=email)})
    _limit_mail(ctx, body["email"])
    email_codes.request_code(body["email"], caller=ctx.caller)
    return json_response(ACCEPTED, 202)


@api.route("/signin/email-code/verify", methods=["POST"], public=True)
def signin_email_code_verify(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), {"email": F(str, required=True, check=email),
                                 "code": F(str, required=True, min_len=1, max_len=16),
                                 "return_to": F(str, max_len=2048, nullable=True)})
    return_to = safe_return_to(body.get("return_to"))
    _limit_signin(ctx, body["email"])
    user = email_codes.verify_code(body["email"], body["code"])
    return signin.after_first_factor(user.id, ["email"], return_to, caller=ctx.caller, respond=_signed_in)


@api.route("/signin/reset", methods=["POST"], public=True)
def signin_reset(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), {"email": F(str, required=True, check=email)})
    _limit_mail(ctx, body["email"])
    reset.request_reset(body["email"], caller=ctx.caller)
    return json_response(ACCEPTED, 202)


@api.route("/signin/reset/confirm", methods=["POST"], public=True)
def signin_reset_confirm(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), {"token": F(str, required=True, min_len=1, max_len=256),
                                 "new_password": F(str, required=True, max_len=1024)})
    reset.confirm_reset(body["token"], body["new_password"], caller=ctx.caller)
    return {"status": "password_changed", "detail": "Your password was changed and every session was signed out.",
            "redirect_to": safe_return_to("/signin")}


@api.route("/signout", methods=["POST"], public=True)
def signout(ctx: Ctx) -> Any:
    sessions.check_csrf(ctx)
    validate(ctx.json(required=False), {})
    record = sessions.session_from_request(ctx)
    if record is not None:
        sessions.revoke_session(record.session_id, record.user_id)
    return json_response({"status": "signed_out"}, headers={"Set-Cookie": sessions.clear_cookie_header()})
