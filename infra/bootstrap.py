"""Create every declared resource on the current endpoint (moto, LocalStack or an AWS sandbox).

Idempotent: what exists is left as it is, so running it twice changes nothing. Usage:
``python -m infra.bootstrap [region ...]`` (default: the global resources and every open region).
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import aws
from chalicelib.core.config import settings
from chalicelib.core.regions import DR_ONLY_REGIONS, OPEN_REGIONS
from infra.resources import BUCKETS, DR_BUCKETS, DR_KEYS, GLOBAL, QUEUES, REGIONAL, Bucket, Key, Table, keys, tables


def _table_spec(t: Table) -> dict[str, Any]:
    schema = [{"AttributeName": t.hash_key, "KeyType": "HASH"}]
    if t.range_key:
        schema.append({"AttributeName": t.range_key, "KeyType": "RANGE"})
    spec: dict[str, Any] = {
        "TableName": aws.table_name(t.name),
        "KeySchema": schema,
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": ty} for n, ty in t.attributes.items()],
        "BillingMode": "PAY_PER_REQUEST",
    }
    gsis, lsis = [], []
    for ix in t.indexes:
        ks = [{"AttributeName": ix.hash_key, "KeyType": "HASH"}]
        if ix.range_key:
            ks.append({"AttributeName": ix.range_key, "KeyType": "RANGE"})
        (lsis if ix.local else gsis).append(
            {"IndexName": ix.name, "KeySchema": ks, "Projection": {"ProjectionType": "ALL"}})
    if gsis:
        spec["GlobalSecondaryIndexes"] = gsis
    if lsis:
        spec["LocalSecondaryIndexes"] = lsis
    if t.stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": t.stream}
    return spec


def _exists(describe: Callable[[], Any], not_found_code: str) -> bool:
    """Whether a describe call finds the resource (its not-found error code says it is missing)."""
    try:
        describe()
        return True
    except ClientError as err:
        if err.response["Error"]["Code"] != not_found_code:
            raise
    return False


def ensure_table(t: Table, region: str) -> bool:
    ddb = aws.client("dynamodb", region)
    name = aws.table_name(t.name)
    found: dict[str, Any] = {}
    if _exists(lambda: found.update(ddb.describe_table(TableName=name)["Table"]), "ResourceNotFoundException"):
        if t.stream and not found.get("StreamSpecification", {}).get("StreamEnabled"):
            ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": True, "StreamViewType": t.stream})
        return False
    ddb.create_table(**_table_spec(t))
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    if t.ttl:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": t.ttl})
    return True


def ensure_queues(region: str) -> list[str]:
    sqs = aws.client("sqs", region)
    made = []
    for q in QUEUES:
        try:
            sqs.get_queue_url(QueueName=aws.queue_name(q.name))
            continue
        except ClientError as err:
            if "NonExistentQueue" not in err.response["Error"]["Code"]:
                raise
        dlq_url = sqs.create_queue(QueueName=aws.queue_name(q.name + "-dlq"),
                                   Attributes={"MessageRetentionPeriod": str(14 * 24 * 3600)})["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sqs.create_queue(QueueName=aws.queue_name(q.name), Attributes={
            "VisibilityTimeout": str(q.visibility_timeout),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(q.max_receive_count)}),
        })
        made.append(q.name)
    return made


def ensure_buckets(region: str, buckets: tuple[Bucket, ...] = BUCKETS) -> list[str]:
    s3 = aws.client("s3", region)
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    made = []
    for b in buckets:
        name = aws.bucket_name(b.name, region)
        if name in existing:
            continue
        args: dict[str, Any] = {"Bucket": name}
        if region != "us-east-1":
            args["CreateBucketConfiguration"] = {"LocationConstraint": region}
        if b.object_lock_days:
            args["ObjectLockEnabledForBucket"] = True
        s3.create_bucket(**args)
        s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
        s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": [{
            "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                   "KMSMasterKeyID": aws.key_alias(b.name if b.name in ("backups", "dr") else "data")}}]})
        if b.object_lock_days:
            s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration={
                "ObjectLockEnabled": "Enabled",
                "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": b.object_lock_days}}})
        if b.expire_days:
            s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": [{
                "ID": "rotation", "Status": "Enabled", "Filter": {"Prefix": ""},
                "Expiration": {"Days": b.expire_days},
                "NoncurrentVersionExpiration": {"NoncurrentDays": b.expire_days}}]})
        made.append(b.name)
    return made


def ensure_key(k: Key, region: str) -> bool:
    kms = aws.client("kms", region)
    alias = aws.key_alias(k.name)
    if _exists(lambda: kms.describe_key(KeyId=alias), "NotFoundException"):
        return False
    key_id = kms.create_key(KeySpec=k.spec, KeyUsage=k.usage, Description=k.purpose)["KeyMetadata"]["KeyId"]
    if k.spec == "SYMMETRIC_DEFAULT":
        kms.enable_key_rotation(KeyId=key_id)
    kms.create_alias(AliasName=alias, TargetKeyId=key_id)
    return True


def bootstrap_global() -> dict[str, list[str]]:
    region = settings().global_region
    made = {"keys": [k.name for k in keys(GLOBAL) if ensure_key(k, region)],
            "tables": [t.name for t in tables(GLOBAL) if ensure_table(t, region)]}
    from chalicelib.identity.oauth.signing import ensure_key as ensure_signing_key

    ensure_signing_key()
    from chalicelib.core.mail import ensure_sender

    ensure_sender(region)
    return made


def bootstrap_region(region: str) -> dict[str, list[str]]:
    from chalicelib.core.mail import ensure_sender

    ensure_sender(region)  # workspace mail (invitations) is sent from the workspace's own region
    return {
        "keys": [k.name for k in keys(REGIONAL) if ensure_key(k, region)],
        "tables": [t.name for t in tables(REGIONAL) if ensure_table(t, region)],
        "queues": ensure_queues(region),
        "buckets": ensure_buckets(region),
    }


def bootstrap_dr_region(region: str) -> dict[str, list[str]]:
    """A disaster-recovery-only region: its key and the DR bucket, nothing that serves requests."""
    return {"keys": [k.name for k in DR_KEYS if ensure_key(k, region)],
            "buckets": ensure_buckets(region, DR_BUCKETS)}


def bootstrap_all(regions: tuple[str, ...] = OPEN_REGIONS) -> dict[str, Any]:
    out: dict[str, Any] = {"global": bootstrap_global()}
    for region in regions:
        out[region] = bootstrap_region(region)
    for region in DR_ONLY_REGIONS:
        out[region] = bootstrap_dr_region(region)
    return out


if __name__ == "__main__":
    chosen = tuple(sys.argv[1:]) or OPEN_REGIONS
    print(json.dumps(bootstrap_all(chosen), indent=2))
