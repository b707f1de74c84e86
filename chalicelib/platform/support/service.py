"""Support access grants (spec residency rule 4).

Who is support: users of the identity directory registered in the global ``support_staff`` table by
operators (``register_staff``). They sign in like anyone else (MFA required for support access) and
call the support routes with their own user token. They can read a workspace's metadata and audit
trail ONLY while an Admin of that workspace has granted them access: a named person, a reason, a
bounded time (ISO 8601 duration, at most ``MAX_GRANT``). The grant, its revocation, every use (and
every refused attempt on an existing workspace) and its expiry are audited in the workspace's region.
Without a live grant the answer is 403 ``support_access_denied`` -- the same whether the workspace
exists or not.
"""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.authz import Principal
from chalicelib.core.durations import duration_check, parse_duration
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import F, email
from chalicelib.core.ids import new_id
from chalicelib.core.regions import served_regions
from chalicelib.core.store import revocation_ledger
from chalicelib.core.tenancy import WorkspaceAttrs, workspaces
from chalicelib.identity import users
from chalicelib.platform.access import mfa_used, require_user_token
from chalicelib.platform.models import SupportGrantAttrs, support_grants, support_staff

MIN_GRANT = 15 * 60
MAX_GRANT = 72 * 3600
CREATE_FIELDS = {
    "support_email": F(str, required=True, max_len=254, check=email),
    "duration": F(str, required=True, max_len=32, check=duration_check(MIN_GRANT, MAX_GRANT, "PT15M and PT72H")),
    "reason": F(str, required=True, min_len=3, max_len=500),
}


def register_staff(user_id: str, name: str, location: str = "") -> None:
    """Operator action (no API route): flag a directory user as provider support staff."""
    user = users.get_user(user_id)
    if user is None:
        raise ValueError("no such user")
    support_staff()(user_id, email=user.email, name=name, location=location, active=True,
                    added_at=clock.iso()).save()


def is_staff(user_id: str) -> bool:
    try:
        return bool(support_staff().get(user_id, consistent_read=True).active)
    except DoesNotExist:
        return False


def status_of(g: SupportGrantAttrs) -> str:
    if g.revoked_at:
        return "revoked"
    return "active" if g.expires_at > clock.now() else "expired"


def to_public(g: SupportGrantAttrs) -> dict[str, Any]:
    return {"id": g.id, "workspace_id": g.workspace_id, "support_user_id": g.support_user_id,
            "support_email": g.support_email, "reason": g.reason, "granted_by": json.loads(g.granted_by),
            "created_at": g.created_at, "expires_at": clock.iso(g.expires_at), "status": status_of(g),
            "revoked_at": g.revoked_at}


def create(ws: WorkspaceAttrs, body: dict[str, Any], *, actor: audit.Actor, caller: Any = None) -> dict[str, Any]:
    person = users.find_by_email(body["support_email"])
    if person is None or not is_staff(person.id):
        raise ApiError(422, "not_support_staff", "That address is not a member of the provider's support staff.",
                       errors=[{"field": "support_email", "message": "is not support staff"}])
    seconds = parse_duration(body["duration"])
    now = clock.now()
    g = support_grants(ws.region)(ws.id, new_id("grant"), support_user_id=person.id, support_email=person.email,
                                  reason=body["reason"], granted_by=json.dumps({"id": actor.id, "email": actor.email}),
                                  created_at=clock.iso(now), expires_at=int(now) + seconds)
    g.save(condition=SupportGrantAttrs.id.does_not_exist())
    audit.append(ws.region, ws.id, "support.access_granted", actor=actor,
                 target={"type": "support_grant", "id": g.id, "support_user_id": person.id, "email": person.email},
                 details={"duration": body["duration"], "expires_at": clock.iso(g.expires_at), "reason": body["reason"]},
                 caller=caller)
    return to_public(g)


def get(ws: WorkspaceAttrs, grant_id: str) -> SupportGrantAttrs:
    cls = support_grants(ws.region)
    try:
        return cls.get(ws.id, grant_id, consistent_read=True)
    except cls.DoesNotExist:
        raise not_found("support grant") from None


