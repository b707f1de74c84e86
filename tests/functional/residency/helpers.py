"""Workspace content across tables and buckets, and a snapshot of it to compare item by item."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from chalice.test import Client

from chalicelib.core import aws
from chalicelib.core.config import settings
from chalicelib.groups import create_app
from chalicelib.residency import content
from chalicelib.residency.models import NOT_RESTORED
from tests.functional.conftest import bearer

SECRET = "quarterly-board-secret-7731"


def client() -> Client:
    settings()
    return Client(create_app("platform"))


def post(c: Client, path: str, token: str, body: Any = None) -> Any:
    return c.http.post(path, headers={**bearer(token), "Content-Type": "application/json"},
                       body=json.dumps(body if body is not None else {}))


def get(c: Client, path: str, token: str) -> Any:
    return c.http.get(path, headers=bearer(token))


def put(region: str, table: str, item: dict[str, Any]) -> None:
    aws.client("dynamodb", region).put_item(TableName=aws.table_name(table), Item=item)


def put_obj(region: str, bucket: str, key: str, body: bytes) -> None:
    aws.client("s3", region).put_object(Bucket=aws.bucket_name(bucket, region), Key=key, Body=body)


def seed(ws: str, region: str, tag: str = "a") -> None:
    """Items in the platform, gateway, chat and agents tables and objects in every content bucket."""
    s = {"S": ws}
    put(region, "chats", {"workspace_id": s, "id": {"S": f"chat_{tag}1"}, "title": {"S": SECRET},
                          "messages": {"S": json.dumps([{"role": "user", "content": SECRET}])},
                          "message_count": {"N": "1"}})
    put(region, "chats", {"workspace_id": s, "id": {"S": f"chat_{tag}2"}, "title": {"S": "second"}})
    put(region, "agents", {"workspace_id": s, "id": {"S": f"agt_{tag}"}, "tools": {"SS": ["search", "calc"]},
                           "blob": {"B": b"\x00\x01binary"}, "limits": {"M": {"steps": {"N": "5"}}}})
    put(region, "datasets", {"workspace_id": s, "id": {"S": f"ds_{tag}"}, "name": {"S": "customers"}})
    put(region, "invitations", {"workspace_id": s, "id": {"S": f"inv_{tag}"}, "email": {"S": "x@example.com"},
                                "status": {"S": "accepted"}, "expires_at": {"N": "1"}})
    put(region, "agent_memory", {"scope": {"S": f"{ws}#agt_{tag}#usr_1"}, "key": {"S": "likes"},
                                 "value": {"S": "tea"}})
    put(region, "agent_run_log", {"run_key": {"S": f"{ws}#run_{tag}"}, "sk": {"S": "step#0001"},
                                  "text": {"S": SECRET}})
    put_obj(region, "data", f"datasets/{ws}/ds_{tag}/s1/part-00000.parquet", b"PAR1" + SECRET.encode())
    put_obj(region, "documents", f"uploads/{ws}/conn_{tag}/doc_1/handbook.txt", SECRET.encode() * 3)
    put_obj(region, "knowledge", f"indexes/{ws}/ds_{tag}/b1/chunks.json.gz", b"chunks")


def snapshot(ws: str, region: str) -> dict[str, Any]:
    """Every restorable item (canonical DynamoDB JSON) and every object's SHA-256, of one workspace."""
    out: dict[str, Any] = {}
    for table in content.backed_up_tables():
        if table.name not in NOT_RESTORED:
            out[table.name] = sorted(content.canonical(i) for i in content.items(region, table, ws))
    for bucket, prefix in content.prefixes(ws).items():
        out[bucket] = {k: hashlib.sha256(content.get_object(region, bucket, k)["body"]).hexdigest()
                       for k in content.object_keys(region, bucket, prefix)}
    return out
