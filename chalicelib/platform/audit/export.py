"""Audit exports: the selected (contiguous) part of a workspace's chain as JSON Lines, plus a manifest
signed with the region's ``audit-signing`` KMS key, written to the region's ``audit-archive`` bucket
under S3 Object Lock in COMPLIANCE mode for seven years; and the verifier for such an export.

Two halves, two roles. ``request_export`` runs in the platform function (``POST /v1/audit/exports``): it
fixes the ``seq`` range and queues the export (``audit-exports``). ``build_export`` runs in the export
job (``chalicelib/workers/jobs.py``: ``audit_exports``), the only role that may sign with the export
key or write to the archive: it reads the range from the live chain, refuses to sign events that
disagree with a signed chain digest (``audit_digests``), writes both objects, and appends
``audit.exported``. ``GET /v1/audit/exports/{export_id}`` (``verify_stored``) answers 404 until then.

Layout: ``s3://<bucket>/exports/<workspace_id>/<export_id>/events.jsonl`` and ``.../digest.json``.
``digest.json`` = ``{"manifest": {...}, "signature": base64, "signing_algorithm": ...}``; the manifest
names the workspace, the ``seq`` range, the first ``prev_hash``, the last ``hash``, the event count and
the SHA-256 of ``events.jsonl``; the signature is KMS ``Sign`` over the SHA-256 of the manifest's
canonical JSON. An export is a contiguous ``seq`` range (a time range), so its links can be checked;
action/actor filters do not apply to exports.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import audit, aws, clock, correlation
from chalicelib.core.http.errors import ApiError
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.core.store import queues
from chalicelib.core.tenancy import RequestScope
from chalicelib.platform.audit import digests as audit_digests
from chalicelib.platform.audit.query import Filters, seq_bounds

log = get_logger("audit.export")

FORMAT = "aiplat-audit-export/1"
SIGNING_ALGORITHM = "RSASSA_PKCS1_V1_5_SHA_256"
MAX_EXPORT_EVENTS = 100_000
BUCKET = "audit-archive"
SIGNING_KEY = "audit-signing"
QUEUE = "audit-exports"
EXPORT_ID_RE = re.compile(r"^exp_[0-9A-Za-z]{10,40}$")
# seven years, leap days included; equal to infra.resources.AUDIT_RETENTION_DAYS (a test keeps them in step;
# infra/ is not packaged into the Lambda functions)
AUDIT_RETENTION_DAYS = 7 * 365 + 2


class ExportRefused(Exception):
    """The live range disagrees with a signed chain digest: the export job signs nothing."""


@dataclass(frozen=True)
class _Caller:
    ip: str
    user_agent: str
    correlation_id: str


def _manifest_digest(manifest: dict[str, Any]) -> bytes:
    return hashlib.sha256(audit.canonical(manifest).encode()).digest()


def _keys(workspace_id: str, export_id: str, region: str) -> dict[str, str]:
    bucket = aws.bucket_name(BUCKET, region)
    prefix = f"exports/{workspace_id}/{export_id}/"
    return {"bucket": bucket, "uri": f"s3://{bucket}/{prefix}", "events_key": prefix + "events.jsonl",
            "digest_key": prefix + "digest.json"}


def request_export(region: str, workspace_id: str, f: Filters, *, actor: audit.Actor, caller: Any = None) -> dict[str, Any]:
    """Fix the range and queue the export (platform role: it neither signs nor writes the archive)."""
    bounds = seq_bounds(region, workspace_id, f)
    last = audit.head(region, workspace_id)
    if bounds is None or last is None or bounds[0] > int(last.seq):
        raise ApiError(422, "no_events", "No audit events fall in the selected time range.")
    lo, hi = bounds[0], min(bounds[1], int(last.seq))  # the range is fixed now: later events are not in it
    if hi - lo + 1 > MAX_EXPORT_EVENTS:
        raise ApiError(422, "export_too_large", f"An export holds at most {MAX_EXPORT_EVENTS} events; "
                                                "narrow the time range with from and to.")
    export_id = new_id("exp")
    message = {"export_id": export_id, "workspace_id": workspace_id, "region": region, "first_seq": lo,
               "last_seq": hi, "from": f.from_iso, "to": f.to_iso, "actor": actor.as_dict(),
               "ip": getattr(caller, "ip", "") or "", "user_agent": getattr(caller, "user_agent", "") or ""}
    queues.enqueue(QUEUE, region, message, group_key=workspace_id)
    return {"id": export_id, "status": "pending", **_keys(workspace_id, export_id, region),
            "count": hi - lo + 1, "first_seq": lo, "last_seq": hi, "from": f.from_iso, "to": f.to_iso,
            "requested_at": clock.iso()}


def build_export(message: dict[str, Any]) -> dict[str, Any]:
    """The export job: read, check against the signed chain digests, write, sign, audit. Idempotent."""
    workspace_id, export_id, region = message["workspace_id"], message["export_id"], message["region"]
    if region not in OPEN_REGIONS or not EXPORT_ID_RE.match(export_id):
        raise ValueError("malformed export message")
    keys = _keys(workspace_id, export_id, region)
    s3 = aws.client("s3", region)
    try:
        s3.head_object(Bucket=keys["bucket"], Key=keys["digest_key"])
        return {"id": export_id, "status": "ready"}  # a redelivered message: already built
    except ClientError:
        pass
    lo, hi = int(message["first_seq"]), int(message["last_seq"])
    cls = audit.model(region)
    events = [audit.to_dict(i) for i in cls.query(workspace_id, cls.seq.between(lo, hi), consistent_read=True,
                                                  page_size=1000)]
    problems = audit_digests.verify_segment(events, lo - 1, events[0]["prev_hash"] if events else audit.GENESIS)
    if len(events) != hi - lo + 1:
        problems.append(f"the range {lo}..{hi} holds {len(events)} events")
    by_seq = {e["seq"]: e["hash"] for e in events}
    found = audit_digests.digests(region, workspace_id)
    for d in found:
        if lo <= d.head_seq <= hi and by_seq.get(d.head_seq) != d.head_hash:
            problems.append(f"event {d.head_seq} does not have the head hash of digest {d.key}")
    following = next((d for d in found if d.head_seq > hi), None)
    if following is not None and events and not problems:  # the range must still link to the next digest
        rest = [audit.to_dict(i) for i in cls.query(workspace_id, cls.seq.between(hi + 1, following.head_seq),
                                                    consistent_read=True, page_size=1000)]
        problems += audit_digests.verify_segment(rest, hi, events[-1]["hash"])
        if not rest or rest[-1]["hash"] != following.head_hash:
            problems.append(f"the range does not lead to the head hash of digest {following.key}")
    if problems:
        log.error("audit chain tampered", extra={"workspace_id": workspace_id, "export_id": export_id,
                                                 "problems": problems})
        raise ExportRefused("; ".join(problems))
    body = ("\n".join(audit.canonical(e) for e in events) + "\n").encode()
    kms = aws.client("kms", region)
    key_arn = kms.describe_key(KeyId=aws.key_alias(SIGNING_KEY))["KeyMetadata"]["Arn"]
    actor = message.get("actor") or {}
    manifest = {
        "format": FORMAT, "export_id": export_id, "workspace_id": workspace_id, "region": region,
        "created_at": clock.iso(), "created_by": actor,
        "from": message.get("from"), "to": message.get("to"),
        "first_seq": lo, "last_seq": hi, "count": len(events),
        "first_prev_hash": events[0]["prev_hash"], "last_hash": events[-1]["hash"],
        "events_sha256": hashlib.sha256(body).hexdigest(), "events_object": "events.jsonl",
        "key_arn": key_arn, "signing_algorithm": SIGNING_ALGORITHM,
    }
    signature = kms.sign(KeyId=key_arn, Message=_manifest_digest(manifest), MessageType="DIGEST",
                         SigningAlgorithm=SIGNING_ALGORITHM)["Signature"]
    digest = {"manifest": manifest, "signature": base64.b64encode(signature).decode(),
              "signing_algorithm": SIGNING_ALGORITHM}
    retain_until = clock.utcnow() + dt.timedelta(days=AUDIT_RETENTION_DAYS)
    lock = {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": retain_until, "ChecksumAlgorithm": "SHA256"}
    s3.put_object(Bucket=keys["bucket"], Key=keys["events_key"], Body=body, ContentType="application/x-ndjson", **lock)
    s3.put_object(Bucket=keys["bucket"], Key=keys["digest_key"], Body=json.dumps(digest, indent=2).encode(),
                  ContentType="application/json", **lock)
    audit.append(region, workspace_id, "audit.exported",
                 actor=audit.Actor(str(actor.get("type", "user")), str(actor.get("id", "")), str(actor.get("email", ""))),
                 target={"type": "audit_export", "id": export_id},
                 details={"uri": keys["uri"], "count": len(events), "first_seq": lo, "last_seq": hi,
                          "events_sha256": manifest["events_sha256"]},
                 caller=_Caller(str(message.get("ip", "")), str(message.get("user_agent", "")), correlation.current()))
    return {"id": export_id, "status": "ready", "count": len(events)}


def handle(event: dict[str, Any]) -> dict[str, Any]:
    """The ``audit-exports`` queue handler (Lambda SQS event shape)."""
    return queues.handle_batch(event, _handle_record, what="audit export")


def _handle_record(record: dict[str, Any]) -> bool:
    build_export(json.loads(record.get("body") or ""))
    return True


# --- verification -----------------------------------------------------------------------------------

@dataclass
class Report:
    ok: bool = True
    checks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    count: int = 0

    def fail(self, problem: str) -> None:
        self.ok = False
        self.problems.append(problem)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "count": self.count, "checks": self.checks, "problems": self.problems}


def parse_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError("expected s3://<bucket>/exports/<workspace_id>/<export_id>/")
    bucket, _, prefix = uri[5:].partition("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix


def region_of_bucket(bucket: str) -> str:
    for region in OPEN_REGIONS:
        if aws.bucket_name(BUCKET, region) == bucket:
            return region
    raise ValueError(f"{bucket} is not an audit-archive bucket of this deployment")


def verify_export(uri: str) -> Report:
    """Check signature (KMS Verify with the region's key), the events' SHA-256, every event hash, the
    links and seq continuity, and that the events match the manifest's range and end hashes."""
    report = Report()
    bucket, prefix = parse_uri(uri)
    region = region_of_bucket(bucket)
    s3 = aws.client("s3", region)
    try:
        digest = json.loads(s3.get_object(Bucket=bucket, Key=prefix + "digest.json")["Body"].read())
        body = s3.get_object(Bucket=bucket, Key=prefix + "events.jsonl")["Body"].read()
        manifest = digest["manifest"]
        signature = base64.b64decode(digest["signature"])
    except (ClientError, ValueError, KeyError, TypeError) as err:
        report.fail(f"export unreadable: {type(err).__name__}")
        return report
    kms = aws.client("kms", region)
    expected_arn = kms.describe_key(KeyId=aws.key_alias(SIGNING_KEY))["KeyMetadata"]["Arn"]
    if manifest.get("key_arn") != expected_arn:
        report.fail("digest names a signing key other than this region's audit-signing key")
    try:
        valid = kms.verify(KeyId=expected_arn, Message=_manifest_digest(manifest), MessageType="DIGEST",
                           Signature=signature, SigningAlgorithm=SIGNING_ALGORITHM)["SignatureValid"]
    except ClientError:
        valid = False
    if valid:
        report.checks.append("digest signature valid (KMS Verify)")
    else:
        report.fail("digest signature is not valid: the manifest was changed or not signed by this key")
    if hashlib.sha256(body).hexdigest() == manifest.get("events_sha256"):
        report.checks.append("events.jsonl SHA-256 matches the signed digest")
    else:
        report.fail("events.jsonl does not match the SHA-256 in the signed digest (changed)")
    try:
        events = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    except ValueError:
        report.fail("events.jsonl is not valid JSON Lines")
        return report
    report.count = len(events)
    chain = audit.verify_chain(events, expect_genesis=manifest.get("first_seq") == 1)
    report.problems.extend(chain.problems)
    report.ok = report.ok and chain.ok
    if chain.ok:
        report.checks.append(f"{len(events)} event hashes and links verified")
    expect = {"count": len(events),
              "first_seq": events[0].get("seq") if events else None,
              "last_seq": events[-1].get("seq") if events else None,
              "first_prev_hash": events[0].get("prev_hash") if events else None,
              "last_hash": events[-1].get("hash") if events else None}
    for name, value in expect.items():
        if manifest.get(name) != value:
            report.fail(f"{name} of the events ({value}) differs from the signed digest ({manifest.get(name)})")
    if any(e.get("workspace_id") != manifest.get("workspace_id") for e in events):
        report.fail("an event belongs to another workspace")
    _check_against_chain_digests(report, region, str(manifest.get("workspace_id")), events)
    return report


def _check_against_chain_digests(report: Report, region: str, workspace_id: str, events: list[dict[str, Any]]) -> None:
    """Every chain digest whose head falls inside the export must find its head hash there. A re-chained
    export (even one re-signed with some other key) cannot reach a digest's head hash, and the digests
    are signed with a key only the digest job may use."""
    digest_check = audit_digests.verify(region, workspace_id, None)
    for problem in digest_check.problems:
        report.fail(problem)
    by_seq = {e.get("seq"): e.get("hash") for e in events}
    anchored = 0
    for d in digest_check.digests if not digest_check.problems else []:
        if d.head_seq in by_seq:
            anchored += 1
            if by_seq[d.head_seq] != d.head_hash:
                report.fail(f"event {d.head_seq} does not have the head hash of chain digest {d.key} "
                            "(the export was changed or re-chained)")
    if anchored:
        report.checks.append(f"{anchored} signed chain digest(s) fall inside the export and match it")
    else:
        report.checks.append("no signed chain digest has its head inside the export")


def verify_live(scope: RequestScope) -> Report:
    """The live chain (hashes, links, seq from 1) and every signed chain digest of the workspace (head
    and count still present, digests signed by the digest key and linked)."""
    workspace_id, region = scope.workspace_id, scope.entry().region
    report = Report()
    hashes: dict[int, str] = {}

    def remember() -> Any:
        for event in audit.iter_chain(region, workspace_id):
            hashes[int(event["seq"])] = str(event["hash"])
            yield event

    result = audit.verify_chain(remember())
    report.count = result.count
    report.problems = list(result.problems)
    report.ok = result.ok
    if result.ok:
        report.checks.append(f"live chain of {result.count} events verified; head {result.head_hash}")
    digest_check = audit_digests.verify(region, workspace_id, hashes)
    report.checks += digest_check.checks
    for problem in digest_check.problems:
        report.fail(problem)
    return report


DOWNLOAD_TTL_SECONDS = 300


def verify_stored(region: str, workspace_id: str, export_id: str) -> dict[str, Any]:
    """An export of ``workspace_id`` checked again (``verify_export``), with a short-lived download link
    of its ``events.jsonl``; 404 for an unknown id or another workspace's export."""
    if not EXPORT_ID_RE.match(export_id):
        raise ApiError(404, "not_found", "No such export.")
    bucket = aws.bucket_name(BUCKET, region)
    prefix = f"exports/{workspace_id}/{export_id}/"
    s3 = aws.client("s3", region)
    try:
        digest = json.loads(s3.get_object(Bucket=bucket, Key=prefix + "digest.json")["Body"].read())
    except ClientError:
        raise ApiError(404, "not_found", "No such export.") from None
    report = verify_export(f"s3://{bucket}/{prefix}")
    manifest = digest.get("manifest", {})
    url = s3.generate_presigned_url("get_object", Params={
        "Bucket": bucket, "Key": prefix + "events.jsonl",
        "ResponseContentDisposition": f'attachment; filename="audit-{workspace_id}-{export_id}.jsonl"'},
        ExpiresIn=DOWNLOAD_TTL_SECONDS)
    return {"id": export_id, "uri": f"s3://{bucket}/{prefix}", "count": manifest.get("count"),
            "first_seq": manifest.get("first_seq"), "last_seq": manifest.get("last_seq"),
            "created_at": manifest.get("created_at"), "events_sha256": manifest.get("events_sha256"),
            "verification": report.as_dict(), "download_url": url,
            "download_expires_at": clock.iso(clock.now() + DOWNLOAD_TTL_SECONDS)}
