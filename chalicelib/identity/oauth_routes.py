"""OAuth 2.0 / OIDC provider routes at {auth_url}: authorize, userinfo, revoke. The token grants live
in ``oauth.GRANTS`` (served by ``routes.token``); the logic is in ``provider``."""
from __future__ import annotations

from typing import Any

from chalice import Response

from chalicelib.core.tokens import bearer
from chalicelib.core.web import FORM, Api, Ctx, json_response
from chalicelib.identity import provider, sessions
from chalicelib.identity.clients import authenticate_basic
from chalicelib.identity.oauth import oauth_error

api = Api("identity")


def _redirect(location: str) -> Response:
    return Response(body="", status_code=302, headers={"Location": location, "Cache-Control": "no-store"})


@api.route("/oauth2/authorize", public=True)
def authorize(ctx: Ctx) -> Any:
    raw = ctx.request.query_params
    if raw is not None and any(len(raw.getlist(key)) > 1 for key in raw):
        # RFC 6749 section 3.1: no parameter twice (which redirect_uri would we trust?)
        raise oauth_error(400, "invalid_request", "A parameter is repeated.")
    result = provider.authorize(ctx.query, sessions.session_from_request(ctx), "/oauth2/authorize")
    return _redirect(result.location)


@api.route("/userinfo", methods=["GET", "POST"], public=True, content_types=[FORM, "application/json"])
def userinfo(ctx: Ctx) -> Any:
    return provider.userinfo(bearer(ctx.header("authorization")))


@api.route("/oauth2/revoke", methods=["POST"], public=True, content_types=[FORM])
def revoke(ctx: Ctx) -> Any:
    provider.revoke(ctx.form(), authenticate_basic(ctx.header("authorization")))
    return json_response({})


@api.route("/oauth2/logout", public=True)
def logout(ctx: Ctx) -> Any:
    """RP-initiated logout (``identity/logout.py``): ends the browser's sign-in session for a valid
    ``id_token_hint`` of its user, then returns to the client's registered origin."""
    from chalicelib.identity import logout as rp_logout  # noqa: PLC0415
    from chalicelib.identity.pages import HTML_HEADERS, render  # noqa: PLC0415

    record = sessions.session_from_request(ctx)
    ends, location = rp_logout.end_session(ctx.query, record)
    headers: dict[str, Any] = {"Cache-Control": "no-store"}
    if ends and record is not None:
        sessions.revoke_session(record.session_id, record.user_id)
        headers["Set-Cookie"] = sessions.clear_cookie_header()
    if location:
        return Response(body="", status_code=302, headers={**headers, "Location": location})
    body = ("<p>You are signed out.</p>" if ends or record is None else
            "<p>You are still signed in here: the sign-out request could not be confirmed.</p>")
    return Response(body=render("Sign out", body), status_code=200, headers={**HTML_HEADERS, **headers})
