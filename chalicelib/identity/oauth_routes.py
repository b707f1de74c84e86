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
