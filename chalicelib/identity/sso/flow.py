"""The relying-party side of SSO: OIDC (corporate and workspace-suite kinds) and OAuth2 (code hosting).

``start`` stores ``state`` (random, single-use, 10 minutes) with the ``nonce``, the PKCE verifier,
the connection and the page to return to, then answers the provider's authorization URL.
``callback`` consumes the state (a replay finds nothing and is refused), exchanges the code with the
verifier, and for OIDC validates the ID token against the provider's JWKS: signature (asymmetric
algorithms only), issuer, audience, expiry, nonce, ``at_hash`` when present. The e-mail must belong
to the connection's verified domain (or its allowed domains); workspace-suite tokens must also carry
``email_verified`` and an ``hd`` claim among the allowed domains. First sign-ins create the account
just in time (``idp`` = issuer, ``idp_subject`` = ``sub``) and join the connection's workspace as Member.

Code hosting (GitHub kind) is plain OAuth2: after the code exchange the user API lists the account's
e-mails with ``verified`` flags; only the primary, verified one is used, only for a workspace whose
directory settings say ``engineering_only``, and only for an existing member of that workspace.
"""
from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from jose import jwt
from jose.exceptions import JOSEError
from pynamodb.exceptions import DoesNotExist, PutError

from chalicelib.core import audit, clock, process_state
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import WorkspaceAttrs, get_workspace, membership, memberships, region_of, workspaces
from chalicelib.identity.models import SsoConnectionAttrs, SubjectClaimAttrs, UserAttrs
from chalicelib.identity.signin import flows, redirects
from chalicelib.identity.sso import connections as sso_config
from chalicelib.identity.sso import http_client
from chalicelib.identity.sso.connections import CODE_HOSTING, PRESETS, WORKSPACE_SUITE
from chalicelib.identity.users import create_user, find_by_email, get_user, users

STATE_TTL = 600
DISCOVERY_TTL = 600
ID_TOKEN_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"]
LEEWAY_SECONDS = 60
REGISTERED_AMR = {"pwd", "otp", "mfa", "hwk", "swk", "sms", "face", "fpt", "user", "pin", "kba", "mca", "pop", "rba"}

_discovery_cache: dict[str, tuple[float, dict[str, Any]]] = {}
_cache_lock = threading.Lock()
process_state.enrol("identity.sso.discovery", _discovery_cache.clear)


def refused(code: str, detail: str) -> ApiError:
    return ApiError(400 if code != "sso_not_allowed" else 403, code, detail)


@dataclass(frozen=True)
class SignedIn:
    user_id: str
    email: str
    amr: list[str]
    return_to: str
    created: bool


def callback_url() -> str:
    return settings().auth_url + "/sso/callback"


def safe_return_to(value: str | None) -> str:
    """The sign-in redirect rule (a path on {auth_url} or a registered redirect URI); the account page otherwise."""
    try:
        return redirects.safe_return_to(value)
    except ApiError:
        return redirects.safe_return_to(None)


