"""Two-person restore of a backup.

An Admin requests a restore of one of the workspace's backups; a different Admin approves it within
``RESTORE_WINDOW_SECONDS``. The requester cannot approve their own request and approvals are a set of
user ids, so one person approving twice counts once. Every Admin of the workspace is mailed when a
restore is requested, so a restore nobody else wanted does not go unseen.

Who counts (``counted_approvers``, docs/residency.md "Two-person restore"): an approval counts only while
its Admin is, live, still an Admin of the workspace who has held that role since no later than the
request (``role_since``, else ``joined_at``): an account invited or promoted after the request (a sock
puppet of the requester) can never approve, and a removed or demoted approver stops counting. Requesting
and approving need a sign-in with a second factor (the token's ``amr``, ``core.authz.mfa_used``). The
count is taken again at every approval, at queueing, and by the worker before it restores.

When ``REQUIRED_ADMINS`` approvals count the request becomes ``queued`` and a message goes to the
region's ``residency-jobs`` queue; the worker (``residency/worker.py``) takes it (``queued`` ->
``restoring``, conditional, so a redelivered message runs nothing twice) and restores: every backed-up
table (except the append-only audit trail) and every object under the workspace's prefixes is put back
as it was at the backup, then the erasure ledger is replayed (``residency/erasure.py``) so no erased user
comes back, and the revocation ledger (``residency/revocations.py``) so no revoked invitation, support
grant or API token does; the counts of what changed are reported. Every step is audited: requested,
approved, started, finished, failed, refused.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, clock, mail
from chalicelib.core.authz import Principal, Role, mfa_used
from chalicelib.core.config import settings
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, conflict, not_found
from chalicelib.core.http.validation import validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import queues, scope_versions
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.tenancy import MembershipAttrs, RequestScope, forget_scopes, memberships
from chalicelib.gateway.catalog import service as catalog
from chalicelib.residency import backups, content, erasure, revocations
from chalicelib.residency.models import (
    FAILED,
    JOBS_QUEUE,
    NOT_RESTORED,
    PENDING,
    QUEUED,
    REQUIRED_ADMINS,
    RESTORE_WINDOW_SECONDS,
    RESTORED,
    RESTORING,
    RestoreRequestAttrs,
    restore_requests,
)

log = get_logger("residency.restore")


def to_dict(req: RestoreRequestAttrs) -> dict[str, Any]:
    status = req.status
    if status == PENDING and req.expires_at <= clock.now():
        status = "expired"
    return {"id": req.id, "workspace_id": req.workspace_id, "backup_id": req.backup_id,
            "requested_by": req.requested_by, "requested_at": req.requested_at,
            "expires_at": clock.iso(req.expires_at), "approvals": sorted(req.approvals or []),
            "approvals_required": REQUIRED_ADMINS, "status": status,
            "report": json.loads(req.report) if req.report else None, "error": req.error}


def _require_second_factor(user: Principal) -> None:
    if not mfa_used(user.amr):
        raise ApiError(403, "mfa_required", "Requesting or approving a restore needs a sign-in with a second "
                       "factor (an authenticator app, a security key or a passkey); sign in again with one.")


def _admin_since(m: MembershipAttrs) -> str:
    return m.role_since or m.joined_at


def counted_approvers(region: str, req: RestoreRequestAttrs) -> set[str]:
    """The approvals that count now: each approver, read live, is an Admin of the workspace and has been
    one since no later than the request was made."""
    admins = {m.user_id: m for m in memberships(region).query(req.workspace_id, consistent_read=True)
              if m.role == Role.ADMIN.value}
    return {uid for uid in (req.approvals or set())
            if uid in admins and _admin_since(admins[uid]) <= req.requested_at}


def _notify_admins(region: str, req: RestoreRequestAttrs, user: Principal) -> None:
    """Mail every Admin of the workspace (the requester included) that a restore was requested."""
    link = f"{settings().app_url}/settings"
    for m in memberships(region).query(req.workspace_id, consistent_read=True):
        if m.role != Role.ADMIN.value:
            continue
        mail.send(m.email, "A restore of your workspace was requested",
                  f"{user.email} asked to restore the workspace {req.workspace_id} to its backup {req.backup_id} "
                  f"(request {req.id}). Nothing changes until another Admin approves it, before "
                  f"{clock.iso(req.expires_at)}. If you did not expect this, review the request and the "
                  f"workspace's Admins now: {link}", region=region, tag="restore-requested")


def request(scope: RequestScope, backup_id: str, body: Any, caller: audit.CallerLike) -> dict[str, Any]:
    """Record a restore request by the scope's principal (an Admin, signed in with a second factor) for one
    of the workspace's backups, and mail every Admin about it."""
    validate(body, {})
    user = scope.principal
    _require_second_factor(user)
    ws, region = scope.workspace_id, scope.home
    backups.manifest(region, ws, backup_id)  # 404 unless it is this workspace's backup
    now = clock.now()
    req = restore_requests(region)(ws, new_id("rst"), backup_id=backup_id, requested_by=user.user_id,
                                   requested_at=clock.iso(now), expires_at=int(now + RESTORE_WINDOW_SECONDS),
                                   approvals={user.user_id}, status=PENDING)
    req.save()
    audit.append(region, ws, "backup.restore_requested", actor=audit.Actor.of(user), caller=caller,
                 target={"type": "restore_request", "id": req.id}, details={"backup_id": backup_id})
    _notify_admins(region, req, user)
    return to_dict(req)


