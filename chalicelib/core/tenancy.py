"""Workspaces and memberships as every context sees them, and the request scope built from them.

The workspace directory entry is global by design (name, slug, residency, billing, usage counters);
memberships are workspace content and live in the workspace's region. Everything that reads or writes
workspace content asks ``region_of`` first.

A container trusts a directory entry or a membership it read for ``SCOPE_CACHE_SECONDS`` (the same bound
as token revocation): a change made in another container applies here at most that much later; any write
of a directory entry or membership in this container (through the models below) forgets every cached one
at once. ``scope_of`` resolves a request's ``RequestScope`` (principal, region, directory entry) once, in
the authorisation path; services take it from there.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.exceptions import DoesNotExist
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from chalicelib.core import clock, regions
from chalicelib.core.authz import Principal, mfa_used, require_workspace
from chalicelib.core.http.errors import ApiError, not_found
from chalicelib.core.process_state import cached, enrol
from chalicelib.core.store.tables import BaseModel, global_model, regional

# How long a container trusts a workspace's directory entry or a membership it read (docs/decisions.md,
# "Request scope"): the staleness bound for a change written in another container.
SCOPE_CACHE_SECONDS = 5.0
_SCOPE_CACHE_SIZE = 10_000
_cache_lock = threading.Lock()
_cached: dict[tuple[str, ...], tuple[float, Any]] = {}  # ("ws", id) | ("m", ws, user) -> (read at, item)


def forget_scopes() -> None:
    """Forget every directory entry and membership this container cached (after a write here)."""
    with _cache_lock:
        _cached.clear()


enrol("core.tenancy.scopes", forget_scopes)


def _cache_get(key: tuple[str, ...]) -> tuple[bool, Any]:
    hit = _cached.get(key)
    if hit is not None and clock.now() - hit[0] < SCOPE_CACHE_SECONDS:
        return True, hit[1]
    return False, None


def _cache_put(key: tuple[str, ...], read_at: float, value: Any) -> None:
    with _cache_lock:
        if len(_cached) >= _SCOPE_CACHE_SIZE:
            _cached.clear()
        _cached[key] = (read_at, value)


class _ForgetsOnWrite(BaseModel):
    """A model whose writes in this container drop the cached directory entries and memberships."""

    def save(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().save(*args, **kwargs)
        finally:
            forget_scopes()

    def update(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().update(*args, **kwargs)
        finally:
            forget_scopes()

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().delete(*args, **kwargs)
        finally:
            forget_scopes()


class _BySlug(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_slug"
        projection = AllProjection()

    slug = UnicodeAttribute(hash_key=True)


class WorkspaceAttrs(_ForgetsOnWrite):
    """Global directory entry of a workspace. No workspace content here."""

    TABLE = "workspaces"
    id = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    slug = UnicodeAttribute()
    residency = UnicodeAttribute()
    region = UnicodeAttribute()
    enforce_mfa = BooleanAttribute(default=False)
    replication = UnicodeAttribute(default="none")
    created_at = UnicodeAttribute()
    created_by = UnicodeAttribute()
    settings = UnicodeAttribute(default="{}")  # JSON: domain join, chat auto-expiry, engineering_only...
    billing_plan = UnicodeAttribute(default="free")
    member_count = NumberAttribute(default=0)
    by_slug = _BySlug()


class _ByUser(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_user"
        projection = AllProjection()

    user_id = UnicodeAttribute(hash_key=True)
    workspace_id = UnicodeAttribute(range_key=True)


class MembershipAttrs(_ForgetsOnWrite):
    """A user's role in a workspace (regional: stored in the workspace's region)."""

    TABLE = "memberships"
    workspace_id = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute(range_key=True)
    role = UnicodeAttribute()
    email = UnicodeAttribute()
    joined_at = UnicodeAttribute()
    joined_via = UnicodeAttribute(default="created")  # created | invitation | domain_join | seed
    role_since = UnicodeAttribute(null=True)  # when ``role`` was last set (absent: since ``joined_at``)
    # the workspace groups (``grp_...``) the member belongs to: the one home of group membership, read with
    # the role on every request (``live_principal``), so a change applies to the next request
    groups = UnicodeSetAttribute(null=True)
    by_user = _ByUser()


def workspaces() -> type[WorkspaceAttrs]:
    return global_model(WorkspaceAttrs)


def memberships(region: str) -> type[MembershipAttrs]:
    return regional(MembershipAttrs, region)


def get_workspace(workspace_id: str) -> WorkspaceAttrs:
    """The directory entry (read at most ``SCOPE_CACHE_SECONDS`` ago; treat it as read-only: a write
    reads its own copy), or a 404 (a malformed id never reaches DynamoDB)."""
    if not isinstance(workspace_id, str) or not 1 <= len(workspace_id) <= 64:
        raise not_found("workspace")
    found, ws = _cache_get(("ws", workspace_id))
    if found:
        return ws  # type: ignore[no-any-return]
    read_at = clock.now()
    try:
        ws = workspaces().get(workspace_id)
    except DoesNotExist:
        raise not_found("workspace") from None
    _cache_put(("ws", workspace_id), read_at, ws)
    return ws  # type: ignore[no-any-return]


@cached(maxsize=4096)
def region_of(workspace_id: str) -> str:
    """The region holding a workspace's content (residency never changes, so this is cacheable)."""
    return get_workspace(workspace_id).region


