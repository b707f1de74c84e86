"""OAuth 2.0 / OIDC provider routes at {auth_url}: discovery, JWKS, authorize, token, introspection,
userinfo, revocation, RP-initiated logout. The logic lives in the modules of ``oauth``; these handlers
only parse and answer."""
from __future__ import annotations

from typing import Any

from chalice import Response

from chalicelib.core.tokens import bearer, verifier
from chalicelib.core.web import FORM, Api, Ctx, json_response
from chalicelib.identity.oauth import authorize as authorize_mod
from chalicelib.identity.oauth import discovery, introspection, revocation, token_endpoint
from chalicelib.identity.oauth import logout as rp_logout
from chalicelib.identity.oauth import userinfo as userinfo_mod
from chalicelib.identity.oauth.clients import authenticate_basic
from chalicelib.identity.oauth.errors import invalid_client, oauth_error
from chalicelib.identity.pages.render import HTML_HEADERS, render
from chalicelib.identity.signin import sessions

api = Api("identity")


def _redirect(location: str) -> Response:
    return Response(body="", status_code=302, headers={"Location": location, "Cache-Control": "no-store"})


@api.route("/.well-known/openid-configuration", public=True)
def openid_configuration(ctx: Ctx) -> Any:
    return json_response(discovery.discovery(), headers={"Cache-Control": "public, max-age=300"})


@api.route("/.well-known/jwks.json", public=True)
def jwks(ctx: Ctx) -> Any:
    return json_response({"keys": verifier().keyring.jwks()}, headers={"Cache-Control": "public, max-age=60"})


@api.route("/oauth2/authorize", public=True)
def authorize(ctx: Ctx) -> Any:
    raw = ctx.request.query_params
    if raw is not None and any(len(raw.getlist(key)) > 1 for key in raw):
        # RFC 6749 section 3.1: no parameter twice (which redirect_uri would we trust?)
        raise oauth_error(400, "invalid_request", "A parameter is repeated.")
    result = authorize_mod.authorize(ctx.query, sessions.session_from_request(ctx), "/oauth2/authorize")
    return _redirect(result.location)


@api.route("/oauth2/token", methods=["POST"], public=True, content_types=[FORM])
def token(ctx: Ctx) -> Any:
    return token_endpoint.token(ctx.form(), authenticate_basic(ctx.header("authorization")))


@api.route("/oauth2/introspect", methods=["POST"], public=True, content_types=[FORM])
def introspect(ctx: Ctx) -> Any:
    client = authenticate_basic(ctx.header("authorization"))
    if client is None:
        raise invalid_client("Confidential client credentials (HTTP Basic) are required.", realm="introspection")
    return introspection.introspect(ctx.form().get("token", ""), client)


@api.route("/userinfo", methods=["GET", "POST"], public=True, content_types=[FORM, "application/json"])
def userinfo(ctx: Ctx) -> Any:
    return userinfo_mod.userinfo(bearer(ctx.header("authorization")))


@api.route("/oauth2/revoke", methods=["POST"], public=True, content_types=[FORM])
def revoke(ctx: Ctx) -> Any:
    revocation.revoke(ctx.form(), authenticate_basic(ctx.header("authorization")))
    return json_response({})


@api.route("/oauth2/logout", public=True)
def logout(ctx: Ctx) -> Any:
    """RP-initiated logout (``oauth/logout.py``): ends the browser's sign-in session for a valid
    ``id_token_hint`` of its user, then returns to the client's registered origin."""
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
