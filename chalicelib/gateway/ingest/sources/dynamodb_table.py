"""``dynamodb`` connector: one table of the workspace's region, read as the role the workspace grants
(``role_arn``; see ``gateway/ingest/source_access.py``).

Two ways to be incremental:
- with ``updated_at_attribute`` (a string such as an ISO timestamp, or a number that grows on every
  write): a scan filtered on ``attribute > saved watermark`` returns only changed items (the scan still
  reads the table, but only changed rows are transferred and written). Deleted items are not seen
  until a FULL_REFRESH.
- without it: every sync scans the whole table (``complete``): unchanged rows are recognised by their
  change hash and not rewritten, rows of deleted items are removed.
Rows are identified by the table's key attributes.
"""
from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import Binary, TypeDeserializer
from botocore.exceptions import ClientError

from chalicelib.core.http.validation import F
from chalicelib.gateway.ingest import source_access, source_names
from chalicelib.gateway.ingest.sources import Batch, Record, RecordSpool, Src, aws_source_error

FIELDS = {
    "role_arn": F(str, required=True, min_len=20, max_len=2048),
    "table": F(str, required=True, min_len=3, max_len=2048),
    "updated_at_attribute": F(str, min_len=1, max_len=255),
}
SECRETS: tuple[str, ...] = ()
_deser = TypeDeserializer()


def canonical(config: dict[str, Any], region: str) -> dict[str, Any]:
    """The config with ``role_arn`` and ``table`` in canonical form (``source_names.Refused`` otherwise)."""

    role = source_names.role(config["role_arn"], platform_account=source_access.platform_account())
    return {**config, "role_arn": role,
            "table": source_names.table(config["table"], region=region, role_account=source_access.role_account(role))}


def _ddb(src: Src) -> Any:

    return source_access.client(src, "dynamodb")


def _describe(src: Src) -> dict[str, Any]:
    try:
        return _ddb(src).describe_table(TableName=src.config["table"])["Table"]
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "error")
        raise aws_source_error(f"cannot describe table {src.config['table']}", code) from None


def health(src: Src) -> None:
    _describe(src)


def plain(value: Any) -> Any:
    """DynamoDB values as JSON-like Python values (numbers exact: integral -> int)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Binary):
        return base64.b64encode(value.value).decode("ascii")
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def read(src: Src, cursor: dict[str, Any] | None, mode: str) -> Batch:
    table = _describe(src)
    keys = [k["AttributeName"] for k in sorted(table["KeySchema"], key=lambda k: k["KeyType"] != "HASH")]
    updated = src.config.get("updated_at_attribute")
    watermark = (cursor or {}).get("watermark") if mode == "INCREMENTAL" else None
    args: dict[str, Any] = {"TableName": src.config["table"]}
    if updated and watermark is not None:
        kind = "N" if isinstance(watermark, (int, float)) else "S"
        args.update(FilterExpression="#u > :w", ExpressionAttributeNames={"#u": updated},
                    ExpressionAttributeValues={":w": {kind: str(watermark)}})
    records = RecordSpool()  # bounded memory: pages are spooled to local disk
    high = watermark
    try:
        for pages, page in enumerate(_ddb(src).get_paginator("scan").paginate(**args), start=1):
            src.report(pages, len(records))
            for raw in page.get("Items", []):
                row = {k: plain(_deser.deserialize(v)) for k, v in raw.items()}
                records.append(Record(json.dumps([str(row.get(k)) for k in keys]), row))
                mark = row.get(updated) if updated else None
                if isinstance(mark, (int, float, str)) and not isinstance(mark, bool):
                    if high is None or type(high) is not type(mark) or mark > high:
                        high = mark
    except ClientError as err:
        records.close()
        code = err.response.get("Error", {}).get("Code", "error")
        raise aws_source_error(f"cannot scan table {src.config['table']}", code) from None
    except BaseException:
        records.close()
        raise
    complete = mode == "FULL_REFRESH" or not updated
    return Batch(records=records, cursor={"watermark": high} if updated else {}, rows_read=len(records),
                 complete=complete, primary_key=keys, cleanup=records.close)
