"""Data-subject access requests: export everything stored about a user, or erase the user.

Who may ask: a user about their own account (``scope: account``: every workspace they belong to, in every
region, and the global directory), or an Admin about a member of their workspace (``scope: workspace``:
that workspace only; for an erasure the global identity entry goes too once the user belongs to no
workspace any more). The request is recorded in the workspace's region (``access_requests``), audited
(``access_request.created``), and queued on the region's ``residency-jobs`` queue; the worker
(``residency/worker.py`` -> ``run``) does the work and audits ``access_request.completed`` or
``access_request.failed``. Every region runs the same code with the same deadline,
``ACCESS_DEADLINE_SECONDS``.

Exports are zip archives of JSON-lines files, one per region, each written to that region's
``access-exports`` bucket (the part of a region never leaves it). Private content is delivered only to its
subject: the user's own export also holds their chats, private presets, agent runs and agent memory, and, in the request's
region, ``global.jsonl`` (the directory entry, sessions, API token records, passkeys; never password
hashes, TOTP secrets or recovery-code hashes); an Admin's export about a member holds neither (a
``withheld`` record names what was left out). Other people appear as pseudonyms
(``residency/pseudonymised.py``). ``get`` answers presigned download links valid ``EXPORT_LINK_SECONDS``
to the one person the export is for.
"""
from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, aws, clock
from chalicelib.core.authz import Principal, Role
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, forbidden, not_found
from chalicelib.core.http.validation import F, validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store import queues
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.tenancy import RequestScope, acting_member, memberships, workspaces_of
from chalicelib.residency import erasure, pseudonymised
from chalicelib.residency.models import (
    ACCESS_DEADLINE_SECONDS,
    ACCESS_KINDS,
    DONE,
    ERASE,
    EXPORT,
    EXPORT_BUCKET,
    EXPORT_LINK_SECONDS,
    FAILED,
    JOBS_QUEUE,
    QUEUED,
    RUNNING,
    AccessRequestAttrs,
    access_requests,
)

log = get_logger("residency.access_requests")
ACCOUNT, WORKSPACE = "account", "workspace"
# attributes never exported: credential secrets and hashes (the export names that they exist)
SECRET_ATTRS = frozenset({"password_hash", "totp_secret_enc", "secret_hash", "codes", "hashes", "pending_secret_enc",
                          "sid_hash", "public_key"})
_des = TypeDeserializer()
# content private to its author (``GET /v1/chats/{id}`` answers 404 to anyone else, Admins included): only
# the subject's own export holds it; an Admin's export about a member withholds it (docs/residency.md)
PRIVATE_TABLES = ("chats", "presets", "agent_runs", "agent_memory")  # presets: the private ones, in the chats table
WITHHELD_REASON = ("Private to the member: only an export the member requests about their own account "
                   "holds it.")
NO_LONGER_READABLE = ("Written by the member's agent runs after reading what the member may no longer read "
                      "(labels: docs/security.md).")
# How each private table's item reads to its author now (the contexts that own them; the composition root
# passes them in): chats redacted where a source is no longer readable, runs and memory withheld where their
# labels are no longer satisfied. A view returns None for an item withheld whole.
PrivateView = Callable[[Principal, dict[str, Any]], "dict[str, Any] | None"]
PrivateViews = Mapping[str, PrivateView]


def to_dict(req: AccessRequestAttrs, *, links: bool = False) -> dict[str, Any]:
    result = json.loads(req.result) if req.result else None
    out: dict[str, Any] = {
        "id": req.id, "workspace_id": req.workspace_id, "kind": req.kind, "user_id": req.subject,
        "scope": req.scope, "requested_by": req.requested_by, "requested_at": req.requested_at,
        "due_at": req.due_at, "status": req.status, "completed_at": req.completed_at, "error": req.error}
    if req.kind == EXPORT:
        out["downloads"] = [{"region": p["region"], "files": p["files"],
                             "url": _link(p["region"], p["key"]) if links else None}
                            for p in (result or {}).get("parts", [])] if result else []
    else:
        out["erased"] = result
    return out


def _link(region: str, key: str) -> str:
    return str(aws.client("s3", region).generate_presigned_url(
        "get_object", Params={"Bucket": aws.bucket_name(EXPORT_BUCKET, region), "Key": key},
        ExpiresIn=EXPORT_LINK_SECONDS))


def _is_admin(user: Principal) -> bool:
    return Role.ADMIN.value in user.roles


