"""Demo data for ``make run``: two ``s3`` connectors over small CSVs (customers with PII, and their
orders) that the seed uploads itself into a demo source bucket of the workspace's region, each synced
at once by calling the worker directly.

The demo source lives as a customer's would: in an AWS account of its own (``DEMO_ACCOUNT``, in the
emulator only), with a role (``DEMO_ROLE``-<region>) whose trust policy names the platform and requires the demo
workspace's ExternalId, and which may read only the demo bucket. The connectors name that role, so the
sync reads exactly as it would in production (``gateway/ingest/source_access.py``). The customers dataset ends with PII fields under MASK and
HASH policies, and lineage connector -> dataset. Idempotent: a second call changes nothing.
"""
from __future__ import annotations

import json
import random
from typing import Any

from botocore.exceptions import ClientError
from pynamodb.exceptions import DoesNotExist

from chalicelib.core import aws
from chalicelib.core.authz import Principal
from chalicelib.core.config import settings
from chalicelib.core.tenancy import workspace_scope
from chalicelib.gateway import models
from chalicelib.gateway.ingest import connectors, source_access, sync, sync_worker
from chalicelib.identity import users

FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Tim", "Radia", "Linus"]
LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Hamilton", "Berners-Lee",
        "Perlman", "Torvalds"]
CITIES = [("Berlin", "DE"), ("Paris", "FR"), ("Austin", "US"), ("Boston", "US"), ("Lisbon", "PT"), ("Toronto", "CA")]
# each region's demo workspace gets its own data: EU customers live in EU cities
REGION_CITIES = {"eu-central-1": [("Berlin", "DE"), ("Paris", "FR"), ("Lisbon", "PT"), ("Vienna", "AT"),
                                  ("Madrid", "ES"), ("Warsaw", "PL")]}
PLANS = ["free", "team", "enterprise"]
N_CUSTOMERS = 24
DEMO_ACCOUNT = "210987654321"  # the demo customer's account (emulator only)
DEMO_ROLE = "demo-source-reader"


def customers_csv(region: str = "us-east-1") -> str:
    rnd = random.Random(42 if region == "us-east-1" else 4242)
    cities = REGION_CITIES.get(region, CITIES)
    phone = "+1 555 01" if region == "us-east-1" else "+49 30 5550"
    lines = ["customer_id,full_name,email,phone,city,country,plan,signup_date,lifetime_value"]
    for i in range(1, N_CUSTOMERS + 1):
        first, last = FIRST[(i - 1) % len(FIRST)], LAST[(i * 5) % len(LAST)]
        city, country = cities[i % len(cities)]
        lines.append(f"{i},{first} {last},{first.lower()}.{last.lower()}@example.com,{phone}{i:02d},{city},"
                     f"{country},{PLANS[i % 3]},2024-{(i % 12) + 1:02d}-{(i % 27) + 1:02d},{rnd.randint(0, 50000) / 10}")
    return "\n".join(lines) + "\n"


def orders_csv() -> str:
    rnd = random.Random(7)
    lines = ["order_id,customer_id,amount,status,ordered_at"]
    for i in range(1, 3 * N_CUSTOMERS + 1):
        lines.append(f"{1000 + i},{rnd.randint(1, N_CUSTOMERS)},{rnd.randint(500, 90000) / 100},"
                     f"{rnd.choice(['paid', 'refunded', 'open'])},2025-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T"
                     f"{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00Z")
    return "\n".join(lines) + "\n"


def _as_demo_customer(service: str, region: str) -> Any:
    """A client acting in the demo customer's account (the emulator answers any role ARN)."""
    import boto3  # noqa: PLC0415

    if settings().stage not in ("local", "test"):
        raise RuntimeError("the demo source is created in the emulator only")
    creds = aws.client("sts", region).assume_role(RoleArn=f"arn:aws:iam::{DEMO_ACCOUNT}:role/demo-owner",
                                                  RoleSessionName="demo-owner")["Credentials"]
    return boto3.client(service, region_name=region, aws_access_key_id=creds["AccessKeyId"],
                        aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])


