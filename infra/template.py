"""Deployment artefacts generated from the one declaration (``infra/resources.py``).

- ``resources_template(region)``: a CloudFormation template of the region's tables, queues (each with its
  dead-letter queue), buckets and keys; the global region's also holds the global ones.
- ``chalice_config()``: ``.chalice/config.json``, one stage per global group (``identity-prod``) and per
  regional group and open region (``platform-eu-central-1-prod``), from ``chalicelib/groups.py`` and
  ``chalicelib/core/regions.py``.
- ``iam_policy(group, region)``: the policy each stage's functions run with (``.chalice/policy-<group>.json``,
  ``.chalice/policy-<group>-<region>.json``): least privilege on our own resources, a regional stage only
  in its region (plus the global directory), and an explicit deny of every write except PutItem on the
  audit table, so no function can change or delete an audit event. No group may ``kms:Sign`` or write to the
  audit buckets: ``job_policy(job, region)`` (``.chalice/policy-<job>-<region>.json``, set per function in
  the workers stages of ``.chalice/config.json``) gives the export job and the digest job, each alone, its
  key and its bucket; each signing key's key policy also refuses ``kms:Sign`` to every other principal.

``python -m infra.template OUT_DIR`` writes ``resources-<region>.json`` for every open region (and every
disaster-recovery-only region: its ``dr`` key and bucket, ``dr_resources_template``) and refreshes
``.chalice/config.json`` and the policies (a test checks the committed files are current);
``python -m infra.template --stages ENV`` prints the stage names of one environment, ``--region STAGE`` the
region a stage deploys into, and
``--package-args STAGE`` the extra ``chalice package`` arguments of one stage (``make package``):
HTTP stages merge ``.chalice/gateway-responses.json`` (``gateway_responses()``), API Gateway's own
answers (unknown path or method, throttling, too large) as problem+json; the app's stages merge
``.chalice/gateway-responses-app-<env>.json``, where an unknown address is the app's HTML 404 page.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from chalicelib.core.regions import DR_ONLY_REGIONS, DR_REGIONS, OPEN_REGIONS, residency_of_region
from infra.resources import AUDIT_JOBS, BUCKETS, DR_BUCKETS, DR_KEYS, GLOBAL, KEYS, QUEUES, REGIONAL, TABLES

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
    (``<app>-<stage>-<function>``, e.g. ``aiplat-workers-eu-central-1-prod-audit_digest``)."""
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
    key = {"backups": "Backups", "dr": "Dr"}.get(b.name, "Data")
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


