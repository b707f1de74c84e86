"""A workspace with knowledge to chat about: a handbook (readable by members), board minutes (Admins
only) and people (an e-mail under MASK), each indexed as a sync would index it."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

from chalice.test import Client

from chalicelib.core import aws
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.knowledge import indexer
from chalicelib.llm.registry import registry
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import Caller, field, token_for
from tests.functional.knowledge.helpers import put_keyed

SECRET_TEXT = "The board decided that vacation days per year drop to ten for every employee."
MASKED_EMAIL = "zelda.quark@example.com"


@dataclass
class World:
    tenant: Tenant
    member: Caller
    viewer: Caller
    handbook: str
    board: str
    people: str


def build(tenant: Tenant) -> World:
    ws, region = tenant.workspace_id, tenant.region
    handbook = put_keyed(ws, region, "handbook", [field("topic"), field("body")], [
        ("vacation", "Employees get thirty vacation days per year. Unused days expire in March."),
        ("travel", "Travel is booked through the travel desk. Economy class is the default."),
        ("equipment", "Every employee receives a laptop and a monitor on the first day.")])
    board = put_keyed(ws, region, "board_minutes", [field("topic"), field("body")],
                      [("vacation", SECRET_TEXT)], acl=[{"type": "role", "id": "admin"}])
    people = put_keyed(ws, region, "people", [field("name"), field("email", "STRING", "PII", "MASK"), field("city")],
                       [("Zelda Quark", MASKED_EMAIL, "Lisbon")])
    for ds in (handbook, board, people):
        indexer.index_dataset(region, ws, ds)
    return World(tenant, token_for(ws, "member"), token_for(ws, "viewer"), handbook, board, people)


def client() -> Client:
    settings()
    return Client(create_app("platform"))


def post(c: Client, path: str, token: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return c.http.post(path, headers={**bearer(token), "Content-Type": "application/json", **(headers or {})},
                       body=json.dumps(body))


def ask(question: str, model: str = "auto", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": question}], **extra}


def use_providers(monkeypatch: Any, config: dict[str, Any] | None) -> None:
    """Point the registry at a provider file (JSON text in ``MODEL_PROVIDERS``)."""
    if config is None:
        monkeypatch.delenv("MODEL_PROVIDERS", raising=False)
    else:
        monkeypatch.setenv("MODEL_PROVIDERS", json.dumps(config))
    settings.cache_clear()
    registry.cache_clear()


def region_text(region: str, skip_buckets: tuple[str, ...] = ()) -> bytes:
    """Everything stored in ``region``'s tables, buckets and queues, as bytes (for residency checks)."""
    from infra.resources import BUCKETS, GLOBAL, QUEUES, TABLES

    out = []
    for t in TABLES:
        if t.scope == GLOBAL and region != settings().global_region:
            continue
        ddb = aws.client("dynamodb", region)
        for page in ddb.get_paginator("scan").paginate(TableName=aws.table_name(t.name)):
            out.append(json.dumps(page["Items"], default=str).encode())
    s3 = aws.client("s3", region)
    for b in BUCKETS:
        if b.name in skip_buckets:
            continue
        name = aws.bucket_name(b.name, region)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for obj in page.get("Contents", []):
                data = s3.get_object(Bucket=name, Key=obj["Key"])["Body"].read()
                out.append(gzip.decompress(data) if obj["Key"].endswith(".gz") else data)
    sqs = aws.client("sqs", region)
    for q in QUEUES:
        for name in (q.name, q.name + "-dlq"):
            msgs = sqs.receive_message(QueueUrl=aws.queue_url(name, region), MaxNumberOfMessages=10,
                                       VisibilityTimeout=0).get("Messages", [])
            out.extend(m["Body"].encode() for m in msgs)
    return b"\n".join(out)
