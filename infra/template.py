"""Deployment artefacts generated from the one declaration (``infra/resources.py``).

- ``resources_template(region)``: a CloudFormation template of the region's tables, queues (each with its
  dead-letter queue), buckets and keys; the global region's also holds the global ones.
- ``iam_policy(group)``: the policy each route group's functions run with (``.chalice/policy-<group>.json``):
  least privilege on our own resources, and an explicit deny of every write except PutItem on the audit
  table, so no function can change or delete an audit event. No group may ``kms:Sign`` or write to the
  audit buckets: ``job_policy(job)`` (``.chalice/policy-<job>.json``, set per function in
  ``.chalice/config.json``) gives the export job and the digest job, each alone, its key and its bucket;
  each signing key's key policy also refuses ``kms:Sign`` to every other principal.

``python -m infra.template OUT_DIR`` writes ``resources-<region>.json`` for every open region and refreshes
the ``.chalice`` policies (a test checks the committed policies are current).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from chalicelib.core.regions import OPEN_REGIONS
from infra.resources import AUDIT_JOBS, BUCKETS, GLOBAL, KEYS, QUEUES, REGIONAL, TABLES

PREFIX = "aiplat"
GLOBAL_REGION = "us-east-1"
CHALICE_DIR = Path(__file__).resolve().parent.parent / ".chalice"


def _logical(*parts: str) -> str:
    return "".join(p.replace("-", " ").replace("_", " ").title().replace(" ", "") for p in parts)


def _table(t: Any) -> dict[str, Any]:
    schema = [{"AttributeName": t.hash_key, "KeyType": "HASH"}]
    if t.range_key:
        schema.append({"AttributeName": t.range_key, "KeyType": "RANGE"})
    props: dict[str, Any] = {
        "TableName": f"{PREFIX}-{t.name}",
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": schema,
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": ty} for n, ty in t.attributes.items()],
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "SSESpecification": {"SSEEnabled": True},
        "DeletionProtectionEnabled": True,
    }
    gsis = [ix for ix in t.indexes if not ix.local]
    lsis = [ix for ix in t.indexes if ix.local]
    for key, group in (("GlobalSecondaryIndexes", gsis), ("LocalSecondaryIndexes", lsis)):
        if group:
            props[key] = [{"IndexName": ix.name, "Projection": {"ProjectionType": "ALL"},
                           "KeySchema": [{"AttributeName": ix.hash_key, "KeyType": "HASH"}]
                           + ([{"AttributeName": ix.range_key, "KeyType": "RANGE"}] if ix.range_key else [])}
                          for ix in group]
    if t.ttl:
        props["TimeToLiveSpecification"] = {"AttributeName": t.ttl, "Enabled": True}
    if t.stream:
        props["StreamSpecification"] = {"StreamViewType": t.stream}
    return {"Type": "AWS::DynamoDB::Table", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
            "Properties": props}


def job_role_pattern(job: str) -> str:
    """The IAM role Chalice creates for a workers function with its own policy file
    (``<app>-<stage>-<function>``, stage ``workers-dev``/``workers-prod``)."""
    return f"arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:role/{PREFIX}-workers-*-{job}"


def _key(k: Any) -> dict[str, Any]:
    statements: list[dict[str, Any]] = [{
        "Sid": "AccountAdmin", "Effect": "Allow",
        "Principal": {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}},
        "Action": "kms:*", "Resource": "*"}]
    if k.signer:  # the key itself refuses Sign to every principal but the one job (IAM cannot widen it)
        statements.append({"Sid": "OnlyTheJobSigns", "Effect": "Deny", "Principal": "*", "Action": "kms:Sign",
                           "Resource": "*",
                           "Condition": {"ArnNotLike": {"aws:PrincipalArn": {"Fn::Sub": job_role_pattern(k.signer)}}}})
    props: dict[str, Any] = {"Description": k.purpose, "KeySpec": k.spec, "KeyUsage": k.usage,
                             "KeyPolicy": {"Version": "2012-10-17", "Statement": statements}}
    if k.spec == "SYMMETRIC_DEFAULT":
        props["EnableKeyRotation"] = True
    return {"Type": "AWS::KMS::Key", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain", "Properties": props}


def _bucket(b: Any, region: str) -> dict[str, Any]:
    key = "Backups" if b.name == "backups" else "Data"
    props: dict[str, Any] = {
        "BucketName": {"Fn::Sub": f"{PREFIX}-{b.name}-{region}-${{AWS::AccountId}}"},
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [f"{key}Key", "Arn"]}}, "BucketKeyEnabled": True}]},
        "VersioningConfiguration": {"Status": "Enabled"},
    }
    if b.object_lock_days:
        props["ObjectLockEnabled"] = True
        props["ObjectLockConfiguration"] = {"ObjectLockEnabled": "Enabled", "Rule": {
            "DefaultRetention": {"Mode": "COMPLIANCE", "Days": b.object_lock_days}}}
    if b.expire_days:
        props["LifecycleConfiguration"] = {"Rules": [{
            "Id": "rotation", "Status": "Enabled", "ExpirationInDays": b.expire_days,
            "NoncurrentVersionExpiration": {"NoncurrentDays": b.expire_days}}]}
    return {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain", "Properties": props}


def resources_template(region: str) -> dict[str, Any]:
    """The CloudFormation template of everything declared for ``region``."""
    scopes = {REGIONAL} | ({GLOBAL} if region == GLOBAL_REGION else set())
    res: dict[str, Any] = {}
    for t in TABLES:
        if t.scope in scopes:
            res[_logical(t.name, "table")] = _table(t)
    for k in KEYS:
        if k.scope in scopes:
            res[_logical(k.name, "key")] = _key(k)
            res[_logical(k.name, "alias")] = {"Type": "AWS::KMS::Alias", "Properties": {
                "AliasName": f"alias/{PREFIX}-{k.name}", "TargetKeyId": {"Ref": _logical(k.name, "key")}}}
    for q in QUEUES:
        dlq = _logical(q.name, "dlq")
        res[dlq] = {"Type": "AWS::SQS::Queue", "Properties": {
            "QueueName": f"{PREFIX}-{q.name}-dlq", "MessageRetentionPeriod": 14 * 24 * 3600,
            "KmsMasterKeyId": {"Ref": "DataKey"}}}
        res[_logical(q.name, "queue")] = {"Type": "AWS::SQS::Queue", "Properties": {
            "QueueName": f"{PREFIX}-{q.name}", "VisibilityTimeout": q.visibility_timeout,
            "KmsMasterKeyId": {"Ref": "DataKey"},
            "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]}, "maxReceiveCount": q.max_receive_count}}}
    for b in BUCKETS:
        res[_logical(b.name, "bucket")] = _bucket(b, region)
    return {"AWSTemplateFormatVersion": "2010-09-09",
            "Description": f"aiplat resources for {region} (generated from infra/resources.py)",
            "Resources": res}


def iam_policy(group: str, *, job: str | None = None) -> dict[str, Any]:
    """Least-privilege policy for a route group's functions (``job``: one audit job's own function)."""
    tables = [f"arn:aws:dynamodb:*:*:table/{PREFIX}-{t.name}" for t in TABLES]
    audit_table = f"arn:aws:dynamodb:*:*:table/{PREFIX}-audit_events"
    own_keys = [f"alias/{PREFIX}-{k.name}" for k in KEYS if job and k.signer == job]
    guarded = [b for b in BUCKETS if b.writer]
    statements: list[dict[str, Any]] = [
        {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "arn:aws:logs:*:*:*"},
        {"Sid": "Tables", "Effect": "Allow",
         "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                    "dynamodb:Query", "dynamodb:Scan", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem",
                    "dynamodb:ConditionCheckItem", "dynamodb:DescribeTable"],
         "Resource": tables + [t + "/index/*" for t in tables]},
        {"Sid": "AuditIsAppendOnly", "Effect": "Deny",
         "Action": ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:PartiQLInsert",
                    "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete", "dynamodb:DeleteTable", "dynamodb:UpdateTable",
                    "dynamodb:RestoreTableFromBackup", "dynamodb:RestoreTableToPointInTime", "dynamodb:ImportTable"],
         "Resource": audit_table},
        # PutItem stays allowed: IAM has no condition key for a request's ConditionExpression (DynamoDB's
        # documented keys are LeadingKeys, Attributes, Select, ReturnValues, ReturnConsumedCapacity,
        # EnclosingOperation, FullTableScan), so "only with attribute_not_exists" cannot be required by
        # IAM. An overwrite is detected instead: the signed chain-head digests (docs/security.md).
        {"Sid": "Keys", "Effect": "Allow",
         "Action": ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:Verify", "kms:GenerateMac",
                    "kms:DescribeKey", "kms:GetPublicKey"],
         "Resource": "*", "Condition": {"ForAnyValue:StringLike": {"kms:ResourceAliases": f"alias/{PREFIX}-*"}}},
    ]
    if job == "audit_digest":  # reads the audit table's change stream for overwrites and deletes
        statements.append({"Sid": "AuditChangeStream", "Effect": "Allow",
                           "Action": ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
                           "Resource": f"{audit_table}/stream/*"})
    if own_keys:
        statements.append({"Sid": "SignWithTheJobsOwnKey", "Effect": "Allow", "Action": ["kms:Sign"], "Resource": "*",
                           "Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": own_keys}}})
        statements.append({"Sid": "SignWithNoOtherKey", "Effect": "Deny", "Action": ["kms:Sign"], "Resource": "*",
                           "Condition": {"ForAllValues:StringNotEquals": {"kms:ResourceAliases": own_keys}}})
    else:
        statements.append({"Sid": "OnlyAuditJobsSign", "Effect": "Deny", "Action": ["kms:Sign"], "Resource": "*"})
    statements += [
        {"Sid": "Queues", "Effect": "Allow",
         "Action": ["sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes"]
         + (["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"] if group == "workers" else []),
         "Resource": f"arn:aws:sqs:*:*:{PREFIX}-*"},
        {"Sid": "Objects", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket",
                                                         "s3:PutObjectRetention", "s3:GetObjectRetention"],
         "Resource": [f"arn:aws:s3:::{PREFIX}-*", f"arn:aws:s3:::{PREFIX}-*/*"]},
        {"Sid": "AuditArchiveIsWriteOnce", "Effect": "Deny",
         "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:BypassGovernanceRetention", "s3:PutBucketObjectLockConfiguration",
                    "s3:PutBucketPolicy", "s3:PutLifecycleConfiguration", "s3:DeleteBucket"],
         "Resource": [r for b in guarded for r in (f"arn:aws:s3:::{PREFIX}-{b.name}-*", f"arn:aws:s3:::{PREFIX}-{b.name}-*/*")]},
    ]
    others = [b for b in guarded if b.writer != job]
    if others:
        statements.append({"Sid": "AuditBucketsWrittenOnlyByTheirJob", "Effect": "Deny",
                           "Action": ["s3:PutObject", "s3:PutObjectRetention"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-{b.name}-*/*" for b in others]})
    if group in ("gateway", "workers") and job is None:  # connectors: snapshots pruned, sources read (never our own resources)
        statements.append({"Sid": "GatewayDataLifecycle", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-data-*/*", f"arn:aws:s3:::{PREFIX}-documents-*/*"]})
        statements.append({"Sid": "ConnectorSources", "Effect": "Allow",
                           "Action": ["s3:GetObject", "s3:ListBucket", "dynamodb:Scan", "dynamodb:DescribeTable"],
                           "NotResource": [f"arn:aws:s3:::{PREFIX}-*", f"arn:aws:s3:::{PREFIX}-*/*",
                                           f"arn:aws:dynamodb:*:*:table/{PREFIX}-*"]})
    if group in ("identity", "platform"):
        statements.append({"Sid": "Mail", "Effect": "Allow", "Action": ["ses:SendEmail"], "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": statements}


def job_policy(job: str) -> dict[str, Any]:
    """The policy of one audit job's own function (a workers function with its own role)."""
    if job not in AUDIT_JOBS:
        raise ValueError(f"{job!r} is not an audit job; expected one of {', '.join(AUDIT_JOBS)}")
    return iam_policy("workers", job=job)


def policy_file(name: str) -> str:
    """``.chalice`` file name of a group's or a job's policy."""
    return f"policy-{name.replace('_', '-')}.json"


def write_policies() -> list[Path]:
    from chalicelib.groups import GROUPS

    paths = []
    for name, policy in [(g, iam_policy(g)) for g in GROUPS] + [(j, job_policy(j)) for j in AUDIT_JOBS]:
        path = CHALICE_DIR / policy_file(name)
        path.write_text(json.dumps(policy, indent=2) + "\n")
        paths.append(path)
    return paths


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for region in OPEN_REGIONS:
        (out / f"resources-{region}.json").write_text(json.dumps(resources_template(region), indent=2))
        print(out / f"resources-{region}.json")
    for path in write_policies():
        print(path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/infra")
