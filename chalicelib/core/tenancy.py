"""Workspaces and memberships as every context sees them, and the request scope built from them.

The workspace directory entry is global by design (name, slug, residency, billing, usage counters);
memberships are workspace content and live in the workspace's region. Everything that reads or writes
workspace content asks ``region_of`` first.

A request (a unit of work, ``core.store.scope_versions.unit``) reads the workspace's scope version item and
the caller's membership once, in one consistent ``BatchGetItem`` with the revocation watermark when that is
due (``begin_request``): the membership is the one just read, and a cached directory entry is used while its
version has not moved (every write of it, through the models below, bumps the version). A change made in
another container therefore applies from the next request. Outside a unit of work (background jobs that
open none) a membership is trusted for ``SCOPE_CACHE_SECONDS``. ``scope_of`` resolves a request's
``RequestScope`` (principal, region, directory entry) once, in the authorisation path; services take it from
there.
"""
from __future__ import annotations

import threading
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field, replace
from typing import Any

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.exceptions import DoesNotExist
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from chalicelib.core import aws, clock, regions
from chalicelib.core.authz import Principal, mfa_used, require_workspace
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, not_found
from chalicelib.core.process_state import cached, enrol
from chalicelib.core.store import scope_versions
from chalicelib.core.store.tables import BaseModel, batch_get, global_model, regional
from chalicelib.core.tokens import WATERMARK_KEY, RevocationCheck

# How long a container trusts a membership it read outside a unit of work (docs/decisions.md, "Request
# scope"); inside one (every request) the membership is read once per request.
SCOPE_CACHE_SECONDS = 5.0
_SCOPE_CACHE_SIZE = 10_000
_cache_lock = threading.Lock()
_cached: dict[tuple[str, ...], tuple[float, Any]] = {}  # ("m", ws, user) -> (read at, item), outside a unit
_entries: scope_versions.VersionedCache[WorkspaceAttrs] = scope_versions.VersionedCache(
    "core.tenancy.entries", scope_versions.DIRECTORY, _SCOPE_CACHE_SIZE)


def forget_scopes() -> None:
    """Forget every directory entry and membership this container cached (after a write here)."""
    with _cache_lock:
        _cached.clear()
    _entries.clear()
    scope_versions.unit_drop("m")  # a membership read earlier in this request is read again


