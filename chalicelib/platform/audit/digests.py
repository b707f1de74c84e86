"""Signed digests of every workspace's audit chain head, as CloudTrail's digest files are.

A scheduled job (``chalicelib/workers/jobs.py``: ``audit_digest``) runs in each region. For each
workspace whose chain grew since its last digest, it checks the new events against that digest (the
event at the old head still has the old head hash; every new event links and hashes correctly), then
writes a digest: ``{head_seq, head_hash, count, previous_digest_key, previous_digest_sha256, ...}``
signed with the region's ``audit-digest-signing`` KMS key. Digests go to the region's ``audit-digests``
bucket under S3 Object Lock (COMPLIANCE, seven years). Only the digest job's role may sign with that key
or write to that bucket (IAM and the key policy, ``infra/template.py``), so the roles that serve
requests can change neither.

What the digests make detectable (``verify``): deleting the newest events (the live head falls behind
a digest), deleting or changing any event up to the newest digest (the chain no longer reaches the
digest's head hash), and overwriting events with ``PutItem`` and re-hashing the chain (same). The next
run refuses to sign a chain that no longer reaches its previous head and logs ``audit chain tampered``.

Events newer than the newest digest are covered by the audit table's change stream (DynamoDB Streams,
keys only; the table cannot be updated by any function, so the stream cannot be turned off): an append
is an ``INSERT``, so every ``MODIFY`` (a ``PutItem`` over an event) or ``REMOVE`` is tampering. Each run
reads the stream from its checkpoint (kept in the digest bucket, which only this job writes) and writes a
signed alarm ``alarms/<workspace_id>/<stream sequence>.json`` for every such record; ``verify`` fails a
workspace that has one.

Layout: ``s3://<bucket>/digests/<workspace_id>/<inverted head seq>.json``; the inverted sequence number
(10^12 - head_seq, zero-padded) lists the newest digest first.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import audit, aws, clock
from chalicelib.core.config import settings
from chalicelib.core.logs import get_logger

log = get_logger("audit.digests")

FORMAT = "aiplat-audit-digest/1"
BUCKET = "audit-digests"
SIGNING_KEY = "audit-digest-signing"
SIGNING_ALGORITHM = "RSASSA_PKCS1_V1_5_SHA_256"
AUDIT_RETENTION_DAYS = 7 * 365 + 2  # equal to infra.resources.AUDIT_RETENTION_DAYS (a test keeps them in step)
_INVERT = 10**12


@dataclass(frozen=True)
class Digest:
    key: str
    body: dict[str, Any]  # the signed part
    signature: bytes
    raw: bytes  # the stored object, whose SHA-256 the next digest names

    @property
    def head_seq(self) -> int:
        return int(self.body["head_seq"])

    @property
    def head_hash(self) -> str:
        return str(self.body["head_hash"])


def prefix(workspace_id: str) -> str:
    return f"digests/{workspace_id}/"


def object_key(workspace_id: str, head_seq: int) -> str:
    return f"{prefix(workspace_id)}{_INVERT - head_seq:012d}.json"


def _message(body: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(audit.canonical(body).encode()).digest()


def key_arn(region: str) -> str:
    return aws.client("kms", region).describe_key(KeyId=aws.key_alias(SIGNING_KEY))["KeyMetadata"]["Arn"]


def _parse(key: str, raw: bytes) -> Digest:
    doc = json.loads(raw)
    return Digest(key=key, body=doc["digest"], signature=base64.b64decode(doc["signature"]), raw=raw)


def digests(region: str, workspace_id: str, *, newest_only: bool = False) -> list[Digest]:
    """The workspace's digests, oldest first (or only the newest)."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix(workspace_id), PaginationConfig={"MaxItems": 1} if newest_only else {}):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    found = [_parse(k, s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]
    return list(reversed(found))


def region_workspaces(region: str) -> Iterator[str]:
    """Ids of the workspaces whose content lives in ``region`` (from the global directory)."""
    ddb = aws.client("dynamodb", settings().global_region)
    for page in ddb.get_paginator("scan").paginate(
            TableName=aws.table_name("workspaces"), ProjectionExpression="#i",
            FilterExpression="#r = :r", ExpressionAttributeNames={"#i": "id", "#r": "region"},
            ExpressionAttributeValues={":r": {"S": region}}):
        for item in page["Items"]:
            yield item["id"]["S"]


# --- the change stream ---------------------------------------------------------------------------

def _checkpoint_key(region: str) -> str:
    return f"streams/{region}/checkpoint.json"


def _sign(region: str, body: Mapping[str, Any]) -> bytes:
    signature = aws.client("kms", region).sign(KeyId=body["key_arn"], Message=_message(body), MessageType="DIGEST",
                                               SigningAlgorithm=SIGNING_ALGORITHM)["Signature"]
    return audit.canonical({"digest": dict(body), "signature": base64.b64encode(signature).decode()}).encode()


