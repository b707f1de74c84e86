"""Invitations: an Admin invites an e-mail address with a role; the invited person accepts after
signing in with that (verified) address and becomes a member with that role.

Stored in the workspace's region. ``status`` is pending | accepted | revoked | expired; expiry is
computed on read from ``expires_at`` (``INVITATION_TTL_SECONDS``). One pending invitation per address
and workspace is kept by a claim item (``email#<address>``) written in the same transaction; a claim
whose invitation has expired may be taken over.
"""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core import audit, clock, mail
from chalicelib.core.authz import ROLE_VALUES, Principal
from chalicelib.core.config import settings
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import F, email
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import served_regions
from chalicelib.core.store import idempotency, revocation_ledger
from chalicelib.core.store.tables import connection
from chalicelib.core.store.transact import Conflict, Refused, Tx
from chalicelib.core.tenancy import RequestScope, membership, membership_changed
from chalicelib.identity import users
from chalicelib.platform.models import (
    EMAIL_CLAIM_PREFIX,
    INVITATION_PREFIX,
    InvitationAttrs,
    invitation_claims,
    invitations,
)
from chalicelib.platform.workspaces import members
from chalicelib.platform.workspaces.service import adjust_member_count, token_exchange_hint

log = get_logger("platform.invitations")
INVITATION_TTL_SECONDS = 7 * 24 * 3600
CREATE_FIELDS = {"email": F(str, required=True, max_len=254, check=email),
                 "role": F(str, required=True, enum=ROLE_VALUES)}


def status_of(inv: InvitationAttrs) -> str:
    if inv.status == "pending" and inv.expires_at <= clock.now():
        return "expired"
    return inv.status


def to_public(inv: InvitationAttrs) -> dict[str, Any]:
    return {"id": inv.id, "workspace_id": inv.workspace_id, "email": inv.email, "role": inv.role,
            "status": status_of(inv), "expires_at": clock.iso(inv.expires_at), "created_at": inv.created_at,
            "invited_by": json.loads(inv.invited_by), "accepted_at": inv.accepted_at, "revoked_at": inv.revoked_at}


def get(scope: RequestScope, invitation_id: str) -> InvitationAttrs:
    cls = invitations(scope.home)
    if not invitation_id.startswith(INVITATION_PREFIX):
        raise not_found("invitation")
    try:
        return cls.get(scope.workspace_id, invitation_id, consistent_read=True)
    except cls.DoesNotExist:
        raise not_found("invitation") from None


def list_invitations(scope: RequestScope, limit: int, after: str | None) -> dict[str, Any]:
    cls = invitations(scope.home)
    cond = cls.id > after if after else cls.id.startswith(INVITATION_PREFIX)
    items = [i for i in cls.query(scope.workspace_id, cond, limit=limit + 1, page_size=limit + 1)
             if i.id.startswith(INVITATION_PREFIX)]
    out = paging.page(items, limit, "invitations", lambda i: i.id)
    return {"invitations": [to_public(i) for i in out.pop("_items")], **out}


def create(scope: RequestScope, body: dict[str, Any], *, actor: audit.Actor, caller: Any = None) -> dict[str, Any]:
    workspace_id, region = scope.workspace_id, scope.home
    address = users.normalise_email(body["email"])
    existing = users.find_by_email(address)
    if existing is not None and membership(workspace_id, existing.id) is not None:
        raise conflict("already_member", f"{address} is already a member of this workspace.")
    now = clock.now()
    inv = invitations(region)(workspace_id, new_id("inv"), email=address, role=body["role"], status="pending",
                              invited_by=json.dumps({"id": actor.id, "email": actor.email}),
                              created_at=clock.iso(now), expires_at=int(now) + INVITATION_TTL_SECONDS)
    claims = invitation_claims(region)
    claim = claims(workspace_id, EMAIL_CLAIM_PREFIX + address, invitation_id=inv.id, expires_at=inv.expires_at)

    def effects(tx: Tx) -> None:
        tx.save(claim, condition=claims.id.does_not_exist() | (claims.expires_at <= int(now)), tag="claim")
        tx.save(inv, condition=invitations(region).id.does_not_exist())
        idempotency.complete_in(tx, {"type": "invitation", "id": inv.id})

    try:  # the invitation, its address claim and its audit event commit together, before the e-mail
        audit.append(region, workspace_id, "invitation.created", actor=actor,
                     target={"type": "invitation", "id": inv.id, "email": address},
                     details={"role": inv.role, "expires_at": clock.iso(inv.expires_at)}, caller=caller,
                     effects=effects)
    except Refused as refused:
        if "claim" not in refused.tags:  # another item's condition (the id, the idempotency record)
            raise _unavailable() from None
        raise conflict("invitation_pending", f"A pending invitation for {address} already exists; revoke it "
                                             "or wait until it expires.") from None
    except (Conflict, audit.AuditAppendFailed):  # a conflicting transaction, throttling: nothing written
        raise _unavailable() from None
    ws = scope.entry()
    link = f"{settings().app_url}/invitations/accept?workspace_id={workspace_id}&invitation_id={inv.id}"
    mail.send(address, f"You are invited to {ws.name}",
              f"{actor.email} invited you to the workspace {ws.name} as {inv.role}.\n\n"
              f"Sign in with {address} and accept: {link}\n\n"
              f"This invitation expires at {clock.iso(inv.expires_at)}.\n", region=region, tag="invitation")
    return to_public(inv)


def _unavailable() -> ApiError:
    return ApiError(503, "unavailable", "The invitation could not be stored; nothing was written. Try again.",
                    headers={"Retry-After": "1"})


