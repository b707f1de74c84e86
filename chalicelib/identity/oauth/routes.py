"""OAuth 2.0 / OIDC provider routes at {auth_url}: discovery, JWKS, authorize, the consent page, token,
introspection, userinfo, revocation, RP-initiated logout. The logic lives in the modules of ``oauth``; these handlers
only parse and answer."""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chalice import Response

from chalicelib.core.config import settings
from chalicelib.core.http import openapi
from chalicelib.core.http.api import FORM, JSON, REALM, Api, Ctx, json_response, missing_credentials
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, validate
from chalicelib.core.logs import get_logger
from chalicelib.core.tokens import bearer, verifier
from chalicelib.identity.oauth import authorize as authorize_mod
from chalicelib.identity.oauth import discovery, introspection, revocation, token_endpoint
from chalicelib.identity.oauth import logout as rp_logout
from chalicelib.identity.oauth import userinfo as userinfo_mod
from chalicelib.identity.oauth.clients import authenticate
from chalicelib.identity.oauth.consent import decision as consent
from chalicelib.identity.oauth.consent import pending as pending_consents
from chalicelib.identity.oauth.errors import NO_STORE, error_response, invalid_client, oauth_error
from chalicelib.identity.oauth.registration import dynamic as registration
from chalicelib.identity.pages.render import HTML_HEADERS, consent_page, message_page, render
from chalicelib.identity.signin import sessions

api = Api("identity")
OPENAPI_PATH = Path(__file__).parent.parent / "openapi.yaml"  # the whole identity service's document
log = get_logger("oauth")


def oauth_json(fn: Callable[[Ctx], Any]) -> Callable[[Ctx], Any]:
    """Answer like an OAuth endpoint (token, revocation, introspection): JSON with ``no-store`` and
    ``Pragma: no-cache``, every error in the RFC 6749 section 5.2 shape (``errors.error_response``)."""
    @functools.wraps(fn)
    def wrapper(ctx: Ctx) -> Any:
        try:
            return json_response(fn(ctx), headers=NO_STORE)
        except ApiError as err:
            return error_response(err)
        except Exception:  # never leak internals, and still answer in the shape the client parses
            log.exception("unhandled error", extra={"path": fn.__name__})
            return error_response(ApiError(500, "server_error", "An internal error occurred."))
    return wrapper


def _redirect(location: str) -> Response:
    return Response(body="", status_code=302, headers={"Location": location, "Cache-Control": "no-store"})


@api.route("/.well-known/openid-configuration", public=True)
def openid_configuration(ctx: Ctx) -> Any:
    return json_response(discovery.discovery(), headers={"Cache-Control": "public, max-age=300"})


@api.route("/.well-known/oauth-authorization-server", public=True)
def authorization_server_metadata(ctx: Ctx) -> Any:
    """RFC 8414: the same document as OpenID discovery (MCP clients look here first)."""
    return json_response(discovery.discovery(), headers={"Cache-Control": "public, max-age=300"})


@api.route("/oauth2/register", methods=["POST"], public=True)
def register(ctx: Ctx) -> Any:
    """RFC 7591 dynamic client registration (``oauth/registration/dynamic.py``): 201 with the client's metadata."""
    try:
        return json_response(registration.register(ctx.json(), ctx.caller.ip), 201, headers=NO_STORE)
    except ApiError as err:
        return error_response(err)


@api.route("/v1/openapi.json", public=True)
def openapi_document(ctx: Ctx) -> Any:
    """The identity service's OpenAPI document (``identity/openapi.yaml``)."""
    return openapi.response(OPENAPI_PATH, settings().auth_url, "identity service ({auth_url})")


@api.route("/.well-known/jwks.json", public=True)
def jwks(ctx: Ctx) -> Any:
    return json_response({"keys": verifier().keyring.jwks()}, headers={"Cache-Control": "public, max-age=60"})


