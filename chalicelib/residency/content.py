"""What a workspace's regional content is, read and written without knowing any context's models.

Tables are ``models.BACKED_UP_TABLES`` (kept equal to ``infra/resources.py`` by a test): a regional table keyed by ``workspace_id`` is queried; one keyed
by a '<workspace>#...' attribute (``models.PREFIX_KEYED``) is scanned with ``begins_with``. Objects are
those under the workspace's prefixes (``models.WORKSPACE_PREFIXES``). Items travel as DynamoDB JSON with
binary values base64-encoded, so a restore writes back exactly what was read.
"""
from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from chalicelib.core import aws
from chalicelib.residency.models import BACKED_UP_TABLES, PREFIX_KEYED, WORKSPACE_PREFIXES
from chalicelib.residency.models import TableKeys as Table


def backed_up_tables() -> list[Table]:
    """Every regional table that holds workspace content, in declaration order."""
    return list(BACKED_UP_TABLES)


def _workspace_attr(table: Table) -> tuple[str, bool]:
    """(attribute naming the workspace, whether it is a '<ws>#' prefix rather than the id itself)."""
    if table.hash_key == "workspace_id":
        return "workspace_id", False
    if table.name in PREFIX_KEYED:
        return PREFIX_KEYED[table.name], True
    raise ValueError(f"regional table {table.name} has no declared workspace key (residency/models.py)")


def items(region: str, table: Table, workspace_id: str) -> Iterator[dict[str, Any]]:
    """Every item of ``workspace_id`` in ``table`` (consistent reads), as DynamoDB JSON."""
    ddb = aws.client("dynamodb", region)
    attr, prefixed = _workspace_attr(table)
    name = aws.table_name(table.name)
    if prefixed:
        pages = ddb.get_paginator("scan").paginate(
            TableName=name, ConsistentRead=True, FilterExpression="begins_with(#a, :p)",
            ExpressionAttributeNames={"#a": attr}, ExpressionAttributeValues={":p": {"S": workspace_id + "#"}})
    else:
        pages = ddb.get_paginator("query").paginate(
            TableName=name, ConsistentRead=True, KeyConditionExpression="#a = :w",
            ExpressionAttributeNames={"#a": attr}, ExpressionAttributeValues={":w": {"S": workspace_id}})
    for page in pages:
        yield from page["Items"]


def key_of(table: Table, item: dict[str, Any]) -> dict[str, Any]:
    return {k: item[k] for k in (table.hash_key, table.range_key) if k}


def encode_item(item: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe DynamoDB JSON (binary as base64 under ``B64``/``B64S``; sets sorted)."""
    return {k: _enc(v) for k, v in item.items()}


def decode_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _dec(v) for k, v in item.items()}


def _enc(v: dict[str, Any]) -> dict[str, Any]:
    (t, x), = v.items()
    if t == "B":
        return {"B64": base64.b64encode(bytes(x)).decode()}
    if t == "BS":
        return {"B64S": sorted(base64.b64encode(bytes(b)).decode() for b in x)}
    if t in ("SS", "NS"):
        return {t: sorted(x)}
    if t == "L":
        return {"L": [_enc(e) for e in x]}
    if t == "M":
        return {"M": {k: _enc(e) for k, e in x.items()}}
    return {t: x}


def _dec(v: dict[str, Any]) -> dict[str, Any]:
    (t, x), = v.items()
    if t == "B64":
        return {"B": base64.b64decode(x)}
    if t == "B64S":
        return {"BS": [base64.b64decode(b) for b in x]}
    if t == "L":
        return {"L": [_dec(e) for e in x]}
    if t == "M":
        return {"M": {k: _dec(e) for k, e in x.items()}}
    return {t: x}


def canonical(item: dict[str, Any]) -> str:
    return json.dumps(encode_item(item), sort_keys=True, separators=(",", ":"))


def put_item(region: str, table: Table, item: dict[str, Any]) -> None:
    aws.client("dynamodb", region).put_item(TableName=aws.table_name(table.name), Item=item)


def delete_item(region: str, table: Table, item: dict[str, Any]) -> None:
    aws.client("dynamodb", region).delete_item(TableName=aws.table_name(table.name), Key=key_of(table, item))


def prefixes(workspace_id: str) -> dict[str, str]:
    """bucket name (declared) -> the workspace's prefix there."""
    return {bucket: tpl.format(ws=workspace_id) for bucket, tpl in WORKSPACE_PREFIXES.items()}


def object_keys(region: str, bucket: str, prefix: str) -> list[str]:
    s3 = aws.client("s3", region)
    out: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.bucket_name(bucket, region), Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def get_object(region: str, bucket: str, key: str) -> dict[str, Any]:
    got = aws.client("s3", region).get_object(Bucket=aws.bucket_name(bucket, region), Key=key)
    return {"body": got["Body"].read(), "content_type": got.get("ContentType") or "application/octet-stream"}


def put_object(region: str, bucket: str, key: str, body: bytes, content_type: str) -> None:
    """Written back under the region's data key, as every content object is."""
    aws.client("s3", region).put_object(Bucket=aws.bucket_name(bucket, region), Key=key, Body=body,
                                        ContentType=content_type, ServerSideEncryption="aws:kms",
                                        SSEKMSKeyId=aws.key_alias("data"))


def delete_object(region: str, bucket: str, key: str) -> None:
    aws.client("s3", region).delete_object(Bucket=aws.bucket_name(bucket, region), Key=key)
