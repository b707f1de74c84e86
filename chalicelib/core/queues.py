"""Send work to a region's SQS queue with the correlation ID attached."""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core import aws, correlation


def enqueue(queue: str, region: str, body: dict[str, Any], *, group_key: str | None = None) -> str:
    """Send ``body`` (JSON) to the declared queue ``queue`` in ``region``; returns the message id."""
    attrs = {"correlation_id": {"DataType": "String", "StringValue": correlation.current()}}
    if group_key:
        attrs["group_key"] = {"DataType": "String", "StringValue": group_key}
    result = aws.client("sqs", region).send_message(
        QueueUrl=aws.queue_url(queue, region), MessageBody=json.dumps(body), MessageAttributes=attrs)
    return result["MessageId"]


def record_correlation(record: dict[str, Any]) -> str:
    """Adopt the correlation ID carried by an SQS record (Lambda event shape)."""
    cid = (record.get("messageAttributes", {}).get("correlation_id", {}) or {}).get("stringValue")
    return correlation.accept(cid)
