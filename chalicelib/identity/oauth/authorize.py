"""The authorization endpoint (``/oauth2/authorize``): validate the request, then send the browser on.

Decisions (docs/decisions.md, "Identity"):

* ``response_type=code`` only; PKCE ``S256`` only (``plain`` is refused). PKCE is required of public
  clients and of confidential clients registered with ``require_pkce``; other confidential clients
  may omit it (OIDC Core; the OpenID Foundation's Basic OP plan sends no ``code_challenge``).
  ``redirect_uri`` required and matched exactly against the client's list.
* Unknown scopes are ignored (OIDC Core section 3.1.2.1), not refused; ``request`` and ``request_uri``
  (request objects) are not supported and answer ``request_not_supported`` /
  ``request_uri_not_supported``, as discovery says.
* ``workspace_id`` picks the workspace (default: the user's first one by id); a user with no workspace
  gets a token with ``workspace_id=""`` and no roles (enough to create one).
* ``prompt``: ``none``, ``login`` (forces a fresh sign-in), ``consent`` (a third-party client's user is
  asked again even when a remembered consent covers the request; nothing to ask for a first-party client)
  and ``select_account`` (accepted, nothing to show); ``max_age`` is honoured.
* Consent (``oauth/consent/``): a client that is not first-party gets a code only when the user allowed it
  this workspace, scope set and resource; otherwise the browser goes to the consent page, and
  ``prompt=none`` answers ``consent_required``.
* A workspace with ``enforce_mfa`` needs a sign-in whose ``amr`` shows MFA.
* ``resource`` (RFC 8707, ``oauth/resources.py``): an MCP endpoint's URL makes the grant's tokens for that
  resource alone; any other value is ``invalid_target``.
* ``mfa`` scope: the step-up an MCP endpoint asks for (``insufficient_scope``) when the workspace enforces
  MFA: a session without a second factor is sent to sign in again (``prompt=login``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chalicelib.core import clock
from chalicelib.core.authz import mfa_used
from chalicelib.core.config import settings
from chalicelib.core.ids import new_id
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import get_workspace, workspaces_of
from chalicelib.identity.models import AUTH_CODE, CodeAttrs, OAuthClientAttrs, SessionAttrs, state_key
from chalicelib.identity.oauth.clients import get_client, is_first_party
from chalicelib.identity.oauth.consent import grants as consents
from chalicelib.identity.oauth.consent import pending as pending_consents
from chalicelib.identity.oauth.errors import oauth_error
from chalicelib.identity.oauth.issuing import roles_for_safe
from chalicelib.identity.oauth.resources import resource_problem
from chalicelib.identity.opaque import digest, new_secret

CODE_TTL_SECONDS = 60
SCOPES = ("openid", "email", "profile", "offline_access", "mfa")
STEP_UP_SCOPE = "mfa"  # asks for a sign-in with a second factor (MCP step-up, docs/api/mcp.md)
PROMPTS = ("none", "login", "consent", "select_account")
MAX_PARAM_LEN = 512
_CHALLENGE_RE = re.compile(r"^[A-Za-z0-9\-_]{43}$")


class Redirect(Exception):
    """The authorize endpoint answers with a 302 to ``location``."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


@dataclass(frozen=True)
class AuthRequest:
    """A validated authorization request."""

    client: OAuthClientAttrs
    redirect_uri: str
    state: str | None
    challenge: str | None
    scopes: list[str]
    nonce: str | None
    prompt: list[str]
    max_age: int | None
    resource: str | None = None  # RFC 8707


