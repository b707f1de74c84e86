"""Audit exports: the selected (contiguous) part of a workspace's chain as JSON Lines, plus a digest
signed with the region's ``audit-signing`` KMS key, written to the region's ``audit-archive`` bucket
under S3 Object Lock in COMPLIANCE mode for seven years; and the verifier for such an export.

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

from chalicelib.core import audit, aws, clock
from chalicelib.core.errors import ApiError
from chalicelib.core.ids import new_id
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.platform.audit_query import Filters, seq_bounds

FORMAT = "aiplat-audit-export/1"
SIGNING_ALGORITHM = "RSASSA_PKCS1_V1_5_SHA_256"
MAX_EXPORT_EVENTS = 100_000
BUCKET = "audit-archive"
SIGNING_KEY = "audit-signing"
# seven years, leap days included; equal to infra.resources.AUDIT_RETENTION_DAYS (a test keeps them in step;
# infra/ is not packaged into the Lambda functions)
AUDIT_RETENTION_DAYS = 7 * 365 + 2


def _manifest_digest(manifest: dict[str, Any]) -> bytes:
    return hashlib.sha256(audit.canonical(manifest).encode()).digest()


def export(region: str, workspace_id: str, f: Filters, *, actor: audit.Actor, caller: Any = None) -> dict[str, Any]:
    bounds = seq_bounds(region, workspace_id, f)
    if bounds is None:
        raise ApiError(422, "no_events", "No audit events fall in the selected time range.")
    lo, hi = bounds
    cls = audit.model(region)
    lines: list[str] = []
    events: list[dict[str, Any]] = []
    for item in cls.query(workspace_id, cls.seq.between(lo, hi), consistent_read=True, page_size=1000):
        if len(events) >= MAX_EXPORT_EVENTS:
            raise ApiError(422, "export_too_large", f"An export holds at most {MAX_EXPORT_EVENTS} events; "
                                                    "narrow the time range with from and to.")
        event = audit.to_dict(item)
        events.append(event)
        lines.append(audit.canonical(event))
    body = ("\n".join(lines) + "\n").encode()
    export_id = new_id("exp")
    now = clock.now()
    retain_until = clock.utcnow() + dt.timedelta(days=AUDIT_RETENTION_DAYS)
    kms = aws.client("kms", region)
    key_arn = kms.describe_key(KeyId=aws.key_alias(SIGNING_KEY))["KeyMetadata"]["Arn"]
    manifest = {
        "format": FORMAT, "export_id": export_id, "workspace_id": workspace_id, "region": region,
        "created_at": clock.iso(now), "created_by": actor.as_dict(),
        "from": f.from_iso, "to": f.to_iso,
        "first_seq": events[0]["seq"], "last_seq": events[-1]["seq"], "count": len(events),
        "first_prev_hash": events[0]["prev_hash"], "last_hash": events[-1]["hash"],
        "events_sha256": hashlib.sha256(body).hexdigest(), "events_object": "events.jsonl",
        "key_arn": key_arn, "signing_algorithm": SIGNING_ALGORITHM,
    }
    signature = kms.sign(KeyId=key_arn, Message=_manifest_digest(manifest), MessageType="DIGEST",
                         SigningAlgorithm=SIGNING_ALGORITHM)["Signature"]
    digest = {"manifest": manifest, "signature": base64.b64encode(signature).decode(),
              "signing_algorithm": SIGNING_ALGORITHM}
    bucket = aws.bucket_name(BUCKET, region)
    prefix = f"exports/{workspace_id}/{export_id}/"
    s3 = aws.client("s3", region)
    lock = {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": retain_until, "ChecksumAlgorithm": "SHA256"}
    s3.put_object(Bucket=bucket, Key=prefix + "events.jsonl", Body=body, ContentType="application/x-ndjson", **lock)
    s3.put_object(Bucket=bucket, Key=prefix + "digest.json", Body=json.dumps(digest, indent=2).encode(),
                  ContentType="application/json", **lock)
    result = {"id": export_id, "uri": f"s3://{bucket}/{prefix}", "bucket": bucket,
              "events_key": prefix + "events.jsonl", "digest_key": prefix + "digest.json",
              "count": len(events), "first_seq": manifest["first_seq"], "last_seq": manifest["last_seq"],
              "from": f.from_iso, "to": f.to_iso, "events_sha256": manifest["events_sha256"],
              "object_lock": {"mode": "COMPLIANCE", "retain_until": clock.iso(retain_until)},
              "created_at": manifest["created_at"]}
    audit.append(region, workspace_id, "audit.exported", actor=actor, target={"type": "audit_export", "id": export_id},
                 details={k: result[k] for k in ("uri", "count", "first_seq", "last_seq", "events_sha256")},
                 caller=caller)
    return result


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
    return report


def verify_live(workspace_id: str) -> Report:
    from chalicelib.core.tenancy import region_of

    report = Report()
    result = audit.verify_live(region_of(workspace_id), workspace_id)
    report.count = result.count
    report.ok = result.ok
    report.problems = list(result.problems)
    if result.ok:
        report.checks.append(f"live chain of {result.count} events verified; head {result.head_hash}")
    return report


EXPORT_ID_RE = re.compile(r"^exp_[0-9A-Za-z]{10,40}$")
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