def membership(workspace_id: str, user_id: str) -> MembershipAttrs | None:
    """The user's membership in the workspace, read in the workspace's region (consistently, at most
    ``SCOPE_CACHE_SECONDS`` ago; read-only)."""
    found, m = _cache_get(("m", workspace_id, user_id))
    if found:
        return m  # type: ignore[no-any-return]
    cls = memberships(region_of(workspace_id))
    read_at = clock.now()
    try:
        m = cls.get(workspace_id, user_id, consistent_read=True)
    except cls.DoesNotExist:
        m = None
    _cache_put(("m", workspace_id, user_id), read_at, m)
    return m  # type: ignore[no-any-return]


def live_principal(principal: Principal) -> Principal:
    """The caller with the role their membership has now, not the one in the token.

    A removed member is refused (403 ``membership_revoked``) and a demoted one acts with the new role,
    whatever token they hold (API tokens live up to 90 days): at once in the container that made the
    change, within ``SCOPE_CACHE_SECONDS`` in every other. When the workspace has ``enforce_mfa``
    on, a token whose ``amr`` shows no second factor is refused (403 ``mfa_required``) from the next
    request on, whenever it was issued; an API token carries the ``amr`` of the session that created it.
    Service tokens (client credentials, 15 minutes) carry their client's roles as issued.
    """
    if principal.claims.get("token_use") == "service" or not principal.workspace_id:
        return principal  # no workspace: no roles, so every workspace permission is refused anyway
    m = membership(principal.workspace_id, principal.user_id)
    if m is None:
        raise ApiError(403, "membership_revoked", "You are no longer a member of this workspace.")
    if not mfa_used(principal.amr) and get_workspace(principal.workspace_id).enforce_mfa:
        raise ApiError(403, "mfa_required", "This workspace requires multi-factor authentication: sign in again "
                                            "with a second factor (API tokens must be created from such a sign-in).")
    return replace(principal, roles=(m.role,), membership=m, groups=frozenset(m.groups or ()))


def acting_member(workspace_id: str, user_id: str, *, email: str, amr: str, token_id: str,
                  datasets: frozenset[str] | None = None) -> Principal | None:
    """A user as work done for them outside a request acts (a queued answer, an agent run, an export): with
    the role and groups their membership has now, ``amr`` naming the work; None once they left."""
    m = membership(workspace_id, user_id)
    if m is None:
        return None
    return Principal(user_id=user_id, workspace_id=workspace_id, roles=(m.role,), email=email, amr=(amr,),
                     token_id=token_id, membership=m, groups=frozenset(m.groups or ()), datasets=datasets)


def require_member(principal: Principal, workspace_id: str) -> MembershipAttrs:
    """A workspace named in a path must be the token's own, and the caller a member there (else 404)."""
    require_workspace(principal, workspace_id)
    if principal.membership is None:  # service principals are not members
        raise not_found("workspace")
    return principal.membership


def roles_for(workspace_id: str, user_id: str) -> list[str]:
    m = membership(workspace_id, user_id)
    return [m.role] if m else []


def workspaces_of(user_id: str) -> list[dict[str, Any]]:
    """Every workspace the user belongs to, across regions: ``[{workspace_id, role, region}]``."""
    out: list[dict[str, Any]] = []
    for region in regions.served_regions():
        for m in memberships(region).by_user.query(user_id):
            out.append({"workspace_id": m.workspace_id, "role": m.role, "region": region})
    out.sort(key=lambda x: x["workspace_id"])
    return out


def ensure_served_here(principal: Principal, scope: str, params: dict[str, str]) -> None:
    """421 unless this deployment serves the request: a pinned regional deployment serves only its own
    region's workspaces, and only the global deployment serves global routes. It reads the global
    directory alone (``region_of``, cached), so it answers before any regional store is read."""
    pin = regions.pinned_region()
    if not pin:
        return
    if scope == regions.GLOBAL:
        if not regions.serves_global():
            raise regions.global_only()
        return
    workspace_id = params.get("workspace_id") if scope == regions.PATH else principal.workspace_id
    if not workspace_id:
        return  # no workspace: every workspace permission is refused anyway
    region = region_of(workspace_id)
    if region != pin:
        raise regions.wrong_region(region)


def endpoints_of(workspace_id: str) -> dict[str, str]:
    """``api_base_url`` and ``gateway_url`` of the deployment serving the workspace ({} when it is unknown)."""
    if not workspace_id:
        return {}
    try:
        where = regions.endpoints(region_of(workspace_id))
    except ApiError:
        return {}
    return {"api_base_url": where["api_base_url"], "gateway_url": where["gateway_url"]}


@dataclass(frozen=True)
class RequestScope:
    """What one request acts as and on, resolved once in the authorisation path (``core.http.api``):
    the caller (with the live role), the region holding the workspace's content, and the workspace's
    directory entry (None for a token without a workspace; its settings through
    ``core.workspace_settings.settings_of``). Services take these from here instead of looking them up
    again."""

    principal: Principal
    region: str | None = None
    workspace: WorkspaceAttrs | None = field(default=None, compare=False, repr=False)

    @property
    def workspace_id(self) -> str:
        return self.principal.workspace_id

    def entry(self) -> WorkspaceAttrs:
        """The token's workspace's directory entry, or a 404 (no workspace, or one that no longer exists)."""
        if self.workspace is None:
            raise not_found("workspace")
        return self.workspace


def scope_of(principal: Principal) -> RequestScope:
    """The request scope of a verified (and, for workspace routes, live) principal: no store read beyond
    the cached directory entry its checks already needed."""
    if not principal.workspace_id:
        return RequestScope(principal)
    try:
        ws = get_workspace(principal.workspace_id)
    except ApiError:
        return RequestScope(principal)  # a token of a deleted workspace: every workspace permission fails
    return RequestScope(principal, ws.region, ws)
