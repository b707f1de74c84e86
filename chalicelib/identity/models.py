"""Every PynamoDB model of identity, and the item kinds of the global ``auth_state`` table.

Tables: ``users`` (users and their e-mail / identity-provider subject claims), ``sessions``,
``oauth_clients``, ``oauth_consents`` (what a user allowed a third-party client), ``api_tokens``, ``webauthn_credentials``, ``sso_connections`` and ``auth_state``
(short-lived sign-in state, one ``pk`` prefix per kind, see ``AUTH_STATE_KINDS``) and ``rate_limits``.
"""
from __future__ import annotations

import json
from typing import Any

from pynamodb.attributes import (
    BooleanAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from chalicelib.core import clock
from chalicelib.core.store.tables import BaseModel

# --- auth_state item kinds: pk = "<kind>#<key>" ------------------------------------------------------
FLOW = "flow"  # flow#<flow kind>#<random>: WebAuthn challenges, SSO state, the app shell's PKCE verifier
RESET = "reset"  # reset#<sha256(token)>: a password reset link
PENDING_MFA = "mfa"  # mfa#<sha256(mfa_token)>: a sign-in waiting for its second factor
LOCK = "lock"  # lock#<user_id>: the failed-attempt counter and lock
TOTP = "totp"  # totp#<user_id>: last accepted TOTP step and a pending setup
RECOVERY_CODES = "rc"  # rc#<user_id>: hashed recovery codes
EMAIL_CODE = "ecode"  # ecode#<address>: an e-mailed sign-in code and its send window
AUTH_CODE = "code"  # code#<sha256(code)>: an OAuth authorization code
GRANT = "fam"  # fam#<grant_id>: one grant (everything issued from one authorization code)
REFRESH = "rt"  # rt#<sha256(refresh_token)>: a rotating refresh token
AUTH_STATE_KINDS = (FLOW, RESET, PENDING_MFA, LOCK, TOTP, RECOVERY_CODES, EMAIL_CODE, AUTH_CODE, GRANT, REFRESH)


def state_key(kind: str, *parts: str) -> str:
    """The ``auth_state`` hash key of an item of ``kind`` (one of ``AUTH_STATE_KINDS``)."""
    assert kind in AUTH_STATE_KINDS, kind
    return "#".join((kind, *parts))


# --- users table ------------------------------------------------------------------------------------

class UserAttrs(BaseModel):
    TABLE = "users"
    id = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute()
    email_verified = BooleanAttribute(default=False)
    display_name = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute()
    status = UnicodeAttribute(default="active")
    idp = UnicodeAttribute(null=True)  # issuer of the corporate/social identity provider, if any
    idp_subject = UnicodeAttribute(null=True)
    password_hash = UnicodeAttribute(null=True)  # argon2id
    totp_secret_enc = UnicodeAttribute(null=True)  # KMS ciphertext, base64


class EmailClaimAttrs(BaseModel):
    """``email#<address>`` -> user id, in the users table."""

    TABLE = "users"
    id = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute()


class SubjectClaimAttrs(BaseModel):
    """``idp#<sha256(issuer)>#<subject>`` -> user id, in the users table: the directory finds an SSO
    user by the provider's stable subject first (e-mail addresses can change at the provider)."""

    TABLE = "users"
    id = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute()


# --- sessions table ---------------------------------------------------------------------------------

class _SessionsByUser(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_user"
        projection = AllProjection()

    user_id = UnicodeAttribute(hash_key=True)
    session_id = UnicodeAttribute(range_key=True)


class SessionAttrs(BaseModel):
    TABLE = "sessions"
    sid_hash = UnicodeAttribute(hash_key=True)
    session_id = UnicodeAttribute()
    user_id = UnicodeAttribute()
    amr_json = UnicodeAttribute(default="[]")
    created_at = NumberAttribute()  # also the OIDC auth_time
    expires_at = NumberAttribute()  # TTL
    ip = UnicodeAttribute(null=True)
    user_agent = UnicodeAttribute(null=True)
    by_user = _SessionsByUser()

    @property
    def amr(self) -> list[str]:
        return list(json.loads(self.amr_json))

    def public(self, current_session_id: str | None = None) -> dict[str, Any]:
        return {"id": self.session_id, "created_at": clock.iso(self.created_at),
                "expires_at": clock.iso(self.expires_at), "amr": self.amr, "ip": self.ip or "",
                "user_agent": self.user_agent or "", "current": self.session_id == current_session_id}


# --- oauth_clients table ----------------------------------------------------------------------------

class OAuthClientAttrs(BaseModel):
    TABLE = "oauth_clients"
    client_id = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    secret_hash = UnicodeAttribute(null=True)  # None for public clients
    confidential = BooleanAttribute(default=True)
    grant_types = UnicodeAttribute(default="[]")  # JSON list
    redirect_uris = UnicodeAttribute(default="[]")  # JSON list, matched exactly
    created_at = UnicodeAttribute()
    # client_credentials: the workspace its service principal acts in, and that principal's roles
    workspace_id = UnicodeAttribute(null=True)
    service_roles = UnicodeAttribute(null=True)  # JSON list
    require_pkce = BooleanAttribute(null=True)  # confidential clients: PKCE required too (public ones always)
    first_party = BooleanAttribute(null=True)  # the platform's own client: never asks for consent
    registration = UnicodeAttribute(null=True)  # dynamic | metadata_document | admin (None: admin)

    @property
    def grants(self) -> list[str]:
        return list(json.loads(self.grant_types or "[]"))

    @property
    def redirects(self) -> list[str]:
        return list(json.loads(self.redirect_uris or "[]"))


# --- oauth_consents table ---------------------------------------------------------------------------

class ConsentAttrs(BaseModel):
    """What a user allowed one third-party client in one workspace (``oauth/consent/``)."""

    TABLE = "oauth_consents"
    user_id = UnicodeAttribute(hash_key=True)
    key = UnicodeAttribute(range_key=True)  # "<client_id>#<workspace_id>" (a client id never holds '#')
    client_id = UnicodeAttribute()
    workspace_id = UnicodeAttribute()  # "" for a user with no workspace
    client_name = UnicodeAttribute()  # as the client declared it when the user consented
    scopes = UnicodeAttribute()  # space-separated, sorted: every scope the user allowed
    resources = UnicodeAttribute(default="[]")  # JSON list: "" is the platform API, else an MCP resource URL
    granted_at = UnicodeAttribute()
    last_used_at = UnicodeAttribute(null=True)
    grants = UnicodeSetAttribute(null=True)  # ids of the grants (refresh-token families) issued under it

    @property
    def scope_set(self) -> set[str]:
        return set(self.scopes.split())

    @property
    def resource_list(self) -> list[str]:
        return list(json.loads(self.resources or "[]"))


# --- api_tokens table -------------------------------------------------------------------------------

class _ApiTokensByUser(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_user"
        projection = AllProjection()

    user_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)


class ApiTokenAttrs(BaseModel):
    TABLE = "api_tokens"
    id = UnicodeAttribute(hash_key=True)  # the JWT's jti (tok_...)
    user_id = UnicodeAttribute()
    name = UnicodeAttribute()
    workspace_id = UnicodeAttribute()
    roles = UnicodeAttribute()  # comma-separated, at creation
    created_at = NumberAttribute()
    expires_at = NumberAttribute()
    revoked_at = NumberAttribute(null=True)
    purge_at = NumberAttribute()  # TTL
    by_user = _ApiTokensByUser()

    def public(self) -> dict[str, Any]:
        now = clock.now()
        status = "revoked" if self.revoked_at else ("expired" if self.expires_at <= now else "active")
        return {"id": self.id, "name": self.name, "workspace_id": self.workspace_id,
                "roles": [r for r in self.roles.split(",") if r], "created_at": clock.iso(self.created_at),
                "expires_at": clock.iso(self.expires_at),
                "revoked_at": clock.iso(self.revoked_at) if self.revoked_at else None, "status": status}


# --- webauthn_credentials table ---------------------------------------------------------------------


class _CredentialsByCredential(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_credential"
        projection = AllProjection()

    credential_id = UnicodeAttribute(hash_key=True)


class CredentialAttrs(BaseModel):
    TABLE = "webauthn_credentials"
    user_id = UnicodeAttribute(hash_key=True)
    credential_id = UnicodeAttribute(range_key=True)  # base64url
    kind = UnicodeAttribute()
    name = UnicodeAttribute()
    public_key = UnicodeAttribute()  # COSE key, base64url
    sign_count = NumberAttribute(default=0)
    transports = UnicodeAttribute(default="[]")
    aaguid = UnicodeAttribute(null=True)
    backed_up = BooleanAttribute(default=False)
    created_at = UnicodeAttribute()
    last_used_at = UnicodeAttribute(null=True)
    by_credential = _CredentialsByCredential()

# --- sso_connections table ---------------------------------------------------------------------

class SsoConnectionAttrs(BaseModel):
    TABLE = "sso_connections"
    domain = UnicodeAttribute(hash_key=True)
    workspace_id = UnicodeAttribute()
    kind = UnicodeAttribute()
    display_name = UnicodeAttribute()
    issuer = UnicodeAttribute()
    client_id = UnicodeAttribute()
    client_secret_enc = UnicodeAttribute()
    scopes = UnicodeAttribute(default="[]")
    allowed_domains = UnicodeAttribute(default="[]")
    endpoints = UnicodeAttribute(default="{}")  # oauth2 kinds: explicit endpoints
    verification_token = UnicodeAttribute()
    verified = BooleanAttribute(default=False)
    verified_at = UnicodeAttribute(null=True)
    enabled = BooleanAttribute(default=True)
    created_at = UnicodeAttribute()
    created_by = UnicodeAttribute()


# --- auth_state table (one model per kind; see AUTH_STATE_KINDS) -----------------------------------

class FlowAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # "flow#<kind>#<random>"
    kind = UnicodeAttribute()
    data = UnicodeAttribute()  # JSON
    expires_at = NumberAttribute()


class ResetAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # reset#<sha256(token)>
    user_id = UnicodeAttribute()
    created_at = NumberAttribute()
    link_expires_at = NumberAttribute()
    used = BooleanAttribute(null=True)
    expires_at = NumberAttribute()  # TTL (a day later, so a late second use still reads "used")


class PendingAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # mfa#<sha256(mfa_token)>
    user_id = UnicodeAttribute()
    amr_json = UnicodeAttribute()
    return_to = UnicodeAttribute()
    attempts = NumberAttribute(default=0)
    consumed = BooleanAttribute(null=True)
    expires_at = NumberAttribute()


class LockAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # lock#<user_id>
    attempts = NumberAttribute(null=True)
    locked_until = NumberAttribute(null=True)
    lockout_times = NumberSetAttribute(null=True)


class TotpStateAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # totp#<user_id>
    last_step = NumberAttribute(null=True)
    pending_secret_enc = UnicodeAttribute(null=True)
    pending_expires_at = NumberAttribute(null=True)


class RecoveryCodesAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # rc#<user_id>
    codes = UnicodeSetAttribute(null=True)
    created_at = NumberAttribute(null=True)


class EmailCodeAttrs(BaseModel):
    TABLE = "auth_state"
    pk = UnicodeAttribute(hash_key=True)  # ecode#<address>
    code_hash = UnicodeAttribute(null=True)
    attempts = NumberAttribute(null=True)
    code_expires_at = NumberAttribute(null=True)
    sends = NumberAttribute(null=True)
    window_start = NumberAttribute(null=True)
    expires_at = NumberAttribute(null=True)  # TTL of the item


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
    code_challenge = UnicodeAttribute(null=True)  # None: a confidential client sent no PKCE
    auth_time = NumberAttribute()
    session_id = UnicodeAttribute()
    family_id = UnicodeAttribute()
    code_expires_at = NumberAttribute()
    used = BooleanAttribute(null=True)
    expires_at = NumberAttribute()  # TTL: kept a while after expiry so a reuse is still recognised
    resource = UnicodeAttribute(null=True)  # RFC 8707: the MCP resource the tokens are for (None: service-api)


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
    user_epoch = NumberAttribute(null=True)  # the user's revocation epoch when the grant began
    resource = UnicodeAttribute(null=True)  # RFC 8707: kept for the grant's refreshed tokens
    used = BooleanAttribute(null=True)
    expires_at = NumberAttribute()  # = the family's end; TTL


# --- rate_limits table ------------------------------------------------------------------------------

class RateLimitAttrs(BaseModel):
    TABLE = "rate_limits"
    key = UnicodeAttribute(hash_key=True)  # <limit>#<sha256(subject)>#<window start>
    hits = NumberAttribute(null=True, attr_name="count")  # not `count`: that is Model.count()
    expires_at = NumberAttribute(null=True)  # TTL: the end of the window
