"""The emulator's DynamoDB item operations answered with their result written as JSON directly.

moto (5.2) serialises every response through a generic serialiser that walks the operation's output shape
for each value (``moto/core/serialize.py``); for items that is a walk per attribute, and it took most of
the time of a read (a 50-item query: about 0.1 s in process). DynamoDB's JSON protocol writes an item
result as the attribute-value maps moto already holds (``dynamo_to_dict``), binary values in base64 and
timestamps as epoch seconds, so for the item operations the plain encoding is the same answer (checked
against the serialiser, operation by operation, in ``tests/functional/infra/test_emulator_plain_items.py``).
Keys outside the output shape and empty values are left out, as the serialiser leaves them out. Anything
else (table descriptions, errors, a value JSON cannot hold) goes through moto's serialiser as before."""
from __future__ import annotations

import base64
import datetime
import json
from typing import Any

ITEM_OPERATIONS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "PutItem",
                             "UpdateItem", "DeleteItem"})  # the writes of several items answer with no items
CONTENT_TYPE = "application/x-amz-json-1.0"
_MARK = "_aiplat_plain_items"


def _wire(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    raise TypeError(type(value).__name__)


def encode(operation: Any, result: Any) -> str | None:
    """The JSON body of an item operation's ``result`` (None: not an item operation, or not plain)."""
    if operation.name not in ITEM_OPERATIONS or not isinstance(result, dict):
        return None
    members = operation.output_shape.members if operation.output_shape is not None else {}
    try:
        return json.dumps({k: v for k, v in result.items() if v is not None and k in members}, default=_wire,
                          separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def install() -> None:
    """Idempotently answer the item operations of moto's DynamoDB with ``encode``."""
    from moto.dynamodb.responses import DynamoResult

    original = DynamoResult.execute_result
    if getattr(original, _MARK, False):
        return

    def execute_result(self: Any, context: Any) -> Any:
        body = encode(context.operation_model, self.result)
        if body is None:
            return original(self, context)
        return 200, {"Content-Type": CONTENT_TYPE}, body

    setattr(execute_result, _MARK, True)
    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]