def _get(region: str, workspace_id: str, backup_id: str, request_id: str) -> RestoreRequestAttrs:
    if not is_id(request_id, "rst"):
        raise not_found("restore request")
    try:
        req = restore_requests(region).get(workspace_id, request_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("restore request") from None
    if req.backup_id != backup_id:
        raise not_found("restore request")
    return req


def get(scope: RequestScope, backup_id: str, request_id: str) -> dict[str, Any]:
    return to_dict(_get(scope.home, scope.workspace_id, backup_id, request_id))


def list_requests(scope: RequestScope, backup_id: str, query: dict[str, str]) -> dict[str, Any]:
    paging.check_params(query, ("limit", "after"))
    lim = paging.limit(query)
    after = paging.decode("restore_requests", query.get("after"))
    ws, region = scope.workspace_id, scope.home
    backups.manifest(region, ws, backup_id)
    cls = restore_requests(region)
    cond = cls.id > after if after else None
    rows = [r for r in cls.query(ws, range_key_condition=cond, consistent_read=True) if r.backup_id == backup_id]
    paged = paging.page(rows[: lim + 1], lim, "restore_requests", lambda r: r.id)
    return {"restore_requests": [to_dict(r) for r in paged.pop("_items")], **paged}


def approve(scope: RequestScope, backup_id: str, request_id: str, body: Any,
            caller: audit.CallerLike) -> dict[str, Any]:
    """Add the approval of the scope's principal; when enough distinct Admins agree, queue the restore
    (``status: queued``)."""
    validate(body, {})
    user, ws, region = scope.principal, scope.workspace_id, scope.home
    req = _get(region, ws, backup_id, request_id)
    _require_second_factor(user)
    if user.user_id == req.requested_by:
        raise ApiError(403, "own_restore_request", "The Admin who requested a restore cannot approve it; "
                       "another Admin of the workspace must.")
    if req.status != PENDING:
        raise conflict("restore_request_not_pending", f"The restore request is {req.status}.")
    if req.expires_at <= clock.now():
        raise conflict("restore_request_expired", "The restore request's approval window has passed; "
                       "request the restore again.")
    if user.membership is None or _admin_since(user.membership) > req.requested_at:
        raise ApiError(403, "approver_not_admin_before_request", "Only an Admin who was already an Admin when "
                       "the restore was requested may approve it.")
    cls = restore_requests(region)
    if user.user_id not in (req.approvals or set()):
        try:
            req.update(actions=[cls.approvals.add({user.user_id})],
                       condition=(cls.status == PENDING) & (cls.expires_at > int(clock.now())))
        except UpdateError as err:
            if condition_failed(err):
                raise conflict("restore_request_not_pending", "The restore request changed meanwhile.") from None
            raise
        audit.append(region, ws, "backup.restore_approved", actor=audit.Actor.of(user), caller=caller,
                     target={"type": "restore_request", "id": req.id}, details={"backup_id": backup_id})
    req.refresh(consistent_read=True)
    if len(counted_approvers(region, req)) < REQUIRED_ADMINS:  # live, at queueing
        return to_dict(req)
    try:  # one approver wins the queueing
        req.update(actions=[cls.status.set(QUEUED)], condition=cls.status == PENDING)
    except UpdateError as err:
        if condition_failed(err):
            raise conflict("restore_request_not_pending", "The restore has already been queued.") from None
        raise
    queues.enqueue(JOBS_QUEUE, region, {"kind": "restore", "workspace_id": ws, "request_id": req.id,
                                        "approved_by": user.user_id})
    return to_dict(req)


def run_queued(region: str, workspace_id: str, request_id: str) -> dict[str, Any]:
    """The worker's part: take a ``queued`` request (once), restore, replay the erasure ledger, audit."""
    cls = restore_requests(region)
    try:
        req = cls.get(workspace_id, request_id, consistent_read=True)
    except DoesNotExist:
        log.error("queued restore request not found", extra={"workspace_id": workspace_id, "request": request_id})
        return {"status": "missing"}
    try:
        req.update(actions=[cls.status.set(RESTORING)], condition=cls.status == QUEUED)
    except UpdateError as err:
        if condition_failed(err):  # redelivered: already taken by an earlier delivery
            return {"status": req.status}
        raise
    return _run(region, req)


def _run(region: str, req: RestoreRequestAttrs) -> dict[str, Any]:
    ws, target = req.workspace_id, {"type": "restore_request", "id": req.id}
    cls = restore_requests(region)
    counted = counted_approvers(region, req)
    if len(counted) < REQUIRED_ADMINS:  # an approver was removed or demoted after the queueing
        req.update(actions=[cls.status.set(FAILED), cls.error.set("approvals_no_longer_valid")])
        audit.append(region, ws, "backup.restore_refused", actor=audit.SYSTEM, target=target,
                     details={"backup_id": req.backup_id, "approvals": sorted(req.approvals),
                              "counted": sorted(counted)})
        return to_dict(req)
    audit.append(region, ws, "backup.restore_started", actor=audit.SYSTEM, target=target,
                 details={"backup_id": req.backup_id, "approvals": sorted(req.approvals)})
    try:
        report = apply(region, backups.manifest(region, ws, req.backup_id))
        report["erasures_replayed"] = erasure.replay(region, ws)
        report["revocations_replayed"] = revocations.replay(region, ws)
        catalog.changed(region, ws, everything=True)  # cached catalogs in every container reload in full
    except Exception as exc:  # noqa: BLE001 - recorded and audited as the request's outcome
        log.exception("restore failed", extra={"workspace_id": ws, "request": req.id})
        req.update(actions=[cls.status.set(FAILED), cls.error.set(type(exc).__name__)])
        audit.append(region, ws, "backup.restore_failed", actor=audit.SYSTEM, target=target,
                     details={"backup_id": req.backup_id, "error": type(exc).__name__})
        return to_dict(req)
    req.update(actions=[cls.status.set(RESTORED), cls.report.set(json.dumps(report, sort_keys=True))])
    audit.append(region, ws, "backup.restore_finished", actor=audit.SYSTEM, target=target,
                 details={"backup_id": req.backup_id, "changes": report})
    return to_dict(req)


def apply(region: str, found: dict[str, Any]) -> dict[str, Any]:
    """Put the workspace's content back as it was in the backup ``found``; returns counts per table and
    bucket: added, updated, removed, unchanged."""
    ws = found["workspace_id"]
    saved = backups.read(region, found)
    report: dict[str, Any] = {"tables": {}, "buckets": {}}
    for table in content.backed_up_tables():
        if table.name in NOT_RESTORED:
            continue
        counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0}

        def k(item: dict[str, Any], table: Any = table) -> str:
            return content.canonical(content.key_of(table, item))

        current = {k(i): i for i in content.items(region, table, ws)}
        wanted = {k(i): i for i in saved.items.get(table.name, [])}
        for key, item in wanted.items():
            now_item = current.get(key)
            if now_item is not None and content.canonical(now_item) == content.canonical(item):
                counts["unchanged"] += 1
                continue
            content.put_item(region, table, item)
            counts["added" if now_item is None else "updated"] += 1
        for key, item in current.items():
            if key not in wanted:
                content.delete_item(region, table, item)
                counts["removed"] += 1
        report["tables"][table.name] = counts
    forget_scopes()  # restored memberships apply in this container from its next request, in others too:
    scope_versions.bump(ws, *scope_versions.PIECES[:-1])  # the workspace's pieces were restored
    wanted_objects = {(o["bucket"], o["key"]): o for o in saved.objects}
    for bucket, prefix in content.prefixes(ws).items():
        counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0}
        present = set(content.object_keys(region, bucket, prefix))
        for (b, key), obj in wanted_objects.items():
            if b != bucket:
                continue
            if key in present:
                if hashlib.sha256(content.get_object(region, bucket, key)["body"]).hexdigest() == obj["sha256"]:
                    counts["unchanged"] += 1
                    continue
                counts["updated"] += 1
            else:
                counts["added"] += 1
            content.put_object(region, bucket, key, obj["body"], obj["content_type"])
        for key in present:
            if (bucket, key) not in wanted_objects:
                content.delete_object(region, bucket, key)
                counts["removed"] += 1
        report["buckets"][bucket] = counts
    return report
