"""SQS work: send to a region's queue with the correlation ID attached, and the consumer side every worker shares."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalicelib.core import aws, correlation
from chalicelib.core.ids import is_id
from chalicelib.core.logs import get_logger
from chalicelib.core.process_state import cached
from chalicelib.core.telemetry import tracing

log = get_logger(__name__)
DEFAULT_MAX_RECEIVES = 5  # infra/resources.py's Queue.max_receive_count default


def enqueue(queue: str, region: str, body: dict[str, Any], *, group_key: str | None = None) -> str:
    """Send ``body`` (JSON) to the declared queue ``queue`` in ``region``; returns the message id."""
    attrs = {"correlation_id": {"DataType": "String", "StringValue": correlation.current()},
             **tracing.message_attributes()}
    if group_key:
        attrs["group_key"] = {"DataType": "String", "StringValue": group_key}
    result = aws.client("sqs", region).send_message(
        QueueUrl=aws.queue_url(queue, region), MessageBody=json.dumps(body), MessageAttributes=attrs)
    return result["MessageId"]


def record_correlation(record: dict[str, Any]) -> str:
    """Adopt the correlation ID carried by an SQS record (Lambda event shape)."""
    cid = (record.get("messageAttributes", {}).get("correlation_id", {}) or {}).get("stringValue")
    return correlation.accept(cid)


# --- the consumer side: what every SQS worker does the same way -------------------------------------

RecordHandler = Callable[[dict[str, Any]], bool]


def handle_batch(event: dict[str, Any], handle_record: RecordHandler, *, what: str) -> dict[str, Any]:
    """Run ``handle_record`` over a Lambda SQS event, reporting partial batch failures.

    A record whose handler returns False or raises is reported in ``batchItemFailures`` (so it is
    redelivered, then dead-lettered); one failing record never takes the batch down.
    """
    failures = []
    for record in event.get("Records", []):
        record_correlation(record)
        try:
            with tracing.record_span(record, what):
                ok = handle_record(record)
        except Exception:  # noqa: BLE001 - never let one record take the batch down
            log.exception("%s record failed", what, extra={"message_id": record.get("messageId")})
            ok = False
        if not ok:
            failures.append({"itemIdentifier": record.get("messageId", "")})
    return {"batchItemFailures": failures}


def parse_body(record: dict[str, Any], **id_fields: str) -> dict[str, Any] | None:
    """The record's JSON object body, or None unless each ``field=prefix`` holds an id of that kind."""
    try:
        body = json.loads(record.get("body") or "")
    except ValueError:
        return None
    if not isinstance(body, dict) or not all(is_id(body.get(f), prefix) for f, prefix in id_fields.items()):
        return None
    return body


def receive_count(record: dict[str, Any]) -> int:
    """How many times this record has been delivered (1 on the first delivery)."""
    return int((record.get("attributes") or {}).get("ApproximateReceiveCount", "1"))


@cached(maxsize=32)
def max_receives(queue: str, region: str, default: int = DEFAULT_MAX_RECEIVES) -> int:
    """The queue's ``maxReceiveCount`` (from its redrive policy); ``default`` when it cannot be read."""
    try:
        attrs = aws.client("sqs", region).get_queue_attributes(
            QueueUrl=aws.queue_url(queue, region), AttributeNames=["RedrivePolicy"])["Attributes"]
        return int(json.loads(attrs["RedrivePolicy"])["maxReceiveCount"])
    except Exception:  # noqa: BLE001 - fall back to the declared value
        return default


def retry_later(queue: str, region: str, record: dict[str, Any], seconds: int) -> None:
    """Shorten the record's visibility timeout so it is redelivered after ``seconds`` (best effort)."""
    handle = record.get("receiptHandle")
    if not handle or handle == "local":
        return
    try:
        aws.client("sqs", region).change_message_visibility(
            QueueUrl=aws.queue_url(queue, region), ReceiptHandle=handle, VisibilityTimeout=seconds)
    except Exception:  # noqa: BLE001 - the queue's own visibility timeout applies
        log.warning("could not shorten visibility", extra={"queue": queue})
