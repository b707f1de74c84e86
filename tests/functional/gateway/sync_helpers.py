"""Helpers for the ingestion tests: tokens per role, a Lambda-shaped SQS drain, source fixtures."""
from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
from chalice.test import Client

from chalicelib.core import aws, clock
from chalicelib.core.ids import new_id
from chalicelib.core.tenancy import memberships
from chalicelib.gateway import models, storage
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token
from chalicelib.workers.jobs import sync_jobs as handle  # the Lambda handler: the worker and its reactions
from tests.functional.conftest import Tenant, bearer

QUEUE = "sync-jobs"


def token_for(tenant: Tenant, role: str) -> str:
    """A token of a user who really is ``role`` in the tenant's workspace (routes act with the live role)."""
    if role == "admin":
        return tenant.token
    email = f"{role}-{new_id('usr')[-8:].lower()}@example.com"
    user = users.create_user(email, email_verified=True)
    memberships(tenant.region)(tenant.workspace_id, user.id, role=role, email=email, joined_at=clock.iso()).save()
    token, _ = issue_access_token(user_id=user.id, email=email, workspace_id=tenant.workspace_id, roles=[role],
                                  amr=["pwd", "otp", "mfa"])
    return token


def client() -> Client:
    return Client(create_app("gateway"))


def call(c: Client, method: str, path: str, token: str, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    h = {**bearer(token), "Content-Type": "application/json", **(headers or {})}
    kwargs: dict[str, Any] = {"headers": h}
    if body is not None:
        kwargs["body"] = json.dumps(body) if not isinstance(body, (str, bytes)) else body
    r = getattr(c.http, method.lower())(path, **kwargs)
    return r.status_code, (json.loads(r.body) if r.body else None)


def receive(region: str, queue: str = QUEUE, wait: int = 0) -> list[dict[str, Any]]:
    sqs = aws.client("sqs", region)
    got = sqs.receive_message(QueueUrl=aws.queue_url(queue, region), MaxNumberOfMessages=10, WaitTimeSeconds=wait,
                              AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
    return got


def lambda_record(msg: dict[str, Any], region: str) -> dict[str, Any]:
    """A received SQS message in the Lambda event shape."""
    return {
        "messageId": msg["MessageId"], "receiptHandle": msg["ReceiptHandle"], "body": msg["Body"],
        "attributes": msg.get("Attributes", {}),
        "messageAttributes": {k: {"stringValue": v.get("StringValue"), "dataType": v.get("DataType")}
                              for k, v in msg.get("MessageAttributes", {}).items()},
        "eventSource": "aws:sqs", "awsRegion": region,
        "eventSourceARN": f"arn:aws:sqs:{region}:123456789012:{aws.queue_name(QUEUE)}",
    }


def drain(region: str, *, max_rounds: int = 20) -> list[dict[str, Any]]:
    """Deliver queued sync messages to the worker one by one (as Lambda with batch_size=1 would),
    acking successes and making failures visible again at once; returns the handler results."""
    sqs = aws.client("sqs", region)
    url = aws.queue_url(QUEUE, region)
    results = []
    for _ in range(max_rounds):
        msgs = receive(region)
        if not msgs:
            break
        for msg in msgs:
            out = handle({"Records": [lambda_record(msg, region)]})
            results.append(out)
            if out["batchItemFailures"]:
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"], VisibilityTimeout=0)
            else:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    return results


# The workspaces' own AWS account, where their sources live and the role they grant the platform. In moto,
# AssumeRole answers credentials of the role's account, so these sources are not the platform's.
SOURCE_ACCOUNT = "111122223333"
READER_ROLE = f"arn:aws:iam::{SOURCE_ACCOUNT}:role/gateway-reader"


def source_client(service: str, region: str, account: str = SOURCE_ACCOUNT) -> Any:
    """A client acting in a workspace's own account (as its owner would, setting up a source)."""
    creds = aws.client("sts", region).assume_role(RoleArn=f"arn:aws:iam::{account}:role/owner",
                                                  RoleSessionName="source-owner")["Credentials"]
    return boto3.client(service, region_name=region, aws_access_key_id=creds["AccessKeyId"],
                        aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])


def new_bucket(region: str, account: str = SOURCE_ACCOUNT) -> str:
    """A fresh source bucket in the workspace's account (moto keeps buckets between tests; names never repeat)."""
    bucket = f"src-{uuid.uuid4().hex[:16]}"
    args: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        args["CreateBucketConfiguration"] = {"LocationConstraint": region}
    source_client("s3", region, account).create_bucket(**args)
    return bucket


def put(region: str, bucket: str, key: str, data: str | bytes, account: str = SOURCE_ACCOUNT) -> None:
    source_client("s3", region, account).put_object(Bucket=bucket, Key=key,
                                                    Body=data.encode() if isinstance(data, str) else data)


def dataset(tenant: Tenant, dataset_id: str) -> models.DatasetAttrs:
    return models.datasets(tenant.region).get(tenant.workspace_id, dataset_id, consistent_read=True)


def rows_of(tenant: Tenant, dataset_id: str) -> tuple[list[str], list[tuple]]:
    ds = dataset(tenant, dataset_id)
    assert ds.data_prefix
    return storage.read_rows(tenant.region, ds.data_prefix)
