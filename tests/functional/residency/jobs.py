"""Run the ``residency-jobs`` queue in tests as Lambda would (one message per call, batch_size=1)."""
from __future__ import annotations

from typing import Any

from chalicelib.core import aws
from chalicelib.workers import jobs
from infra.local.workers import sqs_event


def run_residency_jobs(*regions: str) -> list[dict[str, Any]]:
    """Deliver every queued message of the regions' ``residency-jobs`` queues to the worker."""
    results = []
    for region in regions or ("us-east-1", "eu-central-1"):
        sqs = aws.client("sqs", region)
        url = aws.queue_url("residency-jobs", region)
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                      MessageAttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            for msg in got:
                arn = f"arn:aws:sqs:{region}:123456789012:{url.rsplit('/', 1)[-1]}"
                results.append(jobs.residency_jobs(sqs_event([msg], region, arn)))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    return results
