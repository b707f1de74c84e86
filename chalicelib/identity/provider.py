"""OAuth 2.0 / OpenID Connect provider: authorization code + PKCE, refresh tokens, client credentials,
ID tokens, userinfo and RFC 7009 revocation.

Decisions (docs/decisions.md, Identity):

* ``/oauth2/authorize``: ``response_type=code`` only, PKCE ``S256`` only (``plain`` and a missing
  challenge are refused), ``redirect_uri`` required and matched exactly against the client's list.
  ``workspace_id`` picks the workspace (default: the user's first one by id); a user with no workspace
  gets a token with ``workspace_id=""`` and no roles (enough to create one). ``prompt``: ``none``,
  ``login`` (forces a fresh sign-in), ``consent`` and ``select_account`` (accepted, nothing to show: a
  first-party platform has no consent screen); ``max_age`` is honoured.
* Codes: 256-bit, stored hashed, single use, 60 seconds. A second use of a code revokes every token
  issued from it (its grant family) and is refused.
* Refresh tokens: opaque, stored hashed, rotated on every use; the family lives at most
  ``REFRESH_FAMILY_TTL_SECONDS`` (30 days) from the sign-in. Reusing an already-rotated refresh token
  revokes the family: every refresh token and every access token issued in it.
* Every issue re-reads the user's roles in the workspace and refuses a workspace with ``enforce_mfa``
  unless the sign-in's ``amr`` shows MFA (``core.authz.mfa_used``).
* ``client_credentials``: confidential clients bound by registration to one workspace; the token's
  ``sub`` is the client id (a service principal), ``roles`` are the registered ones, ``amr`` is empty,
  ``token_use="service"``, ``client_id`` is set, no refresh token.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.authz import mfa_used
from chalicelib.core.conditions import condition_failed
from chalicelib.core.config import settings
from chalicelib.core.errors import ApiError
from chalicelib.core.ids import new_id
from chalicelib.core.models import BaseModel, global_model
from chalicelib.core.tenancy import get_workspace, roles_for, workspaces_of
from chalicelib.core.tokens import verifier
from chalicelib.identity import users as users_mod
from chalicelib.identity.clients import OAuthClientAttrs, get_client
from chalicelib.identity.oauth import oauth_error, token_response
from chalicelib.identity.opaque import digest, new_secret, same
from chalicelib.identity.revocation import revoke_jti
from chalicelib.identity.sessions import SessionAttrs
from chalicelib.identity.signing import issue_access_token, signer

CODE_TTL_SECONDS = 60
REFRESH_FAMILY_TTL_SECONDS = 30 * 24 * 3600
SCOPES = ("openid", "email", "profile", "offline_access")
PROMPTS = ("none", "login", "consent", "select_account")
_PKCE_RE = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")
_CHALLENGE_RE = re.compile(r"^[A-Za-z0-9\-_]{43}$")


class CodeAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # code#<sha256(code)>
    client_id = UnicodeAttribute()
    redirect_uri = UnicodeAttribute()
    user_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    amr_json = UnicodeAttribute()
    scope = UnicodeAttribute()
    nonce = UnicodeAttribute(null=True)
    code_challenge = UnicodeAttribute()
    auth_time = NumberAttribute()
    session_id = UnicodeAttribute()
    family_id = UnicodeAttribute()
    code_expires_at = NumberAttribute()
    used = BooleanAttribute(null=True)
    expires_at = NumberAttribute()  # TTL: kept a while after expiry so a reuse is still recognised


class FamilyAttrs(BaseModel):
    """One grant: everything issued from one authorization code (rotating refresh tokens included)."""

    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # fam#<family_id>
    client_id = UnicodeAttribute()
    user_id = UnicodeAttribute()
    revoked = BooleanAttribute(null=True)
    issued = UnicodeSetAttribute(null=True)  # "<jti>|<exp>" of every access token of the family
    ends_at = NumberAttribute()
    expires_at = NumberAttribute()  # TTL


class RefreshAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # rt#<sha256(refresh_token)>
    family_id = UnicodeAttribute()
    client_id = UnicodeAttribute()
    user_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    amr_json = UnicodeAttribute()
    scope = UnicodeAttribute()
    auth_time = NumberAttribute()
    session_id = UnicodeAttribute()
    used = BooleanAttribute(null=True)
    expires_at = NumberAttribute()  # = the family's end; TTL


def _codes() -> type[CodeAttrs]:
    return global_model(CodeAttrs)


def _families() -> type[FamilyAttrs]:
    return global_model(FamilyAttrs)


def _refresh() -> type[RefreshAttrs]:
    return global_model(RefreshAttrs)


# --- /oauth2/authorize ---------------------------------------------------------------------------

class Redirect(Exception):
    """The authorize endpoint answers with a 302 to ``location``."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


