"""Hosted sign-in pages and browser redirects at {auth_url} (HTML with a strict CSP, static files,
identifier-first discovery, SSO start/callback). Services render and decide; these views only glue."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from chalice import Response  # type: ignore[attr-defined]

from chalicelib.core.config import settings
from chalicelib.core.http.api import Api, Ctx
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, email, validate
from chalicelib.core.tenancy import get_workspace, workspaces_of
from chalicelib.identity.account import routes as account_routes
from chalicelib.identity.mfa import factors as mfa
from chalicelib.identity.mfa import webauthn
from chalicelib.identity.oauth.consent.decision import signin_client
from chalicelib.identity.pages import render as pages
from chalicelib.identity.signin import mfa_gate, redirects, sessions
from chalicelib.identity.signin.discovery import discover
from chalicelib.identity.signin.reset import RESET_PATH
from chalicelib.identity.sso import connections as sso_config
from chalicelib.identity.sso import flow as sso_flow
from chalicelib.identity.users import get_user

api = Api("identity")

START_FIELDS = {"email": F(str, required=True, max_len=254, check=email), "return_to": F(str, max_len=2048)}


def html_response(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body=body, status_code=status, headers={**pages.HTML_HEADERS, **(headers or {})})


def redirect(location: str, headers: dict[str, str] | None = None) -> Response:
    return Response(body="", status_code=302, headers={"Location": location, "Cache-Control": "no-store",
                                                       **(headers or {})})


def signin_url(return_to: str) -> str:
    return f"{settings().auth_url}/signin?{urlencode({'return_to': return_to})}"


@api.route("/signin", public=True)
def signin_page(ctx: Ctx) -> Any:
    return_to = ctx.query.get("return_to") or ""
    try:  # keep the caller's value (the JSON API checks it again); drop anything unsafe
        redirects.safe_return_to(return_to or None)
    except ApiError:
        return_to = ""
    return html_response(pages.signin_page(return_to, conditional=ctx.query.get("conditional") != "off",
                                           client=signin_client(return_to)))


@api.route("/signin/start", methods=["POST"], public=True)
def signin_start(ctx: Ctx) -> Any:
    body = validate(ctx.json(), START_FIELDS)
    return discover(body["email"], body.get("return_to"))


@api.route(mfa_gate.PAGE_PATH, public=True)
def mfa_required_page(ctx: Ctx) -> Any:
    """Where an e-mail-code sign-in goes when its workspace requires MFA (``signin/mfa_gate.py``)."""
    return_to = (ctx.query.get("return_to") or "")[:2048]
    if not (redirects.is_safe_relative(return_to) and return_to.startswith(mfa_gate.AUTHORIZE_PATH + "?")):
        return_to = ""
    session = sessions.session_from_request(ctx)
    user = get_user(session.user_id) if session else None
    name = None
    workspace_id = ctx.query.get("workspace_id") or ""
    if user is not None and workspace_id in [w["workspace_id"] for w in workspaces_of(user.id)]:
        name = get_workspace(workspace_id).name  # only a member learns the workspace's name
    again = mfa_gate.sign_in_again_url(return_to) if return_to else "/signin"
    return html_response(pages.mfa_required_page(
        workspace_name=name, signed_in=user is not None,
        has_second_factor=user is not None and mfa.has_second_factor(user.id),
        has_passkey=user is not None and bool(webauthn.list_credentials(user.id, webauthn.PASSKEY)), again=again))


@api.route("/signin/reset", public=True)
def reset_page(ctx: Ctx) -> Any:
    return html_response(pages.reset_page(None))


@api.route(RESET_PATH, public=True)
def reset_confirm_page(ctx: Ctx) -> Any:
    """The page the e-mailed reset link opens (``{auth_url}/reset?token=``, see ``signin.reset``)."""
    token = (ctx.query.get("token") or "")[:512]
    if not token:
        return html_response(pages.message_page("Reset link", "This reset link is incomplete.",
                                                link="/signin/reset", link_text="Ask for a new link"), 400)
    return html_response(pages.reset_page(token))


@api.route("/account", public=True)
def account_page(ctx: Ctx) -> Any:
    """HTML for browsers (``Accept: text/html``); the JSON account summary (``account.routes``) otherwise."""
    if "text/html" not in (ctx.header("accept") or ""):
        return account_routes.account(ctx)
    session = sessions.session_from_request(ctx)
    user = get_user(session.user_id) if session else None
    if user is None:
        return redirect(signin_url(settings().auth_url + "/account"))
    return html_response(pages.account_page(user.email))


@api.route("/static/{name}", public=True)
def static(ctx: Ctx, name: str) -> Any:
    found = pages.static_file(name)
    if found is None:
        raise ApiError(404, "not_found", "No such file.")
    content, content_type = found
    return Response(body=content, status_code=200, headers={
        "Content-Type": f"{content_type}; charset=utf-8", "Cache-Control": "public, max-age=300",
        "X-Content-Type-Options": "nosniff"})


def _error_page(err: ApiError) -> Response:
    return html_response(pages.message_page("Sign-in was not completed", err.detail), err.status)


@api.route("/sso/start", public=True)
def sso_start(ctx: Ctx) -> Any:
    conn = sso_config.routed((ctx.query.get("domain") or "").lower())
    if conn is None:
        return html_response(pages.message_page("Single sign-on", "Single sign-on is not set up for this domain."), 404)
    try:
        return redirect(sso_flow.start(conn, ctx.query.get("return_to"), ctx.query.get("login_hint")))
    except ApiError as err:
        return _error_page(err)


@api.route("/sso/social/start", public=True)
def social_start(ctx: Ctx) -> Any:
    try:
        return redirect(sso_flow.start_social(ctx.query.get("workspace_id") or "", ctx.query.get("return_to")))
    except ApiError as err:
        return _error_page(err)


@api.route("/sso/callback", public=True)
def sso_callback(ctx: Ctx) -> Any:
    q = ctx.query
    try:
        done = sso_flow.callback(q.get("state") or "", q.get("code") or "", q.get("error"), caller=ctx.caller)
    except ApiError as err:
        return _error_page(err)
    sid, _ = sessions.create_session(done.user_id, done.amr, caller=ctx.caller)
    return redirect(done.return_to, {"Set-Cookie": sessions.set_cookie_header(sid)})