# Chalice takes a request without Content-Type (every browser GET) for application/json, so both are listed.
@api.route("/oauth2/authorize", methods=["GET", "POST"], public=True, content_types=[FORM, JSON])
def authorize(ctx: Ctx) -> Any:
    """OIDC Core section 3.1.2.1: GET with a query or POST with a form; a repeated parameter is refused
    (RFC 6749 section 3.1: which redirect_uri would we trust?)."""
    if ctx.request.method == "POST":
        if not (ctx.header("content-type") or "").lower().startswith(FORM):
            raise ApiError(415, "unsupported_media_type", f"POST the authorization request as {FORM}.")
        params = ctx.form()  # refuses a repeated field
    else:
        raw = ctx.request.query_params
        if raw is not None and any(len(raw.getlist(key)) > 1 for key in raw):
            raise oauth_error(400, "invalid_request", "A parameter is repeated.")
        params = ctx.query
    session = sessions.session_from_request(ctx)
    result = authorize_mod.authorize(params, session, "/oauth2/authorize")
    response = _redirect(result.location)
    if session is None and sessions.sid_from_cookie_header(ctx.header("cookie")):
        response.headers["Set-Cookie"] = sessions.clear_cookie_header()  # an ended session's cookie goes too
    return response


@api.route(pending_consents.PAGE_PATH, public=True)
def consent_form(ctx: Ctx) -> Any:
    """The consent page of a pending authorization request (``oauth/consent/``): only the session that made
    the request sees it."""
    shown = consent.view(ctx.query.get("request") or "", sessions.session_from_request(ctx))
    if shown is None:
        return Response(body=message_page("Request expired", "This request expired, was already answered or "
                                          "belongs to another sign-in. Go back to the application and start again."),
                        status_code=400, headers={**HTML_HEADERS})
    return Response(body=consent_page(shown), status_code=200, headers={**HTML_HEADERS})


CONSENT_FIELDS = {"request": F(str, required=True, min_len=1, max_len=pending_consents.MAX_KEY),
                  "decision": F(str, required=True, enum=("allow", "deny"))}


@api.route(pending_consents.PAGE_PATH, methods=["POST"], public=True)
def consent_answer(ctx: Ctx) -> Any:
    """Allow or Deny (JSON, the hosted pages' CSRF guard): ``{"redirect_to": <the client's redirect URI>}``."""
    session = sessions.require_session(ctx)
    sessions.check_csrf(ctx)
    body = validate(ctx.json(), CONSENT_FIELDS)
    location = consent.decide(body["request"], body["decision"] == "allow", session, ctx.caller)
    return json_response({"redirect_to": location}, headers={"Cache-Control": "no-store"})


@api.route("/oauth2/token", methods=["POST"], public=True, content_types=[FORM])
@oauth_json
def token(ctx: Ctx) -> Any:
    form = ctx.form()
    return token_endpoint.token(form, authenticate(ctx.header("authorization"), form))


@api.route("/oauth2/introspect", methods=["POST"], public=True, content_types=[FORM])
@oauth_json
def introspect(ctx: Ctx) -> Any:
    form = ctx.form()
    client = authenticate(ctx.header("authorization"), form)
    if client is None:
        raise invalid_client("Confidential client credentials (HTTP Basic or client_secret_post) are required.",
                             realm="introspection")
    return introspection.introspect(form, client)


@api.route("/userinfo", methods=["GET", "POST"], public=True, content_types=[FORM, "application/json"])
def userinfo(ctx: Ctx) -> Any:
    """The token in the Authorization header, or (RFC 6750 section 2.2) an ``access_token`` form field."""
    authorization = ctx.header("authorization")
    form_token = None
    if ctx.request.method == "POST" and (ctx.header("content-type") or "").lower().startswith(FORM):
        form_token = ctx.form().get("access_token")
    if authorization and form_token:
        raise ApiError(400, "invalid_request", "Send the access token once (header or body).",
                       headers={"WWW-Authenticate": f'Bearer realm="{REALM}", error="invalid_request"'})
    if form_token:
        return userinfo_mod.userinfo(form_token)
    if not authorization:
        raise missing_credentials()  # RFC 6750 section 3.1: no error code when no credentials were sent
    return userinfo_mod.userinfo(bearer(authorization))


@api.route("/oauth2/revoke", methods=["POST"], public=True, content_types=[FORM])
@oauth_json
def revoke(ctx: Ctx) -> Any:
    form = ctx.form()
    revocation.revoke(form, authenticate(ctx.header("authorization"), form))
    return {}


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
