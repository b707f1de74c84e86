"""Backups of one workspace's regional content into the region's ``backups`` bucket.

Layout: ``workspaces/<ws>/<bkp>/manifest.json`` (clear: counts, sizes, SHA-256 of every part before and
after sealing, the wrapped data key), ``items.enc`` (gzip JSON lines: one per table item, then one per
object with its part name) and ``objects/<n>.enc`` (each object's bytes). Parts are sealed by
``sealing.py``. Kept ``BACKUP_RETENTION_DAYS``: the bucket lifecycle expires them in AWS, and ``sweep``
deletes them because the emulator applies no lifecycle.

Backups run in the region's ``residency-jobs`` worker, one queued job per workspace: ``request`` (an
Admin's ``POST /v1/backups``, answered 202) and ``backup_all`` (the daily schedule, which only fans out)
write the job's ``status.json`` beside where the manifest will be and queue it; ``run_job`` takes it
(``running``), writes the backup under the job's id and marks it ``completed``. A failing job is
``retrying`` and raised, so SQS delivers it again after the visibility timeout; its last allowed
attempt is ``failed`` (the message then goes to the dead-letter queue). One workspace's failure never
touches another's job, and no backup is bounded by the time of one request or one invocation.
"""
from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import audit, aws, clock
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import served_regions
from chalicelib.core.store import queues
from chalicelib.core.tenancy import workspaces
from chalicelib.residency import content, sealing
from chalicelib.residency.models import BACKUP_BUCKET, BACKUP_RETENTION_DAYS, BACKUP_ROOT, JOBS_QUEUE

log = get_logger("residency.backups")
RETENTION_SECONDS = BACKUP_RETENTION_DAYS * 24 * 3600
FORMAT = 1
QUEUED, RUNNING, RETRYING, COMPLETED, FAILED = "queued", "running", "retrying", "completed", "failed"
STATUS = "status.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _prefix(workspace_id: str, backup_id: str) -> str:
    return f"{BACKUP_ROOT}{workspace_id}/{backup_id}/"


def _s3(region: str) -> Any:
    return aws.client("s3", region)