def create(scope: RequestScope, body: Any, caller: audit.CallerLike) -> dict[str, Any]:
    """Record and queue an export or erasure about ``user_id`` (the caller themself, or, for an Admin,
    a member of the caller's workspace)."""
    data = validate(body, {"kind": F(str, required=True, enum=ACCESS_KINDS), "user_id": F(str, required=True)})
    user, ws, region = scope.principal, scope.workspace_id, scope.home
    subject = data["user_id"]
    own = subject == user.user_id
    if not own and not _is_admin(user):
        raise forbidden("Only an Admin may make an access request about another member.")
    if not is_id(subject, "usr"):
        raise not_found("member")
    try:
        memberships(region).get(ws, subject, consistent_read=True)
    except DoesNotExist:
        raise not_found("member") from None
    reach = ACCOUNT if own else WORKSPACE  # what the request covers (its ``scope`` field)
    if data["kind"] == ERASE:
        _refuse_last_admin(subject, ws if reach == WORKSPACE else None)
    now = clock.now()
    req = access_requests(region)(ws, new_id("dsr"), kind=data["kind"], subject=subject, scope=reach,
                                  requested_by=user.user_id, requested_at=clock.iso(now),
                                  due_at=clock.iso(now + ACCESS_DEADLINE_SECONDS), status=QUEUED)
    req.save()
    audit.append(region, ws, "access_request.created", actor=audit.Actor.of(user),
                 caller=caller, target={"type": "access_request", "id": req.id},
                 details={"kind": req.kind, "user_id": subject, "scope": reach, "due_at": req.due_at})
    queues.enqueue(JOBS_QUEUE, region, {"kind": "access_request", "workspace_id": ws, "request_id": req.id})
    return to_dict(req)


def _refuse_last_admin(subject: str, only: str | None) -> None:
    """409 when erasing ``subject`` would leave a workspace without an Admin."""
    for m in workspaces_of(subject):
        if m["role"] != Role.ADMIN.value or (only and m["workspace_id"] != only):
            continue
        admins = [x for x in memberships(m["region"]).query(m["workspace_id"], consistent_read=True)
                  if x.role == Role.ADMIN.value and x.user_id != subject]
        if not admins:
            raise ApiError(409, "last_admin", "The user is the only Admin of a workspace; make another member "
                           "Admin first, so the workspace keeps one.")


def get(scope: RequestScope, request_id: str) -> dict[str, Any]:
    """One request. A user's own export (account-wide) is visible to its subject only: to everyone else,
    Admins included, it does not exist (404), whatever its id. Any other request (a workspace export, an
    erasure: its result is counts) is visible to the workspace's Admins and to its requester and subject;
    only the Admin who made a workspace export gets its download links, and only while still an Admin
    (the scope's principal carries the live role)."""
    user, ws = scope.principal, scope.workspace_id
    if not is_id(request_id, "dsr"):
        raise not_found("access request")
    try:
        req = access_requests(scope.home).get(ws, request_id, consistent_read=True)
    except DoesNotExist:
        raise not_found("access request") from None
    if not visible_to(user, req):
        raise not_found("access request")
    return to_dict(req, links=req.status == DONE and may_download(user, req))


def visible_to(user: Principal, req: AccessRequestAttrs) -> bool:
    if req.scope == ACCOUNT and req.kind == EXPORT:
        return user.user_id == req.subject
    return _is_admin(user) or user.user_id in (req.requested_by, req.subject)


def may_download(user: Principal, req: AccessRequestAttrs) -> bool:
    """Who receives an export: its subject for an account-wide one; the requesting Admin, still an Admin,
    for a workspace one (which holds no private content, see ``PRIVATE_TABLES``)."""
    if req.scope == ACCOUNT:
        return user.user_id == req.subject == req.requested_by
    return user.user_id == req.requested_by and _is_admin(user)


# --- the worker's part -------------------------------------------------------------------------------

