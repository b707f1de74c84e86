"""Run the audit jobs in tests as Lambda would: the export job fed from the ``audit-exports`` queue,
the scheduled digest job called with a scheduled event."""
from __future__ import annotations

from typing import Any

from chalicelib.core import aws
from chalicelib.workers import jobs
from infra.local.workers import sqs_event


def run_export_job(region: str) -> list[dict[str, Any]]:
    """Deliver every queued export message to the export job (one per call, as batch_size=1 does)."""
    sqs = aws.client("sqs", region)
    url = aws.queue_url("audit-exports", region)
    results = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                  MessageAttributeNames=["All"]).get("Messages", [])
        if not got:
            return results
        for msg in got:
            out = jobs.audit_exports(sqs_event([msg], region, f"arn:aws:sqs:{region}:123456789012:{url.rsplit('/', 1)[-1]}"))
            results.append(out)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])


def run_digest_job() -> dict[str, Any]:
    return jobs.audit_digest({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}})