def _put(region: str, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
    _s3(region).put_object(Bucket=aws.bucket_name(BACKUP_BUCKET, region), Key=key, Body=body,
                           ContentType=content_type, ServerSideEncryption="aws:kms",
                           SSEKMSKeyId=aws.key_alias(BACKUP_BUCKET))


def _get(region: str, key: str) -> bytes:
    return _s3(region).get_object(Bucket=aws.bucket_name(BACKUP_BUCKET, region), Key=key)["Body"].read()


def create(region: str, workspace_id: str, *, actor: audit.Actor = audit.SYSTEM,
           caller: audit.CallerLike | None = None, backup_id: str | None = None) -> dict[str, Any]:
    """Back up every regional item and object of the workspace (under ``backup_id``, a queued job's, or
    a new id); returns the manifest."""
    backup_id = backup_id or new_id("bkp")
    prefix = _prefix(workspace_id, backup_id)
    key, wrapped = sealing.new_key(region, workspace_id, backup_id)
    lines: list[bytes] = []
    tables: dict[str, int] = {}
    for table in content.backed_up_tables():
        n = 0
        for item in content.items(region, table, workspace_id):
            lines.append(json.dumps({"table": table.name, "item": content.encode_item(item)},
                                    sort_keys=True, separators=(",", ":")).encode())
            n += 1
        tables[table.name] = n
    parts: dict[str, dict[str, Any]] = {}
    buckets: dict[str, dict[str, int]] = {}
    for bucket, bucket_prefix in content.prefixes(workspace_id).items():
        count = size = 0
        for obj_key in content.object_keys(region, bucket, bucket_prefix):
            obj = content.get_object(region, bucket, obj_key)
            part = f"objects/{len(parts) + 1:06d}.enc"
            sealed = sealing.seal(key, part, obj["body"])
            _put(region, prefix + part, sealed)
            parts[part] = {"sha256": _sha(obj["body"]), "sealed_sha256": _sha(sealed), "bytes": len(obj["body"])}
            lines.append(json.dumps({"bucket": bucket, "key": obj_key, "part": part, "content_type": obj["content_type"],
                                     "sha256": _sha(obj["body"])}, sort_keys=True, separators=(",", ":")).encode())
            count += 1
            size += len(obj["body"])
        buckets[bucket] = {"objects": count, "bytes": size}
    archive = gzip.compress(b"\n".join(lines), mtime=0)
    sealed_items = sealing.seal(key, "items.enc", archive)
    _put(region, prefix + "items.enc", sealed_items)
    parts["items.enc"] = {"sha256": _sha(archive), "sealed_sha256": _sha(sealed_items), "bytes": len(archive)}
    now = clock.now()
    manifest = {"format": FORMAT, "id": backup_id, "workspace_id": workspace_id, "region": region,
                "created_at": clock.iso(now), "created_epoch": now,
                "expires_at": clock.iso(now + RETENTION_SECONDS), "key": aws.key_alias(BACKUP_BUCKET),
                "wrapped_key": wrapped, "tables": tables, "buckets": buckets, "parts": parts,
                "item_count": sum(tables.values()), "object_count": sum(b["objects"] for b in buckets.values())}
    _put(region, prefix + "manifest.json", json.dumps(manifest, indent=1, sort_keys=True).encode(), "application/json")
    audit.append(region, workspace_id, "backup.created", actor=actor, caller=caller,
                 target={"type": "backup", "id": backup_id},
                 details={"items": manifest["item_count"], "objects": manifest["object_count"]})
    return manifest


def manifest(region: str, workspace_id: str, backup_id: str) -> dict[str, Any]:
    """The manifest of one of the workspace's backups; 404 for a malformed id or another workspace's."""
    if not is_id(backup_id, "bkp"):
        raise not_found("backup")
    try:
        found = json.loads(_get(region, _prefix(workspace_id, backup_id) + "manifest.json"))
    except ClientError:
        raise not_found("backup") from None
    if found.get("workspace_id") != workspace_id or found.get("id") != backup_id:
        raise not_found("backup")
    return found


def _status(region: str, workspace_id: str, backup_id: str) -> dict[str, Any] | None:
    try:
        found = json.loads(_get(region, _prefix(workspace_id, backup_id) + STATUS))
    except ClientError:
        return None
    return found if found.get("workspace_id") == workspace_id and found.get("id") == backup_id else None


def _put_status(region: str, status: dict[str, Any]) -> None:
    _put(region, _prefix(status["workspace_id"], status["id"]) + STATUS,
         json.dumps(status, indent=1, sort_keys=True).encode(), "application/json")


def describe(region: str, workspace_id: str, backup_id: str) -> dict[str, Any]:
    """A backup as the API shows it: the manifest's summary once written (``completed``), otherwise its
    job's status (``queued``, ``running``, ``retrying``, ``failed``); 404 for neither, a malformed id or
    another workspace's."""
    if not is_id(backup_id, "bkp"):
        raise not_found("backup")
    job = _status(region, workspace_id, backup_id)
    try:
        return {**summary(manifest(region, workspace_id, backup_id)), **_job_fields(job), "status": COMPLETED}
    except ApiError:
        if job is None:
            raise
    return {k: job[k] for k in ("id", "workspace_id", "region", "status", "requested_at", "attempts", "trigger")
            } | ({"error": job["error"]} if job.get("error") else {})


def _job_fields(job: dict[str, Any] | None) -> dict[str, Any]:
    return {k: job[k] for k in ("requested_at", "attempts", "trigger") if k in job} if job else {}


def request(region: str, workspace_id: str, *, actor: audit.Actor = audit.SYSTEM,
            caller: audit.CallerLike | None = None, trigger: str = "api") -> dict[str, Any]:
    """Queue a backup of the workspace (the worker runs it: ``run_job``); returns its ``queued`` status.
    When the queue refuses the job, the job is marked ``failed`` and 503 ``backup_not_queued`` raised."""
    backup_id = new_id("bkp")
    now = clock.now()
    job = {"id": backup_id, "workspace_id": workspace_id, "region": region, "status": QUEUED, "trigger": trigger,
           "requested_at": clock.iso(now), "requested_epoch": now, "requested_by": actor.as_dict(), "attempts": 0}
    _put_status(region, job)
    if trigger == "api":
        audit.append(region, workspace_id, "backup.requested", actor=actor, caller=caller,
                     target={"type": "backup", "id": backup_id})
    try:
        queues.enqueue(JOBS_QUEUE, region, {"kind": "backup", "workspace_id": workspace_id, "backup_id": backup_id,
                                            "actor": actor.as_dict()})
    except Exception as exc:
        log.exception("backup job not queued", extra={"workspace_id": workspace_id, "backup": backup_id})
        _put_status(region, {**job, "status": FAILED, "error": type(exc).__name__})
        raise ApiError(503, "backup_not_queued", "The backup could not be queued; try again.") from exc
    return describe(region, workspace_id, backup_id)


def run_job(region: str, workspace_id: str, backup_id: str, actor: dict[str, Any], *, attempt: int,
            last_attempt: bool) -> dict[str, Any]:
    """The worker's part of a queued backup: run it once (a redelivery after it completed does nothing).
    A failure is recorded on the job (``retrying``, or ``failed`` on ``last_attempt``) and raised, so the
    queue delivers the job again, then dead-letters it."""
    job = _status(region, workspace_id, backup_id)
    if job is None:
        log.error("queued backup has no job", extra={"workspace_id": workspace_id, "backup": backup_id})
        return {"status": "missing"}
    if job["status"] == COMPLETED:
        return describe(region, workspace_id, backup_id)
    _put_status(region, {**job, "status": RUNNING, "attempts": attempt, "error": None})
    try:
        made = create(region, workspace_id, backup_id=backup_id,
                      actor=audit.Actor(str(actor.get("type", "system")), str(actor.get("id", "system")),
                                        str(actor.get("email", ""))))
    except Exception as exc:
        state = FAILED if last_attempt else RETRYING
        _put_status(region, {**job, "status": state, "attempts": attempt, "error": type(exc).__name__})
        log.exception("backup failed", extra={"workspace_id": workspace_id, "backup": backup_id,
                                              "attempt": attempt, "status": state})
        if last_attempt:
            audit.append(region, workspace_id, "backup.failed", actor=audit.SYSTEM,
                         target={"type": "backup", "id": backup_id},
                         details={"attempts": attempt, "error": type(exc).__name__})
        raise
    _put_status(region, {**job, "status": COMPLETED, "attempts": attempt, "error": None,
                         "items": made["item_count"], "objects": made["object_count"]})
    return describe(region, workspace_id, backup_id)


@dataclass
class Content:
    items: dict[str, list[dict[str, Any]]]  # table -> DynamoDB JSON items
    objects: list[dict[str, Any]]  # {bucket, key, content_type, body}


def read(region: str, found: dict[str, Any]) -> Content:
    """Open a backup, checking every part against the manifest's hashes (a mismatch raises ValueError)."""
    ws, backup_id = found["workspace_id"], found["id"]
    prefix = _prefix(ws, backup_id)
    key = sealing.unwrap(region, ws, backup_id, found["wrapped_key"])

    def part(name: str) -> bytes:
        sealed = _get(region, prefix + name)
        meta = found["parts"][name]
        if _sha(sealed) != meta["sealed_sha256"]:
            raise ValueError(f"backup part {name} does not match its manifest")
        plain = sealing.open_sealed(key, name, sealed)
        if _sha(plain) != meta["sha256"]:
            raise ValueError(f"backup part {name} does not match its manifest")
        return plain

    out = Content(items={}, objects=[])
    for line in gzip.decompress(part("items.enc")).splitlines():
        entry = json.loads(line)
        if "table" in entry:
            out.items.setdefault(entry["table"], []).append(content.decode_item(entry["item"]))
        else:
            out.objects.append({**entry, "body": part(entry["part"])})
    return out


def summary(found: dict[str, Any]) -> dict[str, Any]:
    return {k: found[k] for k in ("id", "workspace_id", "region", "created_at", "expires_at", "tables", "buckets",
                                  "item_count", "object_count")}


def list_backups(region: str, workspace_id: str, query: dict[str, str]) -> dict[str, Any]:
    """The workspace's backups, oldest first (ids are time-ordered), paged by ``limit``/``after``."""
    paging.check_params(query, ("limit", "after"))
    lim = paging.limit(query)
    after = paging.decode("backups", query.get("after"))
    root = f"{BACKUP_ROOT}{workspace_id}/"
    kwargs: dict[str, Any] = {"Bucket": aws.bucket_name(BACKUP_BUCKET, region), "Prefix": root, "Delimiter": "/"}
    if after:
        kwargs["StartAfter"] = root + after + "/~"
    ids: list[str] = []
    for page in _s3(region).get_paginator("list_objects_v2").paginate(**kwargs):
        ids += [p["Prefix"][len(root):].rstrip("/") for p in page.get("CommonPrefixes", [])]
        if len(ids) > lim:
            break
    ids = sorted(i for i in ids if is_id(i, "bkp") and (not after or i > after))[: lim + 1]
    paged = paging.page(ids, lim, "backups", lambda i: i)
    return {"backups": [describe(region, workspace_id, i) for i in paged.pop("_items")], **paged}


def _delete_prefix(region: str, prefix: str) -> None:
    s3 = _s3(region)
    bucket = aws.bucket_name(BACKUP_BUCKET, region)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def sweep(event: dict[str, Any] | None = None) -> dict[str, int]:
    """Delete every backup at least ``BACKUP_RETENTION_DAYS`` old (by its manifest's creation time; a job
    that never completed by its request time) in the regions this deployment serves; returns how many
    backups per region."""
    now = clock.now()
    out: dict[str, int] = {}
    for region in served_regions():
        bucket = aws.bucket_name(BACKUP_BUCKET, region)
        keys = [o["Key"] for page in _s3(region).get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=BACKUP_ROOT) for o in page.get("Contents", [])]
        manifests = {k[: -len("manifest.json")] for k in keys if k.endswith("/manifest.json")}
        jobs = {k[: -len(STATUS)] for k in keys if k.endswith("/" + STATUS)} - manifests
        due = [p for p in manifests if now - float(json.loads(_get(region, p + "manifest.json"))["created_epoch"])
               >= RETENTION_SECONDS]
        due += [p for p in jobs if now - float(json.loads(_get(region, p + STATUS))["requested_epoch"])
                >= RETENTION_SECONDS]
        for prefix in due:  # listed first, deleted after: deleting while paging would skip keys
            _delete_prefix(region, prefix)
        out[region] = len(due)
    if any(out.values()):
        log.info("expired backups deleted", extra={"deleted": out})
    return out


def backup_all(event: dict[str, Any] | None = None) -> dict[str, Any]:
    """Scheduled: queue one backup job per workspace whose content lives in a region this deployment
    serves (the worker runs each, retried on its own). A workspace whose job cannot be queued is
    reported and skipped; the others are queued all the same. Returns the counts per region and the
    workspaces that could not be queued."""
    queued: dict[str, int] = {}
    failed: dict[str, list[str]] = {}
    regions = served_regions()
    for ws in workspaces().scan(attributes_to_get=["id", "region"]):
        if ws.region not in regions:
            continue
        try:
            request(ws.region, ws.id, trigger="schedule")
        except Exception:  # noqa: BLE001 - one workspace never stops the others
            log.exception("scheduled backup not queued", extra={"workspace_id": ws.id})
            failed.setdefault(ws.region, []).append(ws.id)
            continue
        queued[ws.region] = queued.get(ws.region, 0) + 1
    if failed:
        log.error("scheduled backups not queued", extra={"failed": failed})
    return {"queued": queued, "failed": failed}