def run(region: str, workspace_id: str, request_id: str, views: PrivateViews) -> dict[str, Any]:
    """Take a queued request once (``queued`` -> ``running``), do it, record and audit the outcome."""
    cls = access_requests(region)
    try:
        req = cls.get(workspace_id, request_id, consistent_read=True)
        req.update(actions=[cls.status.set(RUNNING)], condition=cls.status == QUEUED)
    except DoesNotExist:
        log.error("queued access request not found", extra={"workspace_id": workspace_id, "request": request_id})
        return {"status": "missing"}
    except UpdateError as err:
        if condition_failed(err):  # a redelivered message
            return {"status": "taken"}
        raise
    target = {"type": "access_request", "id": req.id}
    try:
        result = _export(region, req, views) if req.kind == EXPORT else _erase(region, req)
    except Exception as exc:  # noqa: BLE001 - recorded and audited as the request's outcome
        log.exception("access request failed", extra={"workspace_id": workspace_id, "request": req.id})
        req.update(actions=[cls.status.set(FAILED), cls.error.set(type(exc).__name__)])
        audit.append(region, workspace_id, "access_request.failed", actor=audit.SYSTEM, target=target,
                     details={"kind": req.kind, "user_id": req.subject, "error": type(exc).__name__})
        return {"status": FAILED}
    req.update(actions=[cls.status.set(DONE), cls.completed_at.set(clock.iso()),
                        cls.result.set(json.dumps(result, sort_keys=True))])
    summary = {"parts": [{"region": p["region"], "files": p["files"]} for p in result["parts"]]} \
        if req.kind == EXPORT else result
    audit.append(region, workspace_id, "access_request.completed", actor=audit.SYSTEM, target=target,
                 details={"kind": req.kind, "user_id": req.subject, "result": summary})
    return {"status": DONE}


def _scope_workspaces(req: AccessRequestAttrs, region: str) -> list[dict[str, Any]]:
    """[{workspace_id, region}] the request covers."""
    if req.scope == WORKSPACE:
        return [{"workspace_id": req.workspace_id, "region": region}]
    found = workspaces_of(req.subject)
    if not any(m["workspace_id"] == req.workspace_id for m in found):
        found.append({"workspace_id": req.workspace_id, "region": region})
    return found


# --- export ------------------------------------------------------------------------------------------

def _plain(item: dict[str, Any]) -> dict[str, Any]:
    out = {k: _des.deserialize(v) for k, v in item.items() if k not in SECRET_ATTRS}
    for k in SECRET_ATTRS & item.keys():
        out[k] = "(exists; not exported)"
    return json.loads(json.dumps(out, default=lambda v: int(v) if v == int(v) else float(v)))


def _global_records(user_id: str) -> Iterator[dict[str, Any]]:
    region = settings().global_region
    ddb = aws.client("dynamodb", region)
    user = ddb.get_item(TableName=aws.table_name("users"), Key={"id": {"S": user_id}}, ConsistentRead=True).get("Item")
    if user:
        yield {"table": "users", "item": _plain(user)}
    for table, index in (("sessions", "by_user"), ("api_tokens", "by_user"), ("webauthn_credentials", None),
                         ("oauth_consents", None)):
        extra = {"IndexName": index} if index else {}
        for item in erasure._query(region, table, "user_id", user_id, **extra):
            yield {"table": table, "item": _plain(item)}
    for kind in ("totp", "rc", "lock"):
        item = ddb.get_item(TableName=aws.table_name("auth_state"), Key={"pk": {"S": f"{kind}#{user_id}"}}).get("Item")
        if item:
            yield {"table": "auth_state", "item": _plain(item)}