def list_grants(ws: WorkspaceAttrs, limit: int, after: str | None) -> dict[str, Any]:
    cls = support_grants(ws.region)
    cond = cls.id > after if after else None
    items = list(cls.query(ws.id, cond, limit=limit + 1, page_size=limit + 1))
    out = paging.page(items, limit, "support_grants", lambda g: g.id)
    return {"grants": [to_public(g) for g in out.pop("_items")], **out}


def revoke(ws: WorkspaceAttrs, grant_id: str, *, actor: audit.Actor, caller: Any = None) -> dict[str, Any]:
    g = get(ws, grant_id)
    if status_of(g) != "active":
        raise conflict("grant_not_active", f"The grant is {status_of(g)}.")
    cls = support_grants(ws.region)
    now = clock.iso()
    try:
        g.update(actions=[cls.revoked_at.set(now), cls.revoked_by.set(actor.id)],
                 condition=cls.revoked_at.does_not_exist())
    except UpdateError:
        raise conflict("grant_not_active", "The grant was already revoked.") from None
    revocation_ledger.record(ws.region, ws.id, revocation_ledger.SUPPORT_GRANT, g.id, now, actor.id)
    audit.append(ws.region, ws.id, "support.access_revoked", actor=actor,
                 target={"type": "support_grant", "id": g.id, "support_user_id": g.support_user_id}, caller=caller)
    return to_public(get(ws, grant_id))


def audit_expiry(region: str, g: SupportGrantAttrs) -> bool:
    """Write ``support.access_expired`` once for an expired, unrevoked grant (claimed by a conditional
    update, so the scheduler and a lazy check never both write it)."""
    if status_of(g) != "expired" or g.expiry_audited:
        return False
    cls = support_grants(region)
    try:
        g.update(actions=[cls.expiry_audited.set(True)], condition=cls.expiry_audited.does_not_exist())
    except UpdateError:
        return False
    audit.append(region, g.workspace_id, "support.access_expired", actor=audit.SYSTEM,
                 target={"type": "support_grant", "id": g.id, "support_user_id": g.support_user_id},
                 details={"expired_at": clock.iso(g.expires_at)})
    return True


def expire_grants(event: dict[str, Any] | None = None) -> dict[str, Any]:
    """Scheduled: audit every grant that expired since the last run, in the regions this deployment serves."""
    written = 0
    for region in served_regions():
        cls = support_grants(region)
        for g in cls.scan(filter_condition=cls.expiry_audited.does_not_exist() & cls.revoked_at.does_not_exist()
                          & (cls.expires_at <= int(clock.now()))):
            written += int(audit_expiry(region, g))
    return {"expired_audited": written}


def denied() -> ApiError:
    return ApiError(403, "support_access_denied", "Support access to this workspace needs a live grant from one "
                                                  "of its Admins.")


def authorize(principal: Principal, workspace_id: str, resource: str, caller: Any = None) -> tuple[WorkspaceAttrs, SupportGrantAttrs]:
    """The workspace and the live grant that lets this support person read ``resource``; audits the use."""
    require_user_token(principal)
    if not is_staff(principal.user_id):
        raise denied()
    if not mfa_used(principal):
        raise ApiError(403, "mfa_required", "Support access requires a sign-in with a second factor.")
    try:
        ws = workspaces().get(workspace_id, consistent_read=True)
    except DoesNotExist:
        raise denied() from None
    cls = support_grants(ws.region)
    live = None
    for g in cls.query(ws.id, filter_condition=cls.support_user_id == principal.user_id, consistent_read=True):
        audit_expiry(ws.region, g)
        if status_of(g) == "active" and (live is None or g.expires_at > live.expires_at):
            live = g
    actor = audit.Actor("support", principal.user_id, principal.email)
    if live is None:
        audit.append(ws.region, ws.id, "support.access_denied", actor=actor, target={"type": "workspace", "id": ws.id},
                     details={"resource": resource, "reason": "no live grant"}, caller=caller)
        raise denied()
    audit.append(ws.region, ws.id, "support.access_used", actor=actor, target={"type": "workspace", "id": ws.id},
                 details={"grant_id": live.id, "resource": resource}, caller=caller)
    return ws, live