def _put_locked(region: str, key: str, raw: bytes) -> None:
    aws.client("s3", region).put_object(
        Bucket=aws.bucket_name(BUCKET, region), Key=key, Body=raw, ContentType="application/json",
        ChecksumAlgorithm="SHA256", ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=clock.utcnow() + dt.timedelta(days=AUDIT_RETENTION_DAYS))


def watch_stream(region: str) -> dict[str, list[str]]:
    """Read the audit table's change stream since the checkpoint; every overwrite or delete of an event
    becomes a signed alarm for its workspace. Returns workspace id -> findings."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    stream_arn = aws.client("dynamodb", region).describe_table(
        TableName=aws.table_name("audit_events"))["Table"].get("LatestStreamArn")
    if not stream_arn:
        log.error("audit chain tampered", extra={"region": region, "problems": ["the audit table has no change stream"]})
        return {"*": ["the audit table has no change stream"]}
    try:
        checkpoint = json.loads(s3.get_object(Bucket=bucket, Key=_checkpoint_key(region))["Body"].read())
    except ClientError:
        checkpoint = {}
    shards: dict[str, str] = checkpoint.get("shards", {}) if checkpoint.get("stream_arn") == stream_arn else {}
    streams = aws.client("dynamodbstreams", region)
    findings: dict[str, list[str]] = {}
    alarms: list[tuple[str, str, list[str]]] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"].get("Shards", []):
        shard_id = shard["ShardId"]
        where = ({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": shards[shard_id]}
                 if shard_id in shards else {"ShardIteratorType": "TRIM_HORIZON"})
        iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard_id, **where).get("ShardIterator")
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records = page.get("Records", [])
            for record in records:
                shards[shard_id] = record["dynamodb"]["SequenceNumber"]
                if record.get("eventName") not in ("MODIFY", "REMOVE"):
                    continue
                keys = record["dynamodb"].get("Keys", {})
                workspace_id = keys.get("workspace_id", {}).get("S", "?")
                what = "overwritten (PutItem over an existing event)" if record["eventName"] == "MODIFY" else "deleted"
                finding = f"event {keys.get('seq', {}).get('N', '?')} was {what}; change stream record " \
                          f"{record['dynamodb']['SequenceNumber']}"
                findings.setdefault(workspace_id, []).append(finding)
                alarms.append((workspace_id, record["dynamodb"]["SequenceNumber"], [finding]))
            if not records:
                break
            iterator = page.get("NextShardIterator")
    if alarms:
        arn = key_arn(region)
        for workspace_id, sequence, found in alarms:
            body = {"format": FORMAT + "#alarm", "workspace_id": workspace_id, "region": region,
                    "created_at": clock.iso(), "findings": found, "key_arn": arn}
            _put_locked(region, f"alarms/{workspace_id}/{sequence}.json", _sign(region, body))
        log.error("audit chain tampered", extra={"region": region, "problems": findings})
    s3.put_object(Bucket=bucket, Key=_checkpoint_key(region), ContentType="application/json",
                  Body=json.dumps({"stream_arn": stream_arn, "shards": shards, "at": clock.iso()}).encode())
    return findings


def alarms(region: str, workspace_id: str) -> list[Digest]:
    """The signed tamper alarms the job has written for a workspace."""
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"alarms/{workspace_id}/"):
        for obj in page.get("Contents", []):
            out.append(_parse(obj["Key"], s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()))
    return out


# --- the digest job -------------------------------------------------------------------------------

@dataclass
class RunResult:
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    tampered: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"written": len(self.written), "unchanged": self.unchanged, "tampered": self.tampered}


def run(region: str) -> RunResult:
    """One digest run over every workspace of ``region``: the change stream first, then the heads."""
    result = RunResult()
    result.tampered.update(watch_stream(region))
    for workspace_id in region_workspaces(region):
        outcome, problems = digest_workspace(region, workspace_id)
        if outcome == "written":
            result.written.append(workspace_id)
        elif outcome == "unchanged":
            result.unchanged += 1
        else:
            result.tampered.setdefault(workspace_id, []).extend(problems)
    return result


def digest_workspace(region: str, workspace_id: str) -> tuple[str, list[str]]:
    """Write a new digest when the chain grew: ``("written"|"unchanged"|"tampered", problems)``."""
    newest = next(iter(digests(region, workspace_id, newest_only=True)), None)
    cls = audit.model(region)
    problems: list[str] = []
    after = 0
    prev_hash = audit.GENESIS
    if newest is not None:
        after, prev_hash = newest.head_seq, newest.head_hash
        try:
            item = cls.get(workspace_id, after, consistent_read=True)
            if item.hash != prev_hash:
                problems.append(f"event {after} no longer has the hash of the digest {newest.key}")
        except cls.DoesNotExist:
            problems.append(f"event {after}, the head of digest {newest.key}, is gone")
    new_events = [audit.to_dict(i) for i in cls.query(workspace_id, cls.seq > after, consistent_read=True)]
    if not problems:
        problems += verify_segment(new_events, after, prev_hash)
    if problems:
        log.error("audit chain tampered", extra={"workspace_id": workspace_id, "region": region, "problems": problems})
        return "tampered", problems
    if not new_events:
        return "unchanged", []
    head = new_events[-1]
    body = {
        "format": FORMAT, "workspace_id": workspace_id, "region": region, "created_at": clock.iso(),
        "head_seq": head["seq"], "head_hash": head["hash"], "head_occurred_at": head["occurred_at"],
        "count": (int(newest.body["count"]) if newest else 0) + len(new_events),
        "previous_digest_key": newest.key if newest else None,
        "previous_digest_sha256": hashlib.sha256(newest.raw).hexdigest() if newest else None,
        "key_arn": key_arn(region), "signing_algorithm": SIGNING_ALGORITHM,
    }
    _put_locked(region, object_key(workspace_id, head["seq"]), _sign(region, body))
    return "written", []


def verify_segment(events: list[dict[str, Any]], after: int, prev_hash: str) -> list[str]:
    """Problems of ``events`` as the continuation of a chain whose event ``after`` has ``prev_hash``."""
    problems = []
    for event in events:
        after += 1
        if event.get("seq") != after:
            problems.append(f"event {event.get('id')}: seq {event.get('seq')} where {after} was expected")
        if event.get("prev_hash") != prev_hash:
            problems.append(f"event {event.get('id')}: prev_hash does not match the previous event")
        if audit.compute_hash(event) != event.get("hash"):
            problems.append(f"event {event.get('id')}: content does not match its hash (changed)")
        prev_hash = str(event.get("hash"))
    return problems


# --- verification ---------------------------------------------------------------------------------

@dataclass
class DigestCheck:
    checks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    digests: list[Digest] = field(default_factory=list)
    newest: Digest | None = None


def verify(region: str, workspace_id: str, hashes: Mapping[int, str] | None) -> DigestCheck:
    """Check every digest of a workspace: signature (KMS Verify with this region's digest key, and no
    other key), the chain of digests, and (given ``hashes``, the live chain's seq -> hash) that the live
    chain still holds each digest's head with the digest's head hash, and at least its count."""
    out = DigestCheck()
    try:
        for alarm in alarms(region, workspace_id):
            out.problems += [f"tamper alarm {alarm.key}: {f}" for f in alarm.body.get("findings", [])]
        found = out.digests = digests(region, workspace_id)
    except (ClientError, ValueError, KeyError, TypeError) as err:
        out.problems.append(f"digests unreadable: {type(err).__name__}")
        return out
    if not found:
        out.checks.append("no chain digest yet (the scheduled digest job writes one after each change)")
        return out
    kms = aws.client("kms", region)
    expected_arn = key_arn(region)
    previous: Digest | None = None
    for d in found:
        if d.body.get("workspace_id") != workspace_id or d.body.get("format") != FORMAT:
            out.problems.append(f"digest {d.key} is not a digest of this workspace")
        if d.body.get("key_arn") != expected_arn:
            out.problems.append(f"digest {d.key} names a key other than this region's audit-digest-signing key")
        try:
            valid = kms.verify(KeyId=expected_arn, Message=_message(d.body), MessageType="DIGEST",
                               Signature=d.signature, SigningAlgorithm=SIGNING_ALGORITHM)["SignatureValid"]
        except ClientError:
            valid = False
        if not valid:
            out.problems.append(f"digest {d.key}: signature is not valid for the audit-digest-signing key")
        if previous is None:
            if d.body.get("previous_digest_key") is not None:
                out.problems.append(f"digest {d.key} names a previous digest that does not exist")
        else:
            if d.body.get("previous_digest_key") != previous.key or \
                    d.body.get("previous_digest_sha256") != hashlib.sha256(previous.raw).hexdigest():
                out.problems.append(f"digest {d.key} does not link to the digest before it")
            if d.head_seq <= previous.head_seq:
                out.problems.append(f"digest {d.key} does not advance the head")
        if int(d.body.get("count", -1)) != d.head_seq:
            out.problems.append(f"digest {d.key}: count {d.body.get('count')} differs from its head seq {d.head_seq}")
        live = hashes.get(d.head_seq) if hashes is not None else d.head_hash
        if live is None:
            out.problems.append(f"event {d.head_seq}, the head of digest {d.key}, is missing (truncated or deleted)")
        elif live != d.head_hash:
            out.problems.append(f"event {d.head_seq} does not have the head hash of digest {d.key} "
                                "(changed, overwritten or re-chained)")
        previous = d
    out.newest = previous
    if previous is not None and hashes is None:
        out.checks.append(f"{len(found)} chain digests verified (signature, links); newest covers seq {previous.head_seq}")
    elif previous is not None and hashes is not None:
        live_count = len(hashes)
        if live_count < int(previous.body.get("count", 0)):
            out.problems.append(f"the live chain holds {live_count} events; the newest digest counted "
                                f"{previous.body.get('count')} (events deleted)")
        out.checks.append(f"{len(found)} chain digests verified (signature, links); newest covers seq "
                          f"{previous.head_seq} of {live_count}")
    return out
