"""Identity service routes at {auth_url}: discovery, JWKS, token endpoint, introspection."""
from __future__ import annotations

from typing import Any

from chalicelib.core.tokens import verifier
from chalicelib.core.web import FORM, Api, Ctx, json_response
from chalicelib.identity import oauth
from chalicelib.identity.clients import authenticate_basic

api = Api("identity")


@api.route("/.well-known/openid-configuration", public=True)
def openid_configuration(ctx: Ctx) -> Any:
    return json_response(oauth.discovery(), headers={"Cache-Control": "public, max-age=300"})


@api.route("/.well-known/jwks.json", public=True)
def jwks(ctx: Ctx) -> Any:
    return json_response({"keys": verifier().keyring.jwks()}, headers={"Cache-Control": "public, max-age=60"})


@api.route("/oauth2/token", methods=["POST"], public=True, content_types=[FORM])
def token(ctx: Ctx) -> Any:
    form = ctx.form()
    grant = oauth.GRANTS.get(form.get("grant_type", ""))
    if grant is None:
        raise oauth.oauth_error(400, "unsupported_grant_type", "The grant_type is missing or not supported.")
    client = authenticate_basic(ctx.header("authorization"))
    return grant(form, client)


@api.route("/oauth2/introspect", methods=["POST"], public=True, content_types=[FORM])
def introspect(ctx: Ctx) -> Any:
    if authenticate_basic(ctx.header("authorization")) is None:
        err = oauth.oauth_error(401, "invalid_client", "Confidential client credentials (HTTP Basic) are required.")
        err.headers["WWW-Authenticate"] = 'Basic realm="introspection"'
        raise err
    return oauth.introspect(ctx.form().get("token", ""))