def _not_pending(inv: InvitationAttrs) -> ApiError:
    status = status_of(inv)
    return ApiError(409, "invitation_not_pending", f"The invitation is {status}.", extra={"status": status})


def revoke(scope: RequestScope, invitation_id: str, *, actor: audit.Actor, caller: Any = None) -> dict[str, Any]:
    workspace_id, region = scope.workspace_id, scope.home
    inv = get(scope, invitation_id)
    if status_of(inv) != "pending":
        raise _not_pending(inv)
    cls, claims = invitations(region), invitation_claims(region)
    now = clock.iso()
    try:
        with TransactWrite(connection=connection(region)) as tx:
            tx.update(inv, actions=[cls.status.set("revoked"), cls.revoked_at.set(now)],
                      condition=cls.status == "pending")
            tx.delete(claims(workspace_id, EMAIL_CLAIM_PREFIX + inv.email),
                      condition=claims.invitation_id == inv.id)
    except TransactWriteError:
        raise _not_pending(get(scope, invitation_id)) from None
    revocation_ledger.record(region, workspace_id, revocation_ledger.INVITATION, inv.id, now, actor.id)
    audit.append(region, workspace_id, "invitation.revoked", actor=actor,
                 target={"type": "invitation", "id": inv.id, "email": inv.email}, caller=caller)
    return to_public(get(scope, invitation_id))


def preview(scope: RequestScope, invitation_id: str, principal: Principal) -> dict[str, Any]:
    """What the invited person (``principal``, no member yet) sees before accepting: the name and
    residency of ``scope``'s workspace (the one the invitation is for), who invited them, the role and
    when the invitation ends. Only the invited address may read it (another address gets the same 404 as
    an unknown invitation), so it tells no one else anything."""
    inv = get(scope, invitation_id)
    if users.normalise_email(principal.email or "") != inv.email:
        raise not_found("invitation")
    ws = scope.entry()
    inviter = json.loads(inv.invited_by or "{}")
    return {"id": inv.id, "workspace": {"id": scope.workspace_id, "name": ws.name, "residency": ws.residency},
            "role": inv.role, "status": status_of(inv), "expires_at": clock.iso(inv.expires_at),
            "invited_by": {"email": inviter.get("email")}, "email": inv.email}


def accept(scope: RequestScope, invitation_id: str, principal: Principal, *, caller: Any = None) -> dict[str, Any]:
    """Accept an invitation to ``scope``'s workspace as the signed-in user (``principal``, no member yet).
    Another address gets the same 404 as an unknown invitation."""
    workspace_id, region = scope.workspace_id, scope.home
    inv = get(scope, invitation_id)
    user = users.get_user(principal.user_id)
    token_email = users.normalise_email(principal.email or "")
    if user is None or token_email != inv.email or user.email != inv.email:
        raise not_found("invitation")
    if not user.email_verified:
        raise ApiError(403, "email_not_verified", "Verify your e-mail address before accepting an invitation.")
    if status_of(inv) != "pending":
        raise _not_pending(inv)
    if membership(workspace_id, user.id) is not None:
        raise conflict("already_member", "You are already a member of this workspace.")
    cls, claims = invitations(region), invitation_claims(region)
    now = clock.iso()
    try:
        with TransactWrite(connection=connection(region)) as tx:
            members.add_member_tx(tx, region, workspace_id, user.id, user.email, inv.role, "invitation")
            tx.update(inv, actions=[cls.status.set("accepted"), cls.accepted_at.set(now), cls.accepted_by.set(user.id)],
                      condition=(cls.status == "pending") & (cls.expires_at > int(clock.now())))
            tx.delete(claims(workspace_id, EMAIL_CLAIM_PREFIX + inv.email), condition=claims.invitation_id == inv.id)
    except TransactWriteError:
        if membership(workspace_id, user.id) is not None:
            raise conflict("already_member", "You are already a member of this workspace.") from None
        raise _not_pending(get(scope, invitation_id)) from None
    membership_changed(user.id)
    adjust_member_count(workspace_id, 1)
    audit.append(region, workspace_id, "invitation.accepted", actor=audit.Actor("user", user.id, user.email),
                 target={"type": "invitation", "id": inv.id, "email": inv.email},
                 details={"role": inv.role, "user_id": user.id}, caller=caller)
    m = membership(workspace_id, user.id)
    assert m is not None
    return {"invitation": to_public(get(scope, invitation_id)), "membership": members.to_public(m),
            "token_exchange": token_exchange_hint(workspace_id)}


def sweep_expired(event: dict[str, Any] | None = None) -> dict[str, int]:
    """Delete pending invitations past ``expires_at`` and address claims past theirs, in every served region
    (accepted and revoked invitations stay: they are the workspace's record of who joined). Hourly."""
    now = int(clock.now())
    out: dict[str, int] = {}
    for region in served_regions():
        cls = invitations(region)
        n = 0
        for item in cls.scan(filter_condition=cls.expires_at <= now):
            if item.id.startswith("inv_") and item.status != "pending":
                continue
            try:
                cond = cls.expires_at <= now
                if item.id.startswith("inv_"):
                    cond = cond & (cls.status == "pending")
                cls(item.workspace_id, item.id).delete(condition=cond)
                n += 1
            except Exception:  # noqa: BLE001 - accepted, revoked or extended meanwhile: keep it
                continue
        out[region] = n
    if any(out.values()):
        log.info("expired invitations deleted", extra={"deleted": out})
    return out