def discovery(conn: SsoConnectionAttrs) -> dict[str, Any]:
    """The provider's metadata (cached 10 minutes); its ``issuer`` must equal the configured one."""
    if conn.kind == CODE_HOSTING:
        return json.loads(conn.endpoints)
    url = conn.issuer + PRESETS[conn.kind].discovery_path
    now = time.monotonic()
    with _cache_lock:
        hit = _discovery_cache.get(url)
    if hit and now - hit[0] < DISCOVERY_TTL:
        return hit[1]
    try:
        doc = http_client.get_json(url)
    except http_client.ProviderError:
        raise ApiError(502, "idp_unavailable", "The identity provider could not be reached.") from None
    if not isinstance(doc, dict) or doc.get("issuer", "").rstrip("/") != conn.issuer.rstrip("/"):
        raise ApiError(502, "idp_misconfigured", "The identity provider's discovery document names another issuer.")
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(doc.get(name), str) or not http_client.allowed_url(doc[name]):
            raise ApiError(502, "idp_misconfigured", f"The identity provider's {name} is missing or not https.")
    with _cache_lock:
        _discovery_cache[url] = (now, doc)
    return doc


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def start(conn: SsoConnectionAttrs, return_to: str | None, login_hint: str | None = None) -> str:
    """Store state/nonce/verifier and return the provider's authorization URL."""
    meta = discovery(conn)
    verifier, challenge = _pkce()
    nonce = secrets.token_urlsafe(24)
    state = flows.put("sso", {"connection": conn.domain, "nonce": nonce, "verifier": verifier,
                              "return_to": safe_return_to(return_to)}, STATE_TTL)
    params = {"response_type": "code", "client_id": conn.client_id, "redirect_uri": callback_url(),
              "scope": " ".join(json.loads(conn.scopes)), "state": state,
              "code_challenge": challenge, "code_challenge_method": "S256"}
    if conn.kind != CODE_HOSTING:
        params["nonce"] = nonce
        if login_hint:
            params["login_hint"] = login_hint
    if conn.kind == WORKSPACE_SUITE:
        params["hd"] = conn.domain
    sep = "&" if "?" in meta["authorization_endpoint"] else "?"
    return meta["authorization_endpoint"] + sep + urlencode(params)


def start_social(workspace_id: str, return_to: str | None) -> str:
    """Code-hosting sign-in for one workspace; refused unless the workspace is engineering-only."""
    ws = _workspace_or_none(workspace_id)
    conn = sso_config.get(sso_config.code_hosting_key(workspace_id)) if ws else None
    if ws is None or conn is None or not conn.enabled or not engineering_only(ws):
        raise refused("sso_not_allowed", "Code-hosting sign-in is only offered for engineering-only workspaces.")
    return start(conn, return_to)


def _workspace_or_none(workspace_id: str) -> WorkspaceAttrs | None:
    try:
        return get_workspace(workspace_id) if workspace_id and len(workspace_id) < 64 else None
    except ApiError:
        return None


def engineering_only(ws: WorkspaceAttrs) -> bool:
    try:
        return bool(json.loads(ws.settings or "{}").get("engineering_only"))
    except ValueError:
        return False


def callback(state: str, code: str, error: str | None, caller: Any = None) -> SignedIn:
    """Finish the flow; every refusal is an ApiError the page shows."""
    flow = flows.take("sso", state)
    if flow is None:
        raise refused("invalid_state", "This sign-in link is unknown, expired or was already used. Start again.")
    if error:
        raise refused("idp_error", "The identity provider did not sign you in.")
    conn = sso_config.get(flow["connection"])
    if conn is None or not conn.enabled or (conn.kind != CODE_HOSTING and not conn.verified):
        raise refused("sso_not_allowed", "This SSO connection is not active.")
    meta = discovery(conn)
    tokens = _exchange(conn, meta, code, flow["verifier"])
    if conn.kind == CODE_HOSTING:
        return _finish_code_hosting(conn, meta, tokens, flow, caller)
    claims = validate_id_token(conn, meta, tokens, flow["nonce"])
    return _finish_oidc(conn, claims, flow, caller)


