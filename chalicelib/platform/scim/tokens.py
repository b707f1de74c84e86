"""Workspace SCIM tokens: an Admin creates one for the identity provider (shown once), lists and revokes
them; every SCIM request is checked against them.

A token reads ``scim.<token id>.<secret>``; only the SHA-256 of the secret is stored (a 256-bit random
secret needs no slow hash), compared in constant time. A revoked token is refused from the next request
on (the check reads the token's item every time). Creating and revoking are audited.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import audit, clock, regions
from chalicelib.core.authz import Principal
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import F
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.tenancy import RequestScope
from chalicelib.platform.models import ScimTokenAttrs, scim_tokens
from chalicelib.platform.scim.protocol import base_url

TOKEN_PREFIX = "tok#"
MAX_ACTIVE_TOKENS = 10
LAST_USED_RESOLUTION = timedelta(minutes=1)
CREATE_FIELDS = {"name": F(str, max_len=100, min_len=1, pattern=r"^.*\S.*$")}


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def to_public(t: ScimTokenAttrs) -> dict[str, Any]:
    return {"id": t.token_id, "name": t.name, "created_at": t.created_at, "created_by": json.loads(t.created_by),
            "last_used_at": t.last_used_at, "revoked_at": t.revoked_at}


def list_tokens(scope: RequestScope) -> dict[str, Any]:
    cls = scim_tokens(scope.home)
    items = cls.query(scope.workspace_id, cls.key.startswith(TOKEN_PREFIX), consistent_read=True)
    return {"tokens": [to_public(t) for t in items]}


def create(scope: RequestScope, name: str | None, *, caller: Any = None) -> dict[str, Any]:
    """A new token; its secret is in this answer only."""
    cls = scim_tokens(scope.home)
    active = [t for t in cls.query(scope.workspace_id, cls.key.startswith(TOKEN_PREFIX), consistent_read=True)
              if not t.revoked_at]
    if len(active) >= MAX_ACTIVE_TOKENS:
        raise conflict("too_many_tokens", f"A workspace holds at most {MAX_ACTIVE_TOKENS} active SCIM tokens: "
                                          "revoke one first.")
    principal = scope.principal
    token_id, secret = new_id("tok"), secrets.token_urlsafe(32)
    item = cls(scope.workspace_id, TOKEN_PREFIX + token_id, token_id=token_id, name=(name or "SCIM").strip(),
               secret_hash=_hash(secret), created_at=clock.iso(),
               created_by=json.dumps({"id": principal.user_id, "email": principal.email}))
    item.save(condition=cls.key.does_not_exist())
    audit.append(scope.home, scope.workspace_id, "scim.token_created", actor=audit.Actor.of(principal),
                 target={"type": "scim_token", "id": token_id}, details={"name": item.name}, caller=caller)
    return {**to_public(item), "token": f"scim.{token_id}.{secret}", "base_url": base_url(scope)}


def revoke(scope: RequestScope, token_id: str, *, caller: Any = None) -> None:
    cls = scim_tokens(scope.home)
    if not is_id(token_id, "tok"):
        raise not_found("SCIM token")
    try:
        item = cls.get(scope.workspace_id, TOKEN_PREFIX + token_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("SCIM token") from None
    if item.revoked_at:
        return
    item.update(actions=[cls.revoked_at.set(clock.iso())])
    audit.append(scope.home, scope.workspace_id, "scim.token_revoked", actor=audit.Actor.of(scope.principal),
                 target={"type": "scim_token", "id": token_id}, details={"name": item.name}, caller=caller)


@dataclass(frozen=True)
class ScimCaller:
    """The identity provider calling with a valid SCIM token of ``scope``'s workspace."""

    scope: RequestScope
    token: ScimTokenAttrs

    @property
    def actor(self) -> audit.Actor:
        return audit.Actor("scim", self.token.token_id, self.token.name)


def refused() -> ApiError:
    return ApiError(401, "invalid_token", "A valid SCIM token of this workspace is required.",
                    headers={"WWW-Authenticate": 'Bearer realm="scim"'})


def presented(authorization: str | None) -> tuple[str, str]:
    """The id and secret of the SCIM token an ``Authorization`` header presents (401 unless it is well
    formed: checked before anything is read)."""
    value = (authorization or "").strip()
    if not value.lower().startswith("bearer "):
        raise refused()
    parts = value[7:].strip().split(".")
    if len(parts) != 3 or parts[0] != "scim" or not is_id(parts[1], "tok") or not 20 <= len(parts[2]) <= 100:
        raise refused()
    return parts[1], parts[2]


def authenticate(scope: RequestScope, token: tuple[str, str]) -> ScimCaller:
    """The SCIM caller of ``scope``'s workspace (the SCIM entry point's ``core.tenancy.workspace_scope``)
    presenting ``token`` (``presented``): 401 for anything but a live token of that workspace, 421 when
    another region's deployment serves the workspace."""
    token_id, secret = token
    region = scope.entry().region
    pin = regions.pinned_region()
    if pin and region != pin:
        raise regions.wrong_region(region)
    cls = scim_tokens(region)
    try:
        item = cls.get(scope.workspace_id, TOKEN_PREFIX + token_id, consistent_read=True)
    except DoesNotExist:
        raise refused() from None
    if item.revoked_at or not hmac.compare_digest(item.secret_hash, _hash(secret)):
        raise refused()
    now = clock.utcnow()
    if not item.last_used_at or now - clock.parse_iso(item.last_used_at) > LAST_USED_RESOLUTION:
        item.update(actions=[cls.last_used_at.set(clock.iso())])
    principal = Principal(user_id="scim", workspace_id=scope.workspace_id, roles=(), email="", amr=(),
                          token_id=item.token_id)
    return ScimCaller(replace(scope, principal=principal), item)