def membership_changed(user_id: str) -> None:
    """After a user's membership was added, removed or given another role (committed): this container
    forgets what it cached, and every container lists the user's workspaces again (``workspaces_of``)."""
    forget_scopes()
    scope_versions.bump(user_id, scope_versions.MEMBERSHIPS)


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
    """A model whose writes in this container drop the cached directory entries and memberships (and, for
    a directory entry, bump its version: ``_written``)."""

    def _written(self) -> None:
        forget_scopes()

    def save(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().save(*args, **kwargs)
        finally:
            self._written()

    def update(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().update(*args, **kwargs)
        finally:
            self._written()

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().delete(*args, **kwargs)
        finally:
            self._written()


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

    def _written(self) -> None:
        forget_scopes()
        scope_versions.bump(self.id, scope_versions.DIRECTORY)  # every container reads it again


class _ByUser(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_user"
        projection = AllProjection()

    user_id = UnicodeAttribute(hash_key=True)
    workspace_id = UnicodeAttribute(range_key=True)


class MembershipAttrs(_ForgetsOnWrite):
    """A user's role in a workspace (regional: stored in the workspace's region)."""

    def _written(self) -> None:
        membership_changed(self.user_id)

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
    """The directory entry (the one read when its version last moved; treat it as read-only: a write
    reads its own copy), or a 404 (a malformed id never reaches DynamoDB)."""
    if not isinstance(workspace_id, str) or not 1 <= len(workspace_id) <= 64:
        raise not_found("workspace")
    return _entries.get(workspace_id, lambda: _read_entry(workspace_id))


def _read_entry(workspace_id: str) -> WorkspaceAttrs:
    try:
        return workspaces().get(workspace_id, consistent_read=True)  # type: ignore[no-any-return]
    except DoesNotExist:
        raise not_found("workspace") from None


@cached(maxsize=4096)
def region_of(workspace_id: str) -> str:
    """The region holding a workspace's content (residency never changes, so this is cacheable)."""
    return get_workspace(workspace_id).region


def membership(workspace_id: str, user_id: str) -> MembershipAttrs | None:
    """The user's membership in the workspace, read consistently in the workspace's region: once per unit
    of work (``begin_request`` reads it with the request's scope), else at most ``SCOPE_CACHE_SECONDS``
    ago; read-only."""
    name = ("m", workspace_id, user_id)
    found, m = scope_versions.unit_get(name)
    if found:
        return m  # type: ignore[no-any-return]
    inside = scope_versions.in_unit()
    if not inside:
        found, m = _cache_get(name)
        if found:
            return m  # type: ignore[no-any-return]
    region = region_of(workspace_id)
    cls = memberships(region)
    read_at = clock.now()
    # a request's first read in the workspace's region (``begin_request`` marked it): with what is read alongside
    along = scope_versions.alongside_keys(workspace_id) if scope_versions.unit_get(("request", workspace_id))[0] else {}
    member_table = aws.table_name(MembershipAttrs.TABLE)
    items = _batch_get(region, {member_table: {
        "Keys": [{"workspace_id": {"S": workspace_id}, "user_id": {"S": user_id}}], "ConsistentRead": True},
        **{table: {"Keys": [k], "ConsistentRead": True} for table, k in along.items()}}) if along else None
    if items is not None:
        raw = next(iter(items.get(member_table, [])), None)
        m = cls.from_raw_data(raw) if raw is not None else None
        scope_versions.keep_alongside(region, workspace_id, items)
    else:
        try:
            m = cls.get(workspace_id, user_id, consistent_read=True)
        except cls.DoesNotExist:
            m = None
    if inside:
        scope_versions.unit_put(name, m)
    else:
        _cache_put(name, read_at, m)
    return m  # type: ignore[no-any-return]


def begin_request(claims: dict[str, Any], revocations: RevocationCheck) -> None:
    """Read what a request of a verified token needs, once, in one consistent ``BatchGetItem`` of the
    global region: the workspace's scope version item, the revocation watermark when the check is due to
    read it (``tokens.RevocationCheck.take_watermark``), and the caller's membership when it lives in the
    same region (else ``membership`` reads it on its own, once), with the user's version item (the listing of
    their workspaces) and what is read alongside (``scope_versions.read_alongside``). Outside a unit of work
    it does nothing."""
    workspace_id, user_id = claims.get("workspace_id"), str(claims.get("sub") or "")
    if not scope_versions.in_unit() or not isinstance(workspace_id, str) or not 1 <= len(workspace_id) <= 64:
        return
    now = clock.now()
    user = bool(user_id) and claims.get("token_use") != "service" and user_id != workspace_id
    due = revocations.watermark_due(now)
    found = _read_scope(workspace_id, user_id if user else "", (user_id,) if user else (),
                        [{"jti": {"S": WATERMARK_KEY}}] if due else [])
    if found is not None and due:
        revocations.take_watermark(found.get(WATERMARK_KEY), now)


def begin_work(workspace_id: str, user_id: str) -> None:
    """What queued work done for a member needs (an agent run's delivery), once for its unit of work: the
    workspace's scope version item and the member's membership, in one consistent ``BatchGetItem`` when the
    workspace lives in the global region (else ``membership`` reads it in the workspace's region). Nothing is
    read alongside: a delivery may last minutes, and its catalog reads check the version as they go
    (docs/decisions.md, "Request scope"). Outside a unit of work it does nothing."""
    if scope_versions.in_unit():
        _read_scope(workspace_id, user_id, (), [], request=False)


def _read_scope(workspace_id: str, member: str, subjects: tuple[str, ...], more: list[dict[str, Any]], *,
                request: bool = True) -> dict[str, dict[str, Any]] | None:
    """The unit of work's scope read (``begin_request``, ``begin_work``): the scope version items of the
    workspace and ``subjects`` and the ``more`` keys of their table, with ``member``'s membership (and, for
    a ``request``, the items read alongside) when the workspace's region is the global one. The table's
    items found, by key; None when the scope was read already in this unit, or the read failed (what was
    left is read on its own when needed)."""
    if scope_versions.unit_get(("v", workspace_id))[0]:
        return None  # read already in this unit
    if request:
        scope_versions.unit_put(("request", workspace_id), True)
    table = scope_versions.table()
    keys = [scope_versions.key(workspace_id)] + [scope_versions.key(s) for s in subjects] + more
    batch: dict[str, Any] = {table: {"Keys": keys, "ConsistentRead": True}}
    global_region = settings().global_region
    # the membership table of the global region, asked before the workspace's region is known (a container's
    # first request of a workspace); its answer is used only when that is the workspace's region
    member_table = aws.table_name(MembershipAttrs.TABLE)
    here = bool(member) and regions.pinned_region() in ("", global_region)
    if here:
        batch[member_table] = {
            "Keys": [{"workspace_id": {"S": workspace_id}, "user_id": {"S": member}}], "ConsistentRead": True}
        if request:
            batch.update({name: {"Keys": [k], "ConsistentRead": True}
                          for name, k in scope_versions.alongside_keys(workspace_id).items()})
    found = _batch_get(global_region, batch)
    if found is None:
        return None
    by_key = {i["jti"]["S"]: i for i in found.get(table, [])}
    for subject in (workspace_id, *subjects):
        scope_versions.seen(subject, scope_versions.parse(by_key.get(scope_versions.key(subject)["jti"]["S"])))
    if here:
        try:
            region = region_of(workspace_id)  # a container's first request of the workspace: its entry
        except ApiError:
            return by_key  # a token of a deleted workspace: every workspace permission fails anyway
        if region == global_region:
            raw = next(iter(found.get(member_table, [])), None)
            scope_versions.unit_put(("m", workspace_id, member),
                                    memberships(region).from_raw_data(raw) if raw is not None else None)
            if request:
                scope_versions.keep_alongside(region, workspace_id, found)
    return by_key


def _batch_get(region: str, request: dict[str, Any]) -> dict[str, list[dict[str, Any]]] | None:
    """One consistent ``BatchGetItem`` in ``region`` (``tables.batch_get``)."""
    return batch_get(aws.client("dynamodb", region), request)


def live_principal(principal: Principal) -> Principal:
    """The caller with the role their membership has now, not the one in the token.

    A removed member is refused (403 ``membership_revoked``) and a demoted one acts with the new role,
    whatever token they hold (API tokens live up to 90 days): from the next request in every container
    (the membership is read with every request; ``begin_request``). When the workspace has ``enforce_mfa``
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


# A listing is kept while the user's ``memberships`` version stands, and at most this long (a bound for
# a write that could not bump it, e.g. a restore: docs/decisions.md, "Request scope").
LISTING_MAX_SECONDS = 300.0
_listings: scope_versions.VersionedCache[list[dict[str, Any]]] = scope_versions.VersionedCache(
    "core.tenancy.listings", scope_versions.MEMBERSHIPS, _SCOPE_CACHE_SIZE, max_age=LISTING_MAX_SECONDS)


def workspaces_of(user_id: str) -> list[dict[str, Any]]:
    """Every workspace the user belongs to, across regions: ``[{workspace_id, role, region}]`` (read again
    when the user's ``memberships`` version moved; ``membership_changed``)."""
    served = regions.served_regions()

    def listing() -> list[dict[str, Any]]:
        # the other regions' listings on worker threads, overlapping this one's round trip
        others = [aws.alongside(_memberships_in, region, user_id) for region in served[1:]]
        try:
            out = _memberships_in(served[0], user_id)
        finally:
            wait_for(others)  # none left running after the request, whatever failed
        for other in others:
            out += other.result()
        out.sort(key=lambda x: x["workspace_id"])
        return out
    return [dict(x) for x in _listings.get(user_id, listing, sub=served)]


def _memberships_in(region: str, user_id: str) -> list[dict[str, Any]]:
    return [{"workspace_id": m.workspace_id, "role": m.role, "region": region}
            for m in memberships(region).by_user.query(user_id)]


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

    @property
    def home(self) -> str:
        """The region holding the workspace's content, or a 404 for a token without a workspace (or of
        one that no longer exists)."""
        if self.region is None:
            raise not_found("workspace")
        return self.region

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


def workspace_scope(workspace_id: str, principal: Principal | None = None) -> RequestScope:
    """The scope of work for a workspace that enters without a request's scope (a queued job, a SCIM token,
    a scheduled pass): ``principal`` acting, or the system (no user, no role) when None; 404 when the
    workspace does not exist."""
    ws = get_workspace(workspace_id)
    acting = principal or Principal(user_id="", workspace_id=workspace_id, roles=(), email="", amr=("system",),
                                    token_id="")
    return RequestScope(acting, ws.region, ws)