def _private_items(region: str, workspace_id: str, user_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(table, item) of the content private to the user in one workspace (``PRIVATE_TABLES``)."""
    for chat in erasure._query(region, "chats", "workspace_id", workspace_id):
        if erasure._s(chat, "user_id") == user_id:  # a chat, or a private preset (kept beside chats: pre_...)
            yield ("presets" if erasure._s(chat, "id").startswith("pre_") else "chats"), chat
    for run in erasure._query(region, "agent_runs", "workspace_id", workspace_id):
        if erasure._s(run, "user_id") == user_id:
            yield "agent_runs", run
    for item in erasure._scan(region, "agent_memory", FilterExpression="begins_with(#s, :p)",
                              ExpressionAttributeNames={"#s": "scope"},
                              ExpressionAttributeValues={":p": {"S": workspace_id + "#"}}):
        if erasure._s(item, "scope").rsplit("#", 1)[-1] == user_id:
            yield "agent_memory", item


def _workspace_records(region: str, workspace_id: str, user_id: str, email: str, *,
                       views: PrivateViews | None, request_id: str) -> Iterator[dict[str, Any]]:
    """The subject's records in one workspace. ``views`` (the subject's own export only) adds the content
    private to the subject (``PRIVATE_TABLES``) as the subject may read it now; otherwise one ``withheld``
    record names what was left out."""
    m = aws.client("dynamodb", region).get_item(TableName=aws.table_name("memberships"), ConsistentRead=True,
                                                Key={"workspace_id": {"S": workspace_id}, "user_id": {"S": user_id}})
    if m.get("Item"):
        yield {"table": "memberships", "item": _plain(m["Item"])}
    reader = acting_member(workspace_id, user_id, email=email, amr="access_request", token_id=request_id) \
        if views is not None else None
    if views is not None and reader is not None:
        withheld: dict[str, int] = {}
        for table, item in _private_items(region, workspace_id, user_id):
            shown = views[table](reader, _plain(item))
            if shown is None:
                withheld[table] = withheld.get(table, 0) + 1
            else:
                yield {"table": table, "item": shown}
        if withheld:
            yield {"table": "withheld", "item": {"tables": sorted(withheld), "counts": withheld,
                                                 "reason": NO_LONGER_READABLE}}
    else:
        yield {"table": "withheld", "item": {"tables": list(PRIVATE_TABLES), "reason": WITHHELD_REASON}}
    for inv in erasure._query(region, "invitations", "workspace_id", workspace_id):
        if email and erasure._s(inv, "email").lower() == email:
            yield {"table": "invitations", "item": pseudonymised.invitation(_plain(inv), user_id)}
    for event in audit.iter_chain(region, workspace_id):
        if event["actor"].get("id") == user_id or event["target"].get("id") == user_id:
            yield {"table": "audit_events", "item": pseudonymised.audit_event(event, user_id, email)}


def _zip(files: dict[str, list[dict[str, Any]]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, rows in sorted(files.items()):
            z.writestr(name, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))
    return buf.getvalue()


def _export(region: str, req: AccessRequestAttrs, views: PrivateViews) -> dict[str, Any]:
    user = aws.client("dynamodb", settings().global_region).get_item(
        TableName=aws.table_name("users"), Key={"id": {"S": req.subject}}, ConsistentRead=True).get("Item") or {}
    email = erasure._s(user, "email").lower()
    own = req.scope == ACCOUNT and req.requested_by == req.subject
    # the global store's records (sessions, API tokens of every workspace, sign-in state) are account-wide:
    # only the subject's own export holds them, never a workspace's
    by_region: dict[str, dict[str, list[dict[str, Any]]]] = \
        {region: {"global.jsonl": list(_global_records(req.subject))}} if own else {}
    for m in _scope_workspaces(req, region):
        files = by_region.setdefault(m["region"], {})
        files[f"{m['region']}/{m['workspace_id']}.jsonl"] = list(
            _workspace_records(m["region"], m["workspace_id"], req.subject, email, views=views if own else None,
                               request_id=req.id))
    parts = []
    for part_region, files in sorted(by_region.items()):
        key = f"exports/{req.workspace_id}/{req.id}/{part_region}.zip"
        aws.client("s3", part_region).put_object(
            Bucket=aws.bucket_name(EXPORT_BUCKET, part_region), Key=key, Body=_zip(files),
            ContentType="application/zip", ServerSideEncryption="aws:kms", SSEKMSKeyId=aws.key_alias("data"))
        parts.append({"region": part_region, "key": key, "files": sorted(files)})
    return {"parts": parts}


# --- erasure -----------------------------------------------------------------------------------------

def _erase(region: str, req: AccessRequestAttrs) -> dict[str, Any]:
    user = aws.client("dynamodb", settings().global_region).get_item(
        TableName=aws.table_name("users"), Key={"id": {"S": req.subject}}, ConsistentRead=True).get("Item") or {}
    email = erasure._s(user, "email") or None
    out: dict[str, Any] = {"workspaces": {}}
    for m in _scope_workspaces(req, region):
        ws_region, ws = m["region"], m["workspace_id"]
        mac = erasure.email_mac(ws_region, email or "")
        erasure.record(ws_region, ws, req.subject, mac, req.id)  # the ledger first: a crash is replayed
        counts = erasure.erase_in_workspace(ws_region, ws, req.subject, mac, email)
        audit.append(ws_region, ws, "user.erased", actor=audit.SYSTEM, target={"type": "user", "id": req.subject},
                     details={"request_id": req.id, "counts": counts})
        out["workspaces"][ws] = counts
    if req.scope == ACCOUNT or not workspaces_of(req.subject):
        mac = erasure.email_mac(settings().global_region, email or "")
        erasure.record_identity(req.subject, mac, req.id)
        out["identity"] = erasure.erase_identity(req.subject, email, mac)
    return out