def _exchange(conn: SsoConnectionAttrs, meta: dict[str, Any], code: str, verifier: str) -> dict[str, Any]:
    if not code or len(code) > 2048:
        raise refused("invalid_request", "The provider returned no authorization code.")
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": callback_url(),
            "code_verifier": verifier}
    headers: dict[str, str] = {}
    secret = sso_config.decrypt_secret(conn)
    if PRESETS[conn.kind].token_auth_method == "client_secret_post":
        form.update(client_id=conn.client_id, client_secret=secret)
    else:
        basic = base64.b64encode(f"{quote(conn.client_id, safe='')}:{quote(secret, safe='')}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    try:
        tokens = http_client.post_form(meta["token_endpoint"], form, headers)
    except http_client.ProviderError:
        raise refused("code_exchange_failed", "The identity provider refused the sign-in code.") from None
    if not isinstance(tokens, dict) or not tokens.get("access_token"):
        raise refused("code_exchange_failed", "The identity provider refused the sign-in code.")
    return tokens


def validate_id_token(conn: SsoConnectionAttrs, meta: dict[str, Any], tokens: dict[str, Any],
                      nonce: str) -> dict[str, Any]:
    """Issuer first (cheap, clear message), then signature/audience/expiry against the JWKS, then nonce."""
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str):
        raise refused("id_token_invalid", "The identity provider returned no ID token.")
    try:
        header = jwt.get_unverified_header(id_token)
        unverified = jwt.get_unverified_claims(id_token)
    except JOSEError:
        raise refused("id_token_invalid", "The ID token is malformed.") from None
    if header.get("alg") not in ID_TOKEN_ALGORITHMS:
        raise refused("id_token_invalid", "The ID token is not signed with an allowed algorithm.")
    if str(unverified.get("iss", "")).rstrip("/") != conn.issuer.rstrip("/"):
        raise refused("id_token_invalid", "The ID token was issued by another issuer.")
    try:
        jwks = http_client.get_json(meta["jwks_uri"])
    except http_client.ProviderError:
        raise ApiError(502, "idp_unavailable", "The identity provider's keys could not be read.") from None
    try:
        claims = jwt.decode(id_token, jwks, algorithms=ID_TOKEN_ALGORITHMS, audience=conn.client_id,
                            issuer=unverified["iss"], access_token=tokens.get("access_token"),
                            options={"leeway": LEEWAY_SECONDS, "require_exp": True, "require_iat": True,
                                     "require_sub": True})
    except JOSEError as err:
        raise refused("id_token_invalid", f"The ID token failed validation ({type(err).__name__}).") from None
    if not isinstance(claims.get("nonce"), str) or not secrets.compare_digest(claims["nonce"], nonce):
        raise refused("id_token_invalid", "The ID token's nonce does not match this sign-in.")
    if isinstance(claims.get("aud"), list) and len(claims["aud"]) > 1 and claims.get("azp") != conn.client_id:
        raise refused("id_token_invalid", "The ID token's authorized party is not this client.")
    return claims


def _email_from(conn: SsoConnectionAttrs, claims: dict[str, Any]) -> str:
    for name in PRESETS[conn.kind].email_claims:
        value = claims.get(name)
        if isinstance(value, str) and "@" in value:
            return value.strip().lower()
    raise refused("email_missing", "The identity provider did not send an e-mail address.")


def _finish_oidc(conn: SsoConnectionAttrs, claims: dict[str, Any], flow: dict[str, Any], caller: Any) -> SignedIn:
    email = _email_from(conn, claims)
    allowed = set(json.loads(conn.allowed_domains)) | {conn.domain}
    if email.rsplit("@", 1)[1] not in allowed:
        raise refused("domain_mismatch", "Your e-mail address is not in a domain this connection serves.")
    if PRESETS[conn.kind].require_email_verified and claims.get("email_verified") is not True:
        raise refused("email_not_verified", "The identity provider has not verified your e-mail address.")
    if PRESETS[conn.kind].hd_check and claims.get("hd") not in allowed:
        raise refused("hd_mismatch", "Your account is not in a domain this workspace allows.")
    subject = str(claims["sub"])
    user, created = _jit_user(email, conn.issuer, subject)
    _join(conn.workspace_id, user, caller)
    amr = ["fed"] + sorted(REGISTERED_AMR.intersection(claims.get("amr") or []))
    return SignedIn(user.id, user.email, amr, flow["return_to"], created)


def _subject_key(issuer: str, subject: str) -> str:
    return f"idp#{hashlib.sha256(issuer.encode()).hexdigest()[:32]}#{subject[:255]}"