def _with_params(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + [(k, v) for k, v in params.items() if v is not None]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _error_redirect(redirect_uri: str, error: str, description: str, state: str | None) -> Redirect:
    params = {"error": error, "error_description": description, "iss": settings().issuer}
    if state is not None:
        params["state"] = state
    return Redirect(_with_params(redirect_uri, params))


def authorize(params: dict[str, str], session: SessionAttrs | None, request_path: str) -> Redirect:
    """See ``_authorize``; error redirects are returned, not raised."""
    try:
        return _authorize(params, session, request_path)
    except Redirect as redirect:
        return redirect


def _authorize(params: dict[str, str], session: SessionAttrs | None, request_path: str) -> Redirect:
    """Validate an authorization request and decide where the browser goes next (always a 302).

    Errors about the client or the redirect URI raise a 400 ``ApiError`` (never a redirect to an
    unverified address); every other error is redirected to the client with ``error`` and ``state``.
    """
    client = get_client(params.get("client_id", ""))
    if client is None:
        raise oauth_error(400, "invalid_request", "Unknown client_id.")
    redirect_uri = params.get("redirect_uri", "")
    if not redirect_uri or redirect_uri not in client.redirects:
        raise oauth_error(400, "invalid_request", "redirect_uri is missing or is not registered for this client "
                                                  "(exact match).")
    state = params.get("state")
    if state is not None and len(state) > 512:
        raise _error_redirect(redirect_uri, "invalid_request", "state is too long.", None)

    def fail(error: str, description: str) -> Redirect:
        return _error_redirect(redirect_uri, error, description, state)

    if params.get("response_type") != "code":
        raise fail("unsupported_response_type", "Only response_type=code is supported.")
    if "authorization_code" not in client.grants:
        raise fail("unauthorized_client", "This client may not use the authorization code grant.")
    challenge = params.get("code_challenge")
    if not challenge:
        raise fail("invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256.")
    if params.get("code_challenge_method") != "S256":
        raise fail("invalid_request", "Only code_challenge_method=S256 is supported.")
    if not _CHALLENGE_RE.match(challenge):
        raise fail("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters).")
    scopes = (params.get("scope") or "openid").split()
    if any(s not in SCOPES for s in scopes):
        raise fail("invalid_scope", "Supported scopes: " + " ".join(SCOPES) + ".")
    nonce = params.get("nonce")
    if nonce is not None and len(nonce) > 512:
        raise fail("invalid_request", "nonce is too long.")
    prompt = (params.get("prompt") or "").split()
    if any(p not in PROMPTS for p in prompt) or ("none" in prompt and len(prompt) > 1):
        raise fail("invalid_request", "prompt must be one of none, login, consent, select_account.")
    max_age = params.get("max_age")
    if max_age is not None and (not max_age.isdigit() or len(max_age) > 9):
        raise fail("invalid_request", "max_age must be a non-negative integer.")

    fresh_needed = "login" in prompt or (
        session is not None and max_age is not None and clock.now() - session.created_at > int(max_age))
    if session is None or fresh_needed:
        if "none" in prompt:
            raise fail("login_required", "The user is not signed in.")
        again = {k: v for k, v in params.items() if k not in ("prompt", "max_age")}
        return_to = urlsplit(request_path).path + "?" + urlencode(again)
        signin = {"return_to": return_to}
        if fresh_needed:
            signin["prompt"] = "login"
        return Redirect(settings().auth_url + "/signin?" + urlencode(signin))

    workspace_id = params.get("workspace_id")
    if workspace_id:
        if len(workspace_id) > 64 or not roles_for_safe(workspace_id, session.user_id):
            raise fail("access_denied", "You are not a member of that workspace.")
    else:
        mine = workspaces_of(session.user_id)
        workspace_id = mine[0]["workspace_id"] if mine else ""
    if workspace_id and get_workspace(workspace_id).enforce_mfa and not mfa_used(session.amr):
        raise fail("access_denied", "This workspace requires multi-factor authentication: sign in with a "
                                    "second factor (authenticator app, security key or passkey).")
    code = new_secret("ac_")
    now = int(clock.now())
    _codes()(f"code#{digest(code)}", client_id=client.client_id, redirect_uri=redirect_uri,
             user_id=session.user_id, workspace_id=workspace_id, amr_json=json.dumps(session.amr),
             scope=" ".join(scopes), nonce=nonce, code_challenge=challenge, auth_time=int(session.created_at),
             session_id=session.session_id, family_id=new_id("grant"), code_expires_at=now + CODE_TTL_SECONDS,
             expires_at=now + 3600).save()
    out = {"code": code, "iss": settings().issuer}
    if state is not None:
        out["state"] = state
    return Redirect(_with_params(redirect_uri, out))


def roles_for_safe(workspace_id: str, user_id: str) -> list[str]:
    """Roles in the workspace; [] for a workspace that does not exist (same answer as non-member)."""
    try:
        return roles_for(workspace_id, user_id)
    except ApiError:
        return []


# --- token endpoint -------------------------------------------------------------------------------

def _client(form: dict[str, str], client: OAuthClientAttrs | None) -> OAuthClientAttrs:
    """The calling client: authenticated by Basic (confidential) or named by ``client_id`` (public)."""
    named = form.get("client_id")
    if client is not None:
        if named and named != client.client_id:
            raise oauth_error(401, "invalid_client", "client_id does not match the authenticated client.")
        return client
    public = get_client(named or "")
    if public is None or public.confidential:
        err = oauth_error(401, "invalid_client", "Client authentication failed (confidential clients use HTTP Basic).")
        err.headers["WWW-Authenticate"] = 'Basic realm="token"'
        raise err
    return public


def _s256(verifier_value: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier_value.encode("ascii")).digest()).rstrip(b"=").decode()