def _with_params(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + [(k, v) for k, v in params.items() if v is not None]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _error_redirect(redirect_uri: str, error: str, description: str, state: str | None) -> Redirect:
    params = {"error": error, "error_description": description, "iss": settings().issuer}
    if state is not None:
        params["state"] = state
    return Redirect(_with_params(redirect_uri, params))


def authorize(params: dict[str, str], session: SessionAttrs | None, request_path: str, *,
              consented_workspace: str | None = None) -> Redirect:
    """Validate an authorization request and decide where the browser goes next (always a 302).

    Errors about the client or the redirect URI raise a 400 ``ApiError`` (never a redirect to an
    unverified address); every other error is returned as a redirect to the client with ``error``
    and ``state``. ``consented_workspace``: the user has just allowed this request on the consent page
    for that workspace (``consent/decision.py``).
    """
    try:
        request = _validated_request(params)
        signin = _signin_needed(request, params, session, request_path)
        if signin is not None:
            return signin
        assert session is not None
        workspace_id = _chosen_workspace(request, params, session)
        if consented_workspace != workspace_id:
            ask = _consent_needed(request, params, session, workspace_id)
            if ask is not None:
                return ask
        return _issue_code(request, session, workspace_id)
    except Redirect as redirect:
        return redirect


def access_denied(redirect_uri: str, state: str | None, description: str) -> str:
    """Where the browser goes when the user denied a client (RFC 6749 section 4.1.2.1)."""
    return _error_redirect(redirect_uri, "access_denied", description, state).location


# --- validation: the client and redirect URI first (400), then the rest (error redirects) ---------------

def _registered_client(params: dict[str, str]) -> tuple[OAuthClientAttrs, str]:
    client = get_client(params.get("client_id", ""))
    if client is None:
        raise oauth_error(400, "invalid_request", "Unknown client_id.")
    redirect_uri = params.get("redirect_uri", "")
    if not redirect_uri or redirect_uri not in client.redirects:
        raise oauth_error(400, "invalid_request", "redirect_uri is missing or is not registered for this client "
                                                  "(exact match).")
    return client, redirect_uri


def pkce_required(client: OAuthClientAttrs) -> bool:
    """Public clients always send PKCE; confidential ones when their registration says so."""
    return not client.confidential or bool(client.require_pkce)


def _pkce_problem(params: dict[str, str], client: OAuthClientAttrs) -> str | None:
    challenge = params.get("code_challenge")
    if not challenge:
        if "code_challenge_method" in params or pkce_required(client):
            return "PKCE is required: send code_challenge and code_challenge_method=S256."
        return None
    if params.get("code_challenge_method") != "S256":
        return "Only code_challenge_method=S256 is supported."
    if not _CHALLENGE_RE.match(challenge):
        return "code_challenge must be the base64url SHA-256 of the verifier (43 characters)."
    return None


def _prompt_problem(prompt: list[str]) -> bool:
    return any(p not in PROMPTS for p in prompt) or ("none" in prompt and len(prompt) > 1)


def _max_age_problem(max_age: str | None) -> bool:
    return max_age is not None and (not max_age.isdigit() or len(max_age) > 9)


def _validated_request(params: dict[str, str]) -> AuthRequest:
    client, redirect_uri = _registered_client(params)
    state = params.get("state")
    if state is not None and len(state) > MAX_PARAM_LEN:
        raise _error_redirect(redirect_uri, "invalid_request", "state is too long.", None)

    def fail(error: str, description: str) -> Redirect:
        return _error_redirect(redirect_uri, error, description, state)

    if params.get("response_type") != "code":
        raise fail("unsupported_response_type", "Only response_type=code is supported.")
    if "request" in params:
        raise fail("request_not_supported", "Request objects (the request parameter) are not supported.")
    if "request_uri" in params:
        raise fail("request_uri_not_supported", "The request_uri parameter is not supported.")
    if "authorization_code" not in client.grants:
        raise fail("unauthorized_client", "This client may not use the authorization code grant.")
    pkce = _pkce_problem(params, client)
    if pkce:
        raise fail("invalid_request", pkce)
    asked = (params.get("scope") or "openid").split()
    scopes = [s for s in dict.fromkeys(asked) if s in SCOPES] or ["openid"]  # unknown scopes are ignored
    nonce = params.get("nonce")
    if nonce is not None and len(nonce) > MAX_PARAM_LEN:
        raise fail("invalid_request", "nonce is too long.")
    prompt = (params.get("prompt") or "").split()
    if _prompt_problem(prompt):
        raise fail("invalid_request", "prompt must be one of none, login, consent, select_account.")
    max_age = params.get("max_age")
    if _max_age_problem(max_age):
        raise fail("invalid_request", "max_age must be a non-negative integer.")
    resource = params.get("resource")
    if resource is not None and resource_problem(resource):
        raise fail("invalid_target", resource_problem(resource) or "")
    return AuthRequest(client, redirect_uri, state, params.get("code_challenge"), scopes, nonce, prompt,
                       int(max_age) if max_age is not None else None, resource)


def _fail(request: AuthRequest, error: str, description: str) -> Redirect:
    return _error_redirect(request.redirect_uri, error, description, request.state)


# --- who is signed in ---------------------------------------------------------------------------------

def _fresh_sign_in_needed(request: AuthRequest, session: SessionAttrs | None) -> bool:
    """``prompt=login``, a session older than ``max_age``, or the ``mfa`` step-up scope with a session that
    used no second factor."""
    return "login" in request.prompt or (
        session is not None and request.max_age is not None and clock.now() - session.created_at > request.max_age
    ) or (session is not None and STEP_UP_SCOPE in request.scopes and not mfa_used(session.amr))


def _signin_needed(request: AuthRequest, params: dict[str, str], session: SessionAttrs | None,
                   request_path: str) -> Redirect | None:
    """The redirect to the sign-in page (coming back here afterwards), or None when the session will do."""
    fresh_needed = _fresh_sign_in_needed(request, session)
    if session is not None and not fresh_needed:
        return None
    if "none" in request.prompt:
        raise _fail(request, "login_required", "The user is not signed in.")
    again = {k: v for k, v in params.items() if k not in ("prompt", "max_age")}
    signin = {"return_to": urlsplit(request_path).path + "?" + urlencode(again)}
    if fresh_needed:
        signin["prompt"] = "login"
    return Redirect(settings().auth_url + "/signin?" + urlencode(signin))


# --- which workspace, then the code ---------------------------------------------------------------------

def _chosen_workspace(request: AuthRequest, params: dict[str, str], session: SessionAttrs) -> str:
    """The asked workspace (the user must be a member) or the user's first; MFA-enforced ones need MFA."""
    workspace_id = params.get("workspace_id")
    if workspace_id:
        if len(workspace_id) > 64 or not roles_for_safe(workspace_id, session.user_id):
            raise _fail(request, "access_denied", "You are not a member of that workspace.")
    else:
        mine = workspaces_of(session.user_id)
        workspace_id = mine[0]["workspace_id"] if mine else ""
    if workspace_id and get_workspace(workspace_id).enforce_mfa and not mfa_used(session.amr):
        raise _fail(request, "access_denied", "This workspace requires multi-factor authentication: sign in with a "
                                              "second factor (authenticator app, security key or passkey).")
    return workspace_id


def _consent_needed(request: AuthRequest, params: dict[str, str], session: SessionAttrs,
                    workspace_id: str) -> Redirect | None:
    """The consent page for a third-party client the user has not allowed this (or ``prompt=consent``);
    None when no one needs to be asked."""
    client = request.client
    if is_first_party(client):
        return None
    if "consent" not in request.prompt and consents.covers(session.user_id, client.client_id, workspace_id,
                                                           request.scopes, request.resource):
        return None
    if "none" in request.prompt:
        raise _fail(request, "consent_required", "The user has not allowed this application yet; ask without "
                                                 "prompt=none so the user can answer.")
    return Redirect(pending_consents.begin(params=params, session=session, client_id=client.client_id,
                                           workspace_id=workspace_id, scopes=request.scopes,
                                           resource=request.resource, redirect_uri=request.redirect_uri,
                                           state=request.state))


def _issue_code(request: AuthRequest, session: SessionAttrs, workspace_id: str) -> Redirect:
    """Store a single-use code (hashed, 60 s) and redirect to the client with it."""
    code = new_secret("ac_")
    now = int(clock.now())
    global_model(CodeAttrs)(
        state_key(AUTH_CODE, digest(code)), client_id=request.client.client_id, redirect_uri=request.redirect_uri,
        user_id=session.user_id, workspace_id=workspace_id, amr_json=json.dumps(session.amr),
        scope=" ".join(request.scopes), nonce=request.nonce, code_challenge=request.challenge,
        auth_time=int(session.created_at), session_id=session.session_id, family_id=new_id("grant"),
        code_expires_at=now + CODE_TTL_SECONDS, expires_at=now + 3600, resource=request.resource).save()
    out = {"code": code, "iss": settings().issuer}
    if request.state is not None:
        out["state"] = request.state
    return Redirect(_with_params(request.redirect_uri, out))