def _claim_subject(issuer: str, subject: str, user_id: str) -> None:
    try:
        global_model(SubjectClaimAttrs)(_subject_key(issuer, subject), user_id=user_id).save(
            condition=SubjectClaimAttrs.id.does_not_exist())
    except PutError:
        pass  # already claimed (by this user: the lookup below found it)


def _by_subject(issuer: str, subject: str) -> UserAttrs | None:
    try:
        claim = global_model(SubjectClaimAttrs).get(_subject_key(issuer, subject), consistent_read=True)
    except DoesNotExist:
        return None
    return get_user(claim.user_id)


def _jit_user(email: str, issuer: str, subject: str) -> tuple[UserAttrs, bool]:
    known = _by_subject(issuer, subject)
    if known is not None:
        if known.status != "active":
            raise refused("account_disabled", "This account is disabled.")
        return known, False
    user = find_by_email(email)
    if user is None:
        try:
            created = create_user(email, email_verified=True, idp=issuer, idp_subject=subject)
            _claim_subject(issuer, subject, created.id)
            return created, True
        except ApiError:  # created concurrently
            user = find_by_email(email)
            assert user is not None
    if user.status != "active":
        raise refused("account_disabled", "This account is disabled.")
    if user.idp and (user.idp != issuer or user.idp_subject != subject):
        raise refused("idp_subject_mismatch", "This e-mail address is linked to another identity at the provider.")
    if not user.idp:  # the verified domain's provider now manages this address
        user.update(actions=[UserAttrs.idp.set(issuer), UserAttrs.idp_subject.set(subject),
                             UserAttrs.email_verified.set(True)])
    _claim_subject(issuer, subject, user.id)
    return user, False


def _join(workspace_id: str, user: UserAttrs, caller: Any) -> None:
    """Members of a verified domain join the connection's workspace as Member on first sign-in."""
    if membership(workspace_id, user.id) is not None:
        return
    region = region_of(workspace_id)
    cls = memberships(region)
    try:
        cls(workspace_id, user.id, role="member", email=user.email, joined_at=clock.iso(),
            joined_via="sso").save(condition=cls.user_id.does_not_exist())
    except PutError:
        return
    workspaces()(workspace_id).update(actions=[WorkspaceAttrs.member_count.add(1)])
    audit.append(region, workspace_id, "member.joined", actor=audit.Actor("user", user.id, user.email),
                 target={"type": "user", "id": user.id}, details={"via": "sso", "role": "member"}, caller=caller)


def _finish_code_hosting(conn: SsoConnectionAttrs, meta: dict[str, Any], tokens: dict[str, Any],
                         flow: dict[str, Any], caller: Any) -> SignedIn:
    ws = _workspace_or_none(conn.workspace_id)
    if ws is None or not engineering_only(ws):
        raise refused("sso_not_allowed", "Code-hosting sign-in is only offered for engineering-only workspaces.")
    auth = {"Authorization": f"Bearer {tokens['access_token']}"}
    try:
        emails = http_client.get_json(meta["emails_endpoint"], auth)
        profile = http_client.get_json(meta["user_endpoint"], auth)
    except http_client.ProviderError:
        raise ApiError(502, "idp_unavailable", "The code-hosting provider could not be reached.") from None
    primary = next((e for e in emails if isinstance(e, dict) and e.get("primary")), None) \
        if isinstance(emails, list) else None
    if not primary or primary.get("verified") is not True or not isinstance(primary.get("email"), str):
        raise refused("email_not_verified", "Your e-mail address is not verified at the code-hosting provider.")
    email = primary["email"].strip().lower()
    user = find_by_email(email)
    if user is None or membership(ws.id, user.id) is None:
        raise refused("sso_not_allowed", "This account is not a member of the workspace; ask an Admin to invite you.")
    if not user.email_verified:
        users()(user.id).update(actions=[UserAttrs.email_verified.set(True)])
    del profile  # the provider's numeric user id is not stored: the e-mail identifies the member
    return SignedIn(user.id, user.email, ["fed"], flow["return_to"], False)
