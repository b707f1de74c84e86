"""Test data for the gateway read side: catalog rows (DatasetAttrs) plus their Parquet parts in the
region's data bucket, written the way the sync worker writes them (internal ``_`` columns included)."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
from chalice.test import Client

from chalicelib.core import aws, clock
from chalicelib.core.ids import new_id
from chalicelib.core.tenancy import memberships, region_of
from chalicelib.gateway import models
from chalicelib.gateway.catalog import lineage
from chalicelib.gateway.catalog import service as catalog
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token
from tests.functional.conftest import Tenant, bearer

SQL_TYPES = {"STRING": "VARCHAR", "INTEGER": "BIGINT", "FLOAT": "DOUBLE", "BOOLEAN": "BOOLEAN",
             "TIMESTAMP": "TIMESTAMP", "DATE": "DATE", "JSON": "VARCHAR"}


def field(name: str, type_: str = "STRING", classification: str = "INTERNAL", policy: str = "ALLOW",
          description: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "nullable": True, "classification": classification, "policy": policy,
            "description": description}


def write_parquet(region: str, key: str, fields: list[dict[str, Any]], rows: list[tuple[Any, ...]]) -> None:
    """Write ``rows`` (values in field order, then an internal ``_synced_at``) as one Parquet object."""
    cols = ", ".join(f'"{f["name"]}" {SQL_TYPES[f["type"]]}' for f in fields) + ", _synced_at VARCHAR"
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({cols})")
    if rows:
        marks = ", ".join("?" for _ in range(len(fields) + 1))
        con.executemany(f"INSERT INTO t VALUES ({marks})", [tuple(r) + ("internal",) for r in rows])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "part.parquet")
        con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
        con.close()
        aws.client("s3", region).upload_file(path, aws.bucket_name("data", region), key)


def put_dataset(workspace_id: str, region: str, name: str, fields: list[dict[str, Any]],
                rows: list[tuple[Any, ...]], *, acl: list[dict[str, str]] | None = None,
                owner: str = "owner@example.com", connector_id: str | None = None, description: str = "",
                synced_ago: float | None = 60.0, parts: int = 1) -> str:
    """Create a dataset row and its Parquet parts; returns the dataset id."""
    ds_id = new_id("ds")
    prefix = f"{workspace_id}/datasets/{ds_id}"
    chunk = max(1, -(-len(rows) // parts)) if rows else 1
    for i in range(parts):
        write_parquet(region, f"{prefix}/part-{i:04d}.parquet", fields, rows[i * chunk:(i + 1) * chunk])
    now = clock.iso()
    models.datasets(region)(
        workspace_id, ds_id, name=name, connector_id=connector_id, owner=owner, description=description,
        classification=catalog.highest([f["classification"] for f in fields]), schema=json.dumps(fields),
        acl=json.dumps(acl if acl is not None else [{"type": "role", "id": "member"}]), data_prefix=prefix,
        row_count=len(rows), last_synced_at=clock.iso(clock.now() - synced_ago) if synced_ago is not None else None,
        created_at=now, updated_at=now,
    ).save()
    catalog.invalidate(workspace_id)
    return ds_id


def put_connector(workspace_id: str, region: str, name: str = "crm", kind: str = "s3",
                  category: str = "STORAGE", status: str = "HEALTHY") -> str:
    conn_id = new_id("conn")
    now = clock.iso()
    models.connectors(region)(workspace_id, conn_id, name=name, kind=kind, category=category, status=status,
                              created_at=now, updated_at=now).save()
    catalog.invalidate(workspace_id)
    return conn_id


@dataclass
class Caller:
    user_id: str
    email: str
    token: str


def token_for(workspace_id: str, role: str, email: str | None = None) -> Caller:
    """A token of a new user who really is ``role`` in the workspace (routes act with the live role)."""
    email = email or f"{role}-{new_id('usr')[-8:].lower()}@example.com"
    user = users.find_by_email(email) or users.create_user(email, email_verified=True)
    memberships(region_of(workspace_id))(workspace_id, user.id, role=role, email=email, joined_at=clock.iso()).save()
    token, _ = issue_access_token(user_id=user.id, email=email, workspace_id=workspace_id, roles=[role],
                                  amr=["pwd", "mfa"])
    return Caller(user.id, email, token)


CUSTOMER_FIELDS = [
    field("id", "INTEGER", "INTERNAL"),
    field("email", "STRING", "PII", "MASK", "contact e-mail"),
    field("ssn", "STRING", "PII", "DENY"),
    field("name", "STRING", "PII", "HASH"),
    field("phone", "STRING", "PII", "REDACT"),
    field("country", "STRING", "PUBLIC"),
]
CUSTOMERS = [(1, "alice@example.com", "111-22-3333", "Alice", "+15550001", "US"),
             (2, "bob@corp.io", "222-33-4444", "Bob", "+15550002", "DE"),
             (3, "al@x.co", None, None, None, "US")]


@dataclass
class World:
    tenant: Tenant
    member: Caller
    viewer: Caller
    connector: str
    customers: str
    orders: str
    payroll: str
    client: Client


def build_world(tenant: Tenant) -> Iterator[World]:
    """Connector crm; datasets customers (PII under every policy), orders, and payroll (Admin-only ACL)."""
    ws, region = tenant.workspace_id, tenant.region
    conn = put_connector(ws, region, "crm")
    customers = put_dataset(ws, region, "customers", CUSTOMER_FIELDS, CUSTOMERS, connector_id=conn,
                            description="CRM customers", owner="crm-team@example.com", parts=2)
    orders = put_dataset(ws, region, "orders", [field("order_id", "INTEGER"), field("customer_id", "INTEGER"),
                                                field("amount", "FLOAT", "CONFIDENTIAL")],
                         [(10, 1, 9.5), (11, 2, 20.0), (12, 1, 1.0)], connector_id=conn, synced_ago=7200)
    payroll = put_dataset(ws, region, "payroll", [field("employee", "STRING", "PII"), field("salary", "FLOAT", "CONFIDENTIAL")],
                          [("alice", 100.0)], acl=[{"type": "role", "id": "admin"}], connector_id=conn,
                          description="secret salaries")
    lineage.record_edges(region, ws, [("connector", conn, "dataset", d, {"target_name": n}) for d, n in
                              ((customers, "customers"), (orders, "orders"), (payroll, "payroll"))])
    with Client(create_app("gateway")) as client:
        yield World(tenant, token_for(ws, "member"), token_for(ws, "viewer"), conn, customers, orders, payroll, client)


def get(w: World, path: str, token: str) -> tuple[int, Any]:
    r = w.client.http.get(path, headers=bearer(token))
    return r.status_code, json.loads(r.body)


def post(w: World, path: str, token: str, body: Any, method: str = "POST") -> tuple[int, Any]:
    r = getattr(w.client.http, method.lower())(path, headers={**bearer(token), "Content-Type": "application/json"},
                                               body=json.dumps(body))
    return r.status_code, json.loads(r.body)


def query(w: World, sql: str, token: str | None = None, **extra: Any) -> tuple[int, Any]:
    return post(w, "/v1/query", token or w.member.token, {"sql": sql, **extra})