def _grant_role(workspace_id: str, region: str, bucket: str) -> str:
    """The demo customer's role for the platform: trusted with the workspace's ExternalId, reading the bucket."""
    iam = _as_demo_customer("iam", region)
    trust = source_access.setup(workspace_id)["trust_policy"]
    role = f"{DEMO_ROLE}-{region}"  # one per demo workspace (one per region): its trust names that workspace
    try:
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
    except ClientError as err:
        if err.response["Error"]["Code"] != "EntityAlreadyExists":
            raise
        iam.update_assume_role_policy(RoleName=role, PolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName=role, PolicyName="read-demo-source", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}]}))
    return f"arn:aws:iam::{DEMO_ACCOUNT}:role/{role}"


def _bucket(workspace_id: str, region: str) -> str:
    name = f"demo-source-{workspace_id[-10:].lower()}-{region}"
    s3 = _as_demo_customer("s3", region)
    args: dict[str, Any] = {"Bucket": name}
    if region != "us-east-1":
        args["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**args)
    except ClientError as err:
        if err.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    return name


def _set_policies(region: str, workspace_id: str, dataset_id: str, policies: dict[str, str]) -> None:
    ds = models.datasets(region).get(workspace_id, dataset_id, consistent_read=True)
    schema = json.loads(ds.schema)
    for field in schema:
        if field["name"] in policies:
            field["policy"] = policies[field["name"]]
    ds.update(actions=[models.DatasetAttrs.schema.set(json.dumps(schema))],
              condition=models.DatasetAttrs.schema == ds.schema)


def seed(workspace_id: str, region: str, admin_email: str,
         on_changed: sync_worker.OnChanged | None = None) -> dict[str, Any]:
    """Create and sync the demo connectors (see the module docstring); returns what exists. ``on_changed``
    is the sync worker's reaction to changed data (the composition root's ``index_changed_dataset``)."""

    user = users.find_by_email(admin_email)
    principal = Principal(user_id=user.id if user else "usr_demo", workspace_id=workspace_id, roles=("admin",),
                          email=admin_email, amr=("seed",), token_id="seed")
    scope = workspace_scope(workspace_id, principal)
    existing = {c.dataset_name: c for c in models.connectors(region).query(workspace_id)}
    bucket = _bucket(workspace_id, region)
    role_arn = _grant_role(workspace_id, region, bucket)
    out: dict[str, Any] = {"bucket": bucket, "role_arn": role_arn, "external_id": source_access.external_id(workspace_id),
                           "connectors": [], "datasets": [], "sync_runs": []}
    specs = [("Demo CRM customers", "customers", "crm/customers/", customers_csv(region), ["customer_id"],
              {"email": "MASK", "phone": "HASH", "full_name": "MASK"}),
             ("Demo shop orders", "orders", "shop/orders/", orders_csv(), ["order_id"], {})]
    for name, ds_name, prefix, body, pk, policies in specs:
        conn = existing.get(ds_name)
        if conn is None:
            _as_demo_customer("s3", region).put_object(Bucket=bucket, Key=f"{prefix}{ds_name}.csv", Body=body.encode())
            created = connectors.create_connector(scope, {
                "name": name, "kind": "s3", "dataset_name": ds_name,
                "description": f"Demo data: {ds_name} (synthetic).",
                "config": {"role_arn": role_arn, "bucket": bucket, "prefix": prefix, "format": "csv", "primary_key": pk}}, None)
            conn = models.connectors(region).get(workspace_id, created["id"])
        synced = False
        try:
            synced = bool(models.datasets(region).get(workspace_id, conn.dataset_id).data_prefix)
        except DoesNotExist:
            pass
        if not synced:
            run = sync.request_sync(scope, conn.id, mode="FULL_REFRESH", idempotency_key=f"demo-seed-{conn.id}")
            sync_worker.run_sync(workspace_id, run["id"], attempt=1, on_changed=on_changed)
            out["sync_runs"].append(sync.get_sync_run(scope, run["id"]))
            if policies:
                _set_policies(region, workspace_id, conn.dataset_id, policies)
        out["connectors"].append(conn.id)
        out["datasets"].append({"id": conn.dataset_id, "name": ds_name})
    return out
