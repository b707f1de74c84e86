"""SSO connections (global ``sso_connections`` table, keyed by e-mail domain) and their presets.

A workspace Admin connects a domain to an identity provider once. The client secret is encrypted with
the global ``directory-secrets`` KMS key (encryption context: purpose + domain) and never returned.
A connection only routes sign-ins after its domain is verified: the platform hands out a token, the
Admin publishes it, and a ``DomainVerifier`` checks it. The verifier here fetches
``https://<domain>/.well-known/aiplat-domain-verification.txt`` (the URL template is an operator
setting, ``DOMAIN_VERIFICATION_URL``, so tests can serve the file on loopback); a DNS TXT verifier
(``_aiplat-verification.<domain>``) is the production variant to add behind the same interface.

Code-hosting social sign-in is not domain based: its connection is stored under the key
``code-hosting.<workspace_id>`` and needs no verification (it only serves engineering-only workspaces).
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pynamodb.exceptions import DoesNotExist, PutError, UpdateError

from chalicelib.core import clock
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.store import kms
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import SsoConnectionAttrs
from chalicelib.identity.sso import http_client

VERIFICATION_PREFIX = "aiplat-domain-verification="
DOMAIN_RE = re.compile(r"^(?=.{4,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
CODE_HOSTING = "code_hosting"
WORKSPACE_SUITE = "workspace_suite"


@dataclass(frozen=True)
class Preset:
    """Defaults for one kind of provider; an Admin only supplies issuer, client id and secret."""

    kind: str
    label: str
    protocol: str  # oidc | oauth2
    scopes: tuple[str, ...]
    email_claims: tuple[str, ...] = ("email",)
    discovery_path: str = "/.well-known/openid-configuration"
    require_email_verified: bool = False
    hd_check: bool = False
    token_auth_method: str = "client_secret_basic"
    endpoints: dict[str, str] = field(default_factory=dict)
    example_issuer: str = ""


PRESETS: dict[str, Preset] = {p.kind: p for p in (
    Preset("enterprise_directory", "Enterprise directory (Microsoft Entra ID kind)", "oidc",
           ("openid", "profile", "email"), email_claims=("email", "preferred_username", "upn"),
           example_issuer="https://login.microsoftonline.com/<tenant-id>/v2.0"),
    Preset("identity_platform", "Identity platform (Okta kind)", "oidc", ("openid", "profile", "email"),
           example_issuer="https://<org>.okta.com"),
    Preset("open_source_identity_server", "Open-source identity server (Keycloak kind)", "oidc",
           ("openid", "profile", "email"), example_issuer="https://<host>/realms/<realm>"),
    Preset(WORKSPACE_SUITE, "Workspace suite (Google Workspace kind)", "oidc", ("openid", "email", "profile"),
           require_email_verified=True, hd_check=True, example_issuer="https://accounts.google.com"),
    Preset(CODE_HOSTING, "Code hosting (GitHub kind)", "oauth2", ("read:user", "user:email"),
           token_auth_method="client_secret_post", example_issuer="https://github.com",
           endpoints={"authorization_endpoint": "https://github.com/login/oauth/authorize",
                      "token_endpoint": "https://github.com/login/oauth/access_token",
                      "user_endpoint": "https://api.github.com/user",
                      "emails_endpoint": "https://api.github.com/user/emails"}),
)}


def connections() -> type[SsoConnectionAttrs]:
    return global_model(SsoConnectionAttrs)


def code_hosting_key(workspace_id: str) -> str:
    return f"code-hosting.{workspace_id.lower()}"



def encrypt_secret(domain: str, secret: str) -> str:
    return kms.encrypt(settings().global_region, "directory-secrets", "sso-client-secret", secret.encode(),
                       domain=domain)


def decrypt_secret(conn: SsoConnectionAttrs) -> str:
    return kms.decrypt(settings().global_region, "sso-client-secret", conn.client_secret_enc,
                       domain=conn.domain).decode()


def get(domain: str) -> SsoConnectionAttrs | None:
    try:
        return connections().get(domain.lower(), consistent_read=True)
    except DoesNotExist:
        return None


def routed(domain: str) -> SsoConnectionAttrs | None:
    """The connection that takes over sign-in for an e-mail domain: verified and enabled only."""
    conn = get(domain) if DOMAIN_RE.match(domain or "") else None
    if conn is None or not conn.verified or not conn.enabled or conn.kind == CODE_HOSTING:
        return None
    return conn


def public_view(conn: SsoConnectionAttrs) -> dict[str, Any]:
    """What an Admin sees: everything but the secret."""
    view: dict[str, Any] = {
        "domain": conn.domain, "workspace_id": conn.workspace_id, "kind": conn.kind,
        "display_name": conn.display_name, "issuer": conn.issuer, "client_id": conn.client_id,
        "client_secret_set": True, "scopes": json.loads(conn.scopes),
        "allowed_domains": json.loads(conn.allowed_domains), "endpoints": json.loads(conn.endpoints),
        "verified": conn.verified, "verified_at": conn.verified_at, "enabled": conn.enabled,
        "created_at": conn.created_at,
        "redirect_uri": settings().auth_url + "/sso/callback",
    }
    if conn.kind != CODE_HOSTING:
        view["verification"] = {
            "method": "well-known file",
            "url": verification_url(conn.domain),
            "content": VERIFICATION_PREFIX + conn.verification_token,
            "dns_txt_record": {"name": f"_aiplat-verification.{conn.domain}",
                               "value": VERIFICATION_PREFIX + conn.verification_token},
        }
    else:
        view["sign_in_url"] = f"{settings().auth_url}/sso/social/start?workspace_id={conn.workspace_id}"
    return view


def create(*, workspace_id: str, created_by: str, kind: str, domain: str | None, issuer: str, client_id: str,
           client_secret: str, display_name: str | None = None, allowed_domains: list[str] | None = None,
           scopes: list[str] | None = None, endpoints: dict[str, str] | None = None) -> SsoConnectionAttrs:
    """Store a new (unverified) connection; 409 when the domain is verified by any workspace or already
    claimed by this one.

    An unverified claim of another workspace does not block: it is replaced (domain squatting must not
    lock the real owner out), and verification decides ownership. The verification token is derived
    from (workspace, domain), so a workspace's published token stays valid however often its claim is
    replaced, and it proves nothing for any other workspace.
    """
    preset = PRESETS[kind]
    if kind == CODE_HOSTING:
        key = code_hosting_key(workspace_id)
        merged = {**preset.endpoints, **(endpoints or {})}
        for name, url in merged.items():
            if not http_client.allowed_url(url):
                raise ApiError(400, "validation_failed", f"{name} must be an https URL.",
                               errors=[{"field": "endpoints", "message": f"{name} must be an https URL"}])
    else:
        if not domain:
            raise ApiError(400, "validation_failed", "domain is required.",
                           errors=[{"field": "domain", "message": "is required"}])
        key = domain.lower()
        merged = {}
        if not http_client.allowed_url(issuer):
            raise ApiError(400, "validation_failed", "The issuer must be an https URL.",
                           errors=[{"field": "issuer", "message": "must be an https URL"}])
    allowed = sorted({d.lower() for d in (allowed_domains or [])} | ({key} if kind != CODE_HOSTING else set()))
    conn = connections()(
        key, workspace_id=workspace_id, kind=kind, display_name=display_name or preset.label,
        issuer=issuer.rstrip("/"), client_id=client_id, client_secret_enc=encrypt_secret(key, client_secret),
        scopes=json.dumps(list(scopes or preset.scopes)), allowed_domains=json.dumps(allowed),
        endpoints=json.dumps(merged), verification_token=verification_token(workspace_id, key),
        verified=(kind == CODE_HOSTING), created_at=clock.iso(), created_by=created_by)
    try:
        conn.save(condition=SsoConnectionAttrs.domain.does_not_exist())
        return conn
    except PutError:
        existing = get(key)
    if existing is None or existing.verified or existing.workspace_id == workspace_id:
        raise conflict("domain_taken", "This domain already has an SSO connection.")
    try:  # replace the other workspace's unverified claim, unless it was verified a moment ago
        conn.save(condition=(SsoConnectionAttrs.verified == False)  # noqa: E712 (a DynamoDB condition)
                  & (SsoConnectionAttrs.workspace_id == existing.workspace_id))
    except PutError:
        raise conflict("domain_taken", "This domain already has an SSO connection.") from None
    return conn


def verification_token(workspace_id: str, domain: str) -> str:
    """The token a workspace publishes to prove it owns ``domain`` (bound to both, stable across claims)."""
    raw = hashlib.sha256(f"aiplat-domain-verification\x00{workspace_id}\x00{domain.lower()}".encode()).digest()
    return base64.urlsafe_b64encode(raw[:24]).decode().rstrip("=")


def for_workspace(workspace_id: str) -> list[SsoConnectionAttrs]:
    items = connections().scan(SsoConnectionAttrs.workspace_id == workspace_id, consistent_read=True)
    return sorted(items, key=lambda c: c.domain)


def get_for_workspace(workspace_id: str, domain: str) -> SsoConnectionAttrs:
    conn = get(domain)
    if conn is None or conn.workspace_id != workspace_id:
        raise not_found("SSO connection")
    return conn


# --- domain verification -------------------------------------------------------------------------

class DomainVerifier(Protocol):
    def published_tokens(self, domain: str) -> list[str]: ...


def verification_url(domain: str) -> str:
    return settings().domain_verification_url.format(domain=domain)


class WellKnownFileVerifier:
    """Reads the tokens published in the domain's well-known verification file."""

    def published_tokens(self, domain: str) -> list[str]:
        text = http_client.get_text(verification_url(domain)) or ""
        return [line.strip()[len(VERIFICATION_PREFIX):] for line in text.splitlines()
                if line.strip().startswith(VERIFICATION_PREFIX)]


def default_verifier() -> DomainVerifier:
    return WellKnownFileVerifier()


def verify_domain(conn: SsoConnectionAttrs, verifier: DomainVerifier | None = None) -> bool:
    """Mark the domain verified when its published token matches; returns whether it did."""
    tokens = (verifier or default_verifier()).published_tokens(conn.domain)
    if not any(secrets.compare_digest(t, conn.verification_token) for t in tokens):
        return False
    try:  # only the claim that was read: a claim replaced meanwhile is not verified by this token
        conn.update(actions=[SsoConnectionAttrs.verified.set(True), SsoConnectionAttrs.verified_at.set(clock.iso())],
                    condition=(SsoConnectionAttrs.workspace_id == conn.workspace_id)
                    & (SsoConnectionAttrs.verification_token == conn.verification_token))
    except UpdateError as err:
        if condition_failed(err):
            return False
        raise
    return True


def presets_view() -> list[dict[str, Any]]:
    return [asdict(p) for p in PRESETS.values()]