def _half_hash(token: str) -> str:
    d = hashlib.sha256(token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(d[: len(d) // 2]).rstrip(b"=").decode()


def _roles_and_check(user_id: str, workspace_id: str, amr: list[str]) -> list[str]:
    if not workspace_id:
        return []
    roles = roles_for_safe(workspace_id, user_id)
    if not roles:
        raise oauth_error(400, "invalid_grant", "The user is no longer a member of the workspace.")
    if get_workspace(workspace_id).enforce_mfa and not mfa_used(amr):
        raise oauth_error(400, "invalid_grant", "This workspace requires multi-factor authentication; the sign-in "
                                                "did not use a second factor.")
    return roles


def _issue(*, client_id: str, family_id: str, user_id: str, workspace_id: str, amr: list[str], scope: str,
           auth_time: int, session_id: str, nonce: str | None, refresh: bool, family_ends_at: int) -> dict[str, Any]:
    roles = _roles_and_check(user_id, workspace_id, amr)
    user = users_mod.get_user(user_id)
    if user is None or user.status != "active":
        raise oauth_error(400, "invalid_grant", "The user account is not active.")
    token, claims = issue_access_token(user_id=user_id, email=user.email, workspace_id=workspace_id, roles=roles,
                                       amr=amr, extra={"client_id": client_id, "scope": scope, "sid": session_id})
    fam = _families()
    try:  # record the token in its family, unless the family was revoked meanwhile
        fam(f"fam#{family_id}").update(actions=[fam.issued.add({f"{claims['jti']}|{claims['exp']}"})],
                                       condition=fam.revoked.does_not_exist() & fam.pk.exists())
    except UpdateError as err:
        if condition_failed(err):
            revoke_jti(claims["jti"], claims["exp"], "family_revoked")
            raise oauth_error(400, "invalid_grant", "This grant has been revoked.") from None
        raise
    extra: dict[str, Any] = {"scope": scope}
    if refresh:
        rt = new_secret("rt_")
        _refresh()(f"rt#{digest(rt)}", family_id=family_id, client_id=client_id, user_id=user_id,
                   workspace_id=workspace_id, amr_json=json.dumps(amr), scope=scope, auth_time=auth_time,
                   session_id=session_id, expires_at=family_ends_at).save()
        extra["refresh_token"] = rt
    if "openid" in scope.split():
        now = int(clock.now())
        id_claims: dict[str, Any] = {
            "iss": settings().issuer, "sub": user_id, "aud": client_id, "azp": client_id, "iat": now,
            "exp": now + settings().access_token_ttl, "auth_time": auth_time, "amr": amr,
            "at_hash": _half_hash(token), "sid": session_id, "workspace_id": workspace_id, "roles": roles,
        }
        if nonce:
            id_claims["nonce"] = nonce
        if "email" in scope.split():
            id_claims.update({"email": user.email, "email_verified": bool(user.email_verified)})
        if "profile" in scope.split() and user.display_name:
            id_claims["name"] = user.display_name
        extra["id_token"] = signer().sign(id_claims, token_type="JWT")
    return token_response(token, claims, **extra)


def revoke_family(family_id: str, reason: str) -> None:
    """Revoke a grant: its refresh tokens stop working and its access tokens are refused."""
    fam = _families()
    item = fam(f"fam#{family_id}")
    item.update(actions=[fam.revoked.set(True)])
    for entry in item.issued or ():
        jti, _, exp = entry.partition("|")
        revoke_jti(jti, float(exp), reason)


def grant_authorization_code(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    caller = _client(form, client)
    code = form.get("code") or ""
    if not code or len(code) > 128:
        raise oauth_error(400, "invalid_request", "code is required.")
    cls = _codes()
    pk = f"code#{digest(code)}"
    try:
        item = cls.get(pk, consistent_read=True)
    except DoesNotExist:
        raise oauth_error(400, "invalid_grant", "The authorization code is not valid.") from None
    try:
        cls(pk).update(actions=[cls.used.set(True)], condition=cls.used.does_not_exist())
    except UpdateError as err:
        if condition_failed(err):  # second use: revoke everything issued from this code
            revoke_family(item.family_id, "code_reuse")
            raise oauth_error(400, "invalid_grant", "The authorization code was already used; the tokens issued "
                                                    "from it have been revoked.") from None
        raise
    if item.code_expires_at <= clock.now():
        raise oauth_error(400, "invalid_grant", "The authorization code has expired.")
    if item.client_id != caller.client_id:
        raise oauth_error(400, "invalid_grant", "The authorization code was issued to another client.")
    if form.get("redirect_uri") != item.redirect_uri:
        raise oauth_error(400, "invalid_grant", "redirect_uri does not match the authorization request.")
    code_verifier = form.get("code_verifier") or ""
    if not _PKCE_RE.match(code_verifier):
        raise oauth_error(400, "invalid_grant", "code_verifier is missing or malformed (PKCE is required).")
    if not same(_s256(code_verifier), item.code_challenge):
        raise oauth_error(400, "invalid_grant", "code_verifier does not match the code_challenge.")
    now = int(clock.now())
    ends = now + REFRESH_FAMILY_TTL_SECONDS
    _families()(f"fam#{item.family_id}", client_id=caller.client_id, user_id=item.user_id, ends_at=ends,
                expires_at=ends + 3600).save(condition=FamilyAttrs.pk.does_not_exist())
    return _issue(client_id=caller.client_id, family_id=item.family_id, user_id=item.user_id,
                  workspace_id=item.workspace_id, amr=list(json.loads(item.amr_json)), scope=item.scope,
                  auth_time=int(item.auth_time), session_id=item.session_id, nonce=item.nonce,
                  refresh="refresh_token" in caller.grants, family_ends_at=ends)


def grant_refresh_token(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    caller = _client(form, client)
    if "refresh_token" not in caller.grants:
        raise oauth_error(400, "unauthorized_client", "This client may not use refresh tokens.")
    rt = form.get("refresh_token") or ""
    if not rt.startswith("rt_") or len(rt) > 128:
        raise oauth_error(400, "invalid_grant", "The refresh token is not valid.")
    cls = _refresh()
    pk = f"rt#{digest(rt)}"
    try:
        item = cls.get(pk, consistent_read=True)
    except DoesNotExist:
        raise oauth_error(400, "invalid_grant", "The refresh token is not valid.") from None
    if item.client_id != caller.client_id:
        raise oauth_error(400, "invalid_grant", "The refresh token was issued to another client.")
    try:
        cls(pk).update(actions=[cls.used.set(True)], condition=cls.used.does_not_exist())
    except UpdateError as err:
        if condition_failed(err):  # a rotated token came back: assume theft, revoke the whole family
            revoke_family(item.family_id, "refresh_reuse")
            raise oauth_error(400, "invalid_grant", "The refresh token was already used; the grant has been "
                                                    "revoked. Sign in again.") from None
        raise
    if item.expires_at <= clock.now():
        raise oauth_error(400, "invalid_grant", "The refresh token has expired; sign in again.")
    try:
        family = _families().get(f"fam#{item.family_id}", consistent_read=True)
    except DoesNotExist:
        raise oauth_error(400, "invalid_grant", "The grant no longer exists.") from None
    if family.revoked:
        raise oauth_error(400, "invalid_grant", "This grant has been revoked.")
    scope = item.scope
    asked = form.get("scope")
    if asked:
        if not set(asked.split()) <= set(scope.split()):
            raise oauth_error(400, "invalid_scope", "A refresh cannot widen the scope.")
        scope = " ".join(s for s in scope.split() if s in asked.split())
    return _issue(client_id=caller.client_id, family_id=item.family_id, user_id=item.user_id,
                  workspace_id=item.workspace_id, amr=list(json.loads(item.amr_json)), scope=scope,
                  auth_time=int(item.auth_time), session_id=item.session_id, nonce=None, refresh=True,
                  family_ends_at=int(item.expires_at))


def grant_client_credentials(form: dict[str, str], client: OAuthClientAttrs | None) -> dict[str, Any]:
    if client is None:
        err = oauth_error(401, "invalid_client", "client_credentials needs a confidential client (HTTP Basic).")
        err.headers["WWW-Authenticate"] = 'Basic realm="token"'
        raise err
    if form.get("client_id") and form["client_id"] != client.client_id:
        raise oauth_error(401, "invalid_client", "client_id does not match the authenticated client.")
    if "client_credentials" not in client.grants or not client.workspace_id:
        raise oauth_error(400, "unauthorized_client", "This client may not use the client_credentials grant.")
    try:
        get_workspace(client.workspace_id)
    except ApiError:
        raise oauth_error(400, "invalid_grant", "The client's workspace no longer exists.") from None
    roles = list(json.loads(client.service_roles or "[]"))
    token, claims = issue_access_token(user_id=client.client_id, email="", workspace_id=client.workspace_id,
                                       roles=roles, amr=[],
                                       extra={"token_use": "service", "client_id": client.client_id})
    return token_response(token, claims)


# --- revocation (RFC 7009) and userinfo ----------------------------------------------------------------

def revoke(form: dict[str, str], client: OAuthClientAttrs | None) -> None:
    """Revoke a refresh token (its whole grant) or an access token issued to the calling client.

    Unknown, malformed or expired tokens are not an error (RFC 7009 section 2.2).
    """
    caller = _client(form, client)
    token = form.get("token") or ""
    if not token or len(token) > 8192:
        raise oauth_error(400, "invalid_request", "token is required.")
    if token.startswith("rt_"):
        try:
            item = _refresh().get(f"rt#{digest(token)}", consistent_read=True)
        except DoesNotExist:
            return
        if item.client_id != caller.client_id:
            raise oauth_error(400, "invalid_request", "The token was not issued to this client.")
        revoke_family(item.family_id, "revoked_by_client")
        return
    try:
        claims = verifier().claims(token)
    except ApiError:
        return
    if claims.get("client_id") != caller.client_id:
        raise oauth_error(400, "invalid_request", "The token was not issued to this client.")
    revoke_jti(claims["jti"], claims["exp"], "revoked_by_client")


def userinfo(access_token: str) -> dict[str, Any]:
    principal = verifier().principal(access_token)
    if principal.claims.get("token_use") == "service":
        raise ApiError(401, "invalid_token", "A service token has no user.",
                       headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    user = users_mod.get_user(principal.user_id)
    if user is None:
        raise ApiError(401, "invalid_token", "The token's user no longer exists.",
                       headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    out: dict[str, Any] = {"sub": user.id, "email": user.email, "email_verified": bool(user.email_verified),
                           "workspace_id": principal.workspace_id, "roles": list(principal.roles),
                           "amr": list(principal.amr)}
    if user.display_name:
        out["name"] = user.display_name
    return out