def _own_account_only(bucket_logical: str) -> dict[str, Any]:
    """A bucket policy denying every principal of another account: a role a workspace grants (assumed by
    connectors) can never read the platform's buckets, whatever that role's own policy allows."""
    arn = {"Fn::GetAtt": [bucket_logical, "Arn"]}
    return {"Type": "AWS::S3::BucketPolicy", "Properties": {"Bucket": {"Ref": bucket_logical}, "PolicyDocument": {
        "Version": "2012-10-17", "Statement": [{
            "Sid": "OwnAccountOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
            "Resource": [arn, {"Fn::Sub": ["${Arn}/*", {"Arn": arn}]}],
            "Condition": {"StringNotEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}}}]}}}


def dr_resources_template(region: str) -> dict[str, Any]:
    """A disaster-recovery-only region: its ``dr`` key and bucket, nothing that serves requests."""
    res: dict[str, Any] = {}
    for k in DR_KEYS:
        res[_logical(k.name, "key")] = _key(k)
        res[_logical(k.name, "alias")] = {"Type": "AWS::KMS::Alias", "Properties": {
            "AliasName": f"alias/{PREFIX}-{k.name}", "TargetKeyId": {"Ref": _logical(k.name, "key")}}}
    for b in DR_BUCKETS:
        res[_logical(b.name, "bucket")] = _bucket(b, region)
        res[_logical(b.name, "bucket", "policy")] = _own_account_only(_logical(b.name, "bucket"))
    return {"AWSTemplateFormatVersion": "2010-09-09",
            "Description": f"aiplat disaster-recovery resources for {region} (generated from infra/resources.py)",
            "Resources": res}


ALARM_TOPIC = "OperatorAlarmsTopic"  # operators subscribe (e-mail, paging) to the alarms of a region


def dead_letter_alarm(queue: str, dlq_logical: str) -> dict[str, Any]:
    """An alarm as soon as a queue's dead-letter queue holds a message (a job that failed every retry),
    sent to the region's operator topic; back to OK when the queue is empty again. Operators list and read
    the messages with ``make dead-letters`` (docs/operations.md)."""
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "AlarmName": f"{PREFIX}-{queue}-dlq-not-empty",
        "AlarmDescription": f"Messages of {queue} failed every retry and wait in {PREFIX}-{queue}-dlq "
                            "(make dead-letters; docs/operations.md).",
        "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_logical, "QueueName"]}}],
        "Statistic": "Maximum", "Period": 60, "EvaluationPeriods": 1, "Threshold": 0,
        "ComparisonOperator": "GreaterThanThreshold", "TreatMissingData": "notBreaching",
        "AlarmActions": [{"Ref": ALARM_TOPIC}], "OKActions": [{"Ref": ALARM_TOPIC}]}}


def resources_template(region: str) -> dict[str, Any]:
    """The CloudFormation template of everything declared for ``region``."""
    if region in DR_ONLY_REGIONS:
        return dr_resources_template(region)
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
        res[_logical(q.name, "dlq", "alarm")] = dead_letter_alarm(q.name, dlq)
    # not KMS-encrypted: CloudWatch could publish only with a key policy naming it, and an alarm carries
    # names and counts, never content
    res[ALARM_TOPIC] = {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": f"{PREFIX}-operator-alarms"}}
    for b in BUCKETS:
        res[_logical(b.name, "bucket")] = _bucket(b, region)
        res[_logical(b.name, "bucket", "policy")] = _own_account_only(_logical(b.name, "bucket"))
    return {"AWSTemplateFormatVersion": "2010-09-09",
            "Description": f"aiplat resources for {region} (generated from infra/resources.py)",
            "Resources": res}


# Regional records a global route writes in another region (docs/residency.md, "What crosses"): the new
# member's membership, the invitation's status, the audit event of the change (with its personal values,
# ``audit_personal``), and the idempotency record of workspace creation. The global region's platform
# function is the only one granted these.
CROSSING_TABLES = ("memberships", "invitations", "audit_events", "audit_personal", "idempotency")

STAGE_ENVS = ("dev", "prod")
# Public addresses per environment (API Gateway custom domains mapped to each stage); set your domain here.
DOMAINS = {"dev": "dev.aiplat.example", "prod": "aiplat.example"}
# Memory and timeout per group (the workers figure bounds a sync: tests/functional/gateway/test_sync_memory.py).
GROUP_SETTINGS: dict[str, dict[str, Any]] = {
    "identity": {"lambda_memory_size": 512, "lambda_timeout": 30},
    "platform": {"lambda_memory_size": 512, "lambda_timeout": 30},
    "gateway": {"lambda_memory_size": 1024, "lambda_timeout": 30},
    "app": {"lambda_memory_size": 512, "lambda_timeout": 30},
    "workers": {"lambda_memory_size": 512, "lambda_timeout": 300},
}


def stage_name(group: str, env: str, region: str | None = None) -> str:
    """``identity-prod`` for a global group, ``platform-eu-central-1-prod`` for a regional one."""
    return f"{group}-{region}-{env}" if region else f"{group}-{env}"


def stages(env: str | None = None) -> list[tuple[str, str, str | None]]:
    """Every deployment as ``(stage, group, region)``: global groups once, regional groups per open region."""
    from chalicelib.groups import GROUPS, REGIONAL_GROUPS

    out = []
    for e in ([env] if env else STAGE_ENVS):
        for group in GROUPS:
            for region in (OPEN_REGIONS if group in REGIONAL_GROUPS else (None,)):
                out.append((stage_name(group, e, region), group, region))
    return out


def public_urls(env: str) -> dict[str, Any]:
    """The addresses clients use: global ones, and each region's platform API and gateway."""
    domain = DOMAINS[env]
    return {"auth_url": f"https://auth.{domain}", "app_url": f"https://app.{domain}",
            "regions": {r: {"base_url": f"https://api.{r}.{domain}", "gateway_url": f"https://gateway.{r}.{domain}"}
                        for r in OPEN_REGIONS}}


def policy_file(group: str, region: str | None) -> str:
    return f"policy-{group}-{region}.json" if region else f"policy-{group}.json"


def job_policy_file(job: str, region: str | None) -> str:
    """``.chalice`` file of an audit job's own policy (``audit_digest`` -> ``policy-audit-digest-<region>.json``)."""
    return policy_file(job.replace("_", "-"), region)


def chalice_config() -> dict[str, Any]:
    """``.chalice/config.json``: one stage per global group and per (regional group, open region). A regional
    stage's environment pins its region (``REGION``) and names only its own addresses as ``BASE_URL`` and
    ``GATEWAY_URL``; ``REGIONAL_URLS`` (public addresses only) lets it point a misdirected caller home."""
    out: dict[str, Any] = {}
    for stage, group, region in stages():
        env = stage.rsplit("-", 1)[1]
        urls = public_urls(env)
        home = urls["regions"][region or GLOBAL_REGION]
        variables = {"ROUTE_GROUP": group, "STAGE": env, **({"REGION": region} if region else {}),
                     "GLOBAL_REGION": GLOBAL_REGION, "AUTH_URL": urls["auth_url"], "APP_URL": urls["app_url"],
                     "BASE_URL": home["base_url"], "GATEWAY_URL": home["gateway_url"],
                     "REGIONAL_URLS": json.dumps(urls["regions"], sort_keys=True, separators=(",", ":"))}
        config: dict[str, Any] = {"environment_variables": variables, "api_gateway_stage": "api",
                                  **GROUP_SETTINGS[group], "autogen_policy": False,
                                  "iam_policy_file": policy_file(group, region)}
        if env == "prod":
            config["reserved_concurrency"] = 100
        if group == "workers":  # each audit job runs with its own role (the only one that may sign)
            config["lambda_functions"] = {job: {"iam_policy_file": job_policy_file(job, region)} for job in AUDIT_JOBS}
        out[stage] = config
    return {"version": "2.0", "app_name": PREFIX, "automatic_layer": True, "stages": out}


def _region_arns(region: str, tables: list[str]) -> list[str]:
    arns = [f"arn:aws:dynamodb:{region}:*:table/{PREFIX}-{t}" for t in tables]
    return arns + [a + "/index/*" for a in arns]


def iam_policy(group: str, region: str | None = None, *, job: str | None = None) -> dict[str, Any]:
    """Least-privilege policy for a route group's functions. A regional deployment (``region``) reaches its
    own region's resources and the global directory only; a global one reaches the directory and, for the
    lookups identity needs (memberships), every region. ``job``: one audit job's own workers function."""
    audit_table = f"arn:aws:dynamodb:*:*:table/{PREFIX}-audit_events"
    own_keys = [f"alias/{PREFIX}-{k.name}" for k in KEYS if job and k.signer == job]
    guarded = [b for b in BUCKETS if b.writer]
    global_tables = [t.name for t in TABLES if t.scope == GLOBAL]
    regional_tables = [t.name for t in TABLES if t.scope == REGIONAL]
    if region:
        table_arns = _region_arns(region, regional_tables) + _region_arns(GLOBAL_REGION, global_tables)
        if group == "platform" and region == GLOBAL_REGION:  # doubles as the global deployment
            table_arns += [a for r in OPEN_REGIONS if r != region for a in _region_arns(r, list(CROSSING_TABLES))]
        regions = sorted({region, GLOBAL_REGION})
    else:
        table_arns = _region_arns(GLOBAL_REGION, global_tables) + [
            a for r in OPEN_REGIONS for a in _region_arns(r, regional_tables)]
        regions = sorted(OPEN_REGIONS)
    home = region or "*"
    statements: list[dict[str, Any]] = [
        {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": f"arn:aws:logs:{home}:*:*"},
        {"Sid": "Tables", "Effect": "Allow",
         "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                    "dynamodb:Query", "dynamodb:Scan", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem",
                    "dynamodb:ConditionCheckItem", "dynamodb:DescribeTable"],
         "Resource": table_arns},
        {"Sid": "AuditIsAppendOnly", "Effect": "Deny",
         "Action": ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:PartiQLInsert",
                    "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete", "dynamodb:DeleteTable", "dynamodb:UpdateTable",
                    "dynamodb:RestoreTableFromBackup", "dynamodb:RestoreTableToPointInTime", "dynamodb:ImportTable"],
         "Resource": audit_table},
        # PutItem stays allowed: IAM has no condition key for a request's ConditionExpression (DynamoDB's
        # documented keys are LeadingKeys, Attributes, Select, ReturnValues, ReturnConsumedCapacity,
        # EnclosingOperation, FullTableScan), so "only with attribute_not_exists" cannot be required by
        # IAM. An overwrite is detected instead: the signed chain-head digests and the audit table's change
        # stream (docs/security.md).
        {"Sid": "Keys", "Effect": "Allow",
         "Action": ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:Verify", "kms:GenerateMac",
                    "kms:DescribeKey", "kms:GetPublicKey"],
         "Resource": [f"arn:aws:kms:{r}:*:key/*" for r in regions],
         "Condition": {"ForAnyValue:StringLike": {"kms:ResourceAliases": f"alias/{PREFIX}-*"}}},
    ]
    if job == "audit_digest":  # reads the audit table's change stream for overwrites and deletes
        statements.append({"Sid": "AuditChangeStream", "Effect": "Allow",
                           "Action": ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
                           "Resource": f"arn:aws:dynamodb:{home}:*:table/{PREFIX}-audit_events/stream/*"})
    if own_keys:
        statements.append({"Sid": "SignWithTheJobsOwnKey", "Effect": "Allow", "Action": ["kms:Sign"],
                           "Resource": [f"arn:aws:kms:{r}:*:key/*" for r in regions],
                           "Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": own_keys}}})
        statements.append({"Sid": "SignWithNoOtherKey", "Effect": "Deny", "Action": ["kms:Sign"], "Resource": "*",
                           "Condition": {"ForAllValues:StringNotEquals": {"kms:ResourceAliases": own_keys}}})
    else:
        statements.append({"Sid": "OnlyAuditJobsSign", "Effect": "Deny", "Action": ["kms:Sign"], "Resource": "*"})
    statements += [
        {"Sid": "Queues", "Effect": "Allow",
         "Action": ["sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes"]
         + (["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"] if group == "workers" else []),
         "Resource": f"arn:aws:sqs:{home}:*:{PREFIX}-*"},
        {"Sid": "Objects", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket",
                                                         "s3:PutObjectRetention", "s3:GetObjectRetention"],
         "Resource": [f"arn:aws:s3:::{PREFIX}-*-{home}*", f"arn:aws:s3:::{PREFIX}-*-{home}*/*"]},
        {"Sid": "AuditArchiveIsWriteOnce", "Effect": "Deny",
         "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:BypassGovernanceRetention", "s3:PutBucketObjectLockConfiguration",
                    "s3:PutBucketPolicy", "s3:PutLifecycleConfiguration", "s3:DeleteBucket"],
         "Resource": [r for b in guarded for r in (f"arn:aws:s3:::{PREFIX}-{b.name}-*", f"arn:aws:s3:::{PREFIX}-{b.name}-*/*")]},
    ]
    if group == "platform" and region == GLOBAL_REGION:  # GET /v1/support/dead-letters: counts of every region
        statements.append({"Sid": "DeadLetterCounts", "Effect": "Allow",
                           "Action": ["sqs:GetQueueUrl", "sqs:GetQueueAttributes"],
                           "Resource": [f"arn:aws:sqs:{r}:*:{PREFIX}-*-dlq" for r in OPEN_REGIONS]})
        statements.append({"Sid": "ListQueues", "Effect": "Allow", "Action": ["sqs:ListQueues"],
                           "Resource": [f"arn:aws:sqs:{r}:*:*" for r in OPEN_REGIONS]})
    others = [b for b in guarded if b.writer != job]
    if others:
        statements.append({"Sid": "AuditBucketsWrittenOnlyByTheirJob", "Effect": "Deny",
                           "Action": ["s3:PutObject", "s3:PutObjectRetention"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-{b.name}-*/*" for b in others]})
    if group in ("gateway", "workers") and job is None:  # connectors: snapshots pruned; sources read only through roles
        statements.append({"Sid": "GatewayDataLifecycle", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-data-{home}*/*", f"arn:aws:s3:::{PREFIX}-documents-{home}*/*"]})
        # No read permission on any bucket or table but our own: a connector reads as the role its
        # workspace grants (gateway/ingest/source_access.py), with the workspace's ExternalId.
        statements.append({"Sid": "ConnectorRoles", "Effect": "Allow", "Action": "sts:AssumeRole",
                           "Resource": "arn:aws:iam::*:role/*",
                           "Condition": {"StringLike": {"sts:ExternalId": f"{PREFIX}-ws_*"}}})
        statements.append({"Sid": "NoRoleOfOurOwnAccount", "Effect": "Deny", "Action": "sts:AssumeRole",
                           "Resource": "*",
                           "Condition": {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}})
    if group in ("gateway", "workers", "platform"):  # knowledge: an index build replaces the previous one
        statements.append({"Sid": "KnowledgeIndexLifecycle", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-knowledge-{home}*/*"]})
    if group in ("platform", "workers"):  # chat and agents call Bedrock in their own region only
        statements.append({"Sid": "BedrockInRegion", "Effect": "Allow",
                           "Action": ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
                           "Resource": f"arn:aws:bedrock:{home}::foundation-model/*"})
    if group == "platform":  # a two-person restore puts a workspace's objects back as they were at its backup
        statements.append({"Sid": "RestoreContent", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-{b}-{home}*/*" for b in ("data", "documents")]})
    if group == "workers":  # backups past 35 days are swept (the lifecycle rule expires them too)
        statements.append({"Sid": "BackupRotation", "Effect": "Allow", "Action": ["s3:DeleteObject"],
                           "Resource": [f"arn:aws:s3:::{PREFIX}-backups-{home}*/*"]})
    if group == "workers" and job is None and region:  # the DR copy, in this residency's declared secondaries
        secondaries = DR_REGIONS.get(residency_of_region(region), ())
        statements.append({"Sid": "DisasterRecoveryCopy", "Effect": "Allow",
                           "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"],
                           "Resource": [r for dr in secondaries for r in (f"arn:aws:s3:::{PREFIX}-dr-{dr}*",
                                                                          f"arn:aws:s3:::{PREFIX}-dr-{dr}*/*")]})
        statements.append({"Sid": "DisasterRecoveryKey", "Effect": "Allow",
                           "Action": ["kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt", "kms:DescribeKey"],
                           "Resource": [f"arn:aws:kms:{dr}:*:key/*" for dr in secondaries],
                           "Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": f"alias/{PREFIX}-dr"}}})
    if group in ("identity", "platform"):
        statements.append({"Sid": "Mail", "Effect": "Allow", "Action": ["ses:SendEmail"], "Resource": "*",
                           **({"Condition": {"StringEquals": {"aws:RequestedRegion": region}}} if region else {})})
    return {"Version": "2012-10-17", "Statement": statements}


# API Gateway answers these itself, before any function runs: each becomes an RFC 9457 problem with the
# request ID as correlation ID, and never carries API Gateway's own message (which can echo the
# Authorization header). An unknown path or method (MISSING_AUTHENTICATION_TOKEN, and the signature errors
# a non-SigV4 Authorization header provokes there) is 404, like ``core.http.api.UNKNOWN_ROUTE`` locally.
# (response type, status or None to keep API Gateway's, code, detail)
GATEWAY_RESPONSES: tuple[tuple[str, int | None, str, str], ...] = (
    ("MISSING_AUTHENTICATION_TOKEN", 404, "not_found", "No route serves this method and path; see the OpenAPI document."),
    ("INVALID_SIGNATURE", 404, "not_found", "No route serves this method and path; see the OpenAPI document."),
    ("RESOURCE_NOT_FOUND", 404, "not_found", "No route serves this method and path; see the OpenAPI document."),
    ("REQUEST_TOO_LARGE", 413, "payload_too_large", "The request body is too large."),
    ("UNSUPPORTED_MEDIA_TYPE", 415, "unsupported_media_type", "This Content-Type is not accepted here."),
    ("THROTTLED", 429, "rate_limited", "Too many requests; retry later."),
    ("INTEGRATION_TIMEOUT", 504, "timeout", "The request took too long to answer."),
    ("DEFAULT_4XX", None, "bad_request", "The request was refused before reaching the service."),
    ("DEFAULT_5XX", None, "internal_error", "An internal error occurred."),
)
GATEWAY_RESPONSES_FILE = "gateway-responses.json"
# The app group serves pages: an address no route serves (deeper than ``pages.MAX_DEPTH`` segments) gets
# the app's HTML 404 page there instead of the problem, under a Content-Security-Policy without quoted
# keywords (``pages.quote_free_csp``), since API Gateway wraps a static header value in single quotes.
APP_NOT_FOUND_TYPES = ("MISSING_AUTHENTICATION_TOKEN", "INVALID_SIGNATURE", "RESOURCE_NOT_FOUND")
API_ORIGIN = "https://${RestAPI}.execute-api.${AWS::Region}.${AWS::URLSuffix}"  # the API's own domain (Fn::Sub)


def gateway_responses_file(group: str, env: str) -> str:
    """``.chalice`` file of an HTTP group's gateway responses: one for the JSON APIs, one per
    environment for the app (its page CSP names the environment's app address)."""
    return f"gateway-responses-app-{env}.json" if group == "app" else GATEWAY_RESPONSES_FILE


def _app_not_found_response(response_type: str, env: str) -> dict[str, Any]:
    """The app's 404 page as API Gateway's own answer: the page and headers ``deep_not_found_page``
    gives locally, its CSP naming the app's public origin and the API's own execute-api domain."""
    from chalicelib.webapp.pages import deep_not_found_page

    status, headers, body = deep_not_found_page([public_urls(env)["app_url"], API_ORIGIN])
    params: dict[str, Any] = {f"gatewayresponse.header.{name}": f"'{value}'" for name, value in headers.items()
                              if name != "Content-Security-Policy"}
    params["gatewayresponse.header.Content-Security-Policy"] = {"Fn::Sub": f"'{headers['Content-Security-Policy']}'"}
    params["gatewayresponse.header.X-Correlation-Id"] = "context.requestId"
    return {"RestApiId": {"Ref": "RestAPI"}, "ResponseType": response_type, "StatusCode": str(status),
            "ResponseParameters": params,
            "ResponseTemplates": {ct: body for ct in ("text/html", "application/json")}}


def gateway_responses(group: str | None = None, env: str | None = None) -> dict[str, Any]:
    """A template fragment merged into every HTTP stage by ``chalice package --merge-template`` (``make
    package``): API Gateway's own answers as problem+json with ``X-Correlation-Id``; for the app group
    (``group="app"`` and its ``env``) an unknown address is the app's HTML 404 page instead."""
    from chalicelib.core.http.errors import PROBLEM_CONTENT_TYPE, ApiError

    resources: dict[str, Any] = {}
    for response_type, status, code, detail in GATEWAY_RESPONSES:
        name = "GatewayResponse" + _logical(response_type.lower())
        if group == "app" and env and response_type in APP_NOT_FOUND_TYPES:
            resources[name] = {"Type": "AWS::ApiGateway::GatewayResponse",
                               "Properties": _app_not_found_response(response_type, env)}
            continue
        problem = ApiError(status or 400, code, detail).to_problem("$context.requestId")
        if status is None:  # the status is API Gateway's own; the body does not guess it
            problem.pop("status")
            problem["title"] = "Error"
        props: dict[str, Any] = {
            "RestApiId": {"Ref": "RestAPI"},
            "ResponseType": response_type,
            "ResponseParameters": {
                "gatewayresponse.header.Content-Type": f"'{PROBLEM_CONTENT_TYPE}'",
                "gatewayresponse.header.Cache-Control": "'no-store'",
                "gatewayresponse.header.X-Correlation-Id": "context.requestId",
            },
            "ResponseTemplates": {ct: json.dumps(problem) for ct in ("application/json", PROBLEM_CONTENT_TYPE)},
        }
        if status is not None:
            props["StatusCode"] = str(status)
        resources[name] = {"Type": "AWS::ApiGateway::GatewayResponse", "Properties": props}
    return {"Resources": resources}


def package_args(stage: str) -> str:
    """Extra ``chalice package`` arguments of a stage: HTTP stages merge their gateway responses."""
    from chalicelib.groups import HTTP_GROUPS

    group = next(g for s, g, _ in stages() if s == stage)
    env = stage.rsplit("-", 1)[1]
    return f"--merge-template .chalice/{gateway_responses_file(group, env)}" if group in HTTP_GROUPS else ""


def write_deployment_config() -> list[Path]:
    """Write ``.chalice/config.json`` and every stage's policy (a test checks the committed ones are current)."""
    config = chalice_config()
    paths = [CHALICE_DIR / "config.json"]
    paths[0].write_text(json.dumps(config, indent=2) + "\n")
    for _, group, region in stages(STAGE_ENVS[0]):
        path = CHALICE_DIR / policy_file(group, region)
        path.write_text(json.dumps(iam_policy(group, region), indent=2) + "\n")
        paths.append(path)
        for job in AUDIT_JOBS if group == "workers" else ():
            path = CHALICE_DIR / job_policy_file(job, region)
            path.write_text(json.dumps(job_policy(job, region), indent=2) + "\n")
            paths.append(path)
    paths.append(CHALICE_DIR / GATEWAY_RESPONSES_FILE)
    paths[-1].write_text(json.dumps(gateway_responses(), indent=2) + "\n")
    for env in STAGE_ENVS:
        paths.append(CHALICE_DIR / gateway_responses_file("app", env))
        paths[-1].write_text(json.dumps(gateway_responses("app", env), indent=2) + "\n")
    return paths


def job_policy(job: str, region: str | None = None) -> dict[str, Any]:
    """The policy of one audit job's own function (a workers function with its own role)."""
    if job not in AUDIT_JOBS:
        raise ValueError(f"{job!r} is not an audit job; expected one of {', '.join(AUDIT_JOBS)}")
    return iam_policy("workers", region, job=job)


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for region in OPEN_REGIONS + DR_ONLY_REGIONS:
        (out / f"resources-{region}.json").write_text(json.dumps(resources_template(region), indent=2))
        print(out / f"resources-{region}.json")
    for path in write_deployment_config():
        print(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--package-args"]:
        print(package_args(sys.argv[2]))
    elif sys.argv[1:2] == ["--group"]:  # the route group a stage deploys (its requirements and layer)
        print(next(g for s, g, _ in stages() if s == sys.argv[2]))
    elif sys.argv[1:2] == ["--region"]:  # the region a stage deploys into (global groups: the global region)
        print(next(r or GLOBAL_REGION for s, _, r in stages() if s == sys.argv[2]))
    elif sys.argv[1:2] == ["--stages"]:
        print(" ".join(stage for stage, _, _ in stages(sys.argv[2] if len(sys.argv) > 2 else "dev")))
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "build/infra")
