"""Datasets written as the sync worker writes them (with the internal ``_key`` column), for retrieval tests."""
from __future__ import annotations

from typing import Any

from tests.functional.gateway.data import field, put_dataset


def put_keyed(workspace_id: str, region: str, name: str, fields: list[dict[str, Any]], rows: list[tuple],
              **kw: Any) -> str:
    return put_dataset(workspace_id, region, name, [field("_key")] + fields,
                       [(f"{name}-{i}",) + tuple(r) for i, r in enumerate(rows, start=1)], **kw)


def run_index_rebuilds(region: str) -> list[dict[str, Any]]:
    """Deliver every queued ``knowledge-index`` message of ``region`` to its worker, as Lambda would."""
    from chalicelib.core import aws
    from chalicelib.workers import jobs
    from infra.local.workers import sqs_event

    sqs = aws.client("sqs", region)
    url = aws.queue_url("knowledge-index", region)
    results = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                  MessageAttributeNames=["All"]).get("Messages", [])
        if not got:
            return results
        for msg in got:
            arn = f"arn:aws:sqs:{region}:123456789012:{url.rsplit('/', 1)[-1]}"
            results.append(jobs.knowledge_index(sqs_event([msg], region, arn)))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
