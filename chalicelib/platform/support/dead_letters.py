"""Dead-letter queues, for the provider's operators: how many messages wait in each queue's dead-letter
queue (jobs that failed every retry: syncs, agent runs, audit exports, restores, access requests,
backups), per region this deployment serves.

Two views, one source: ``GET /v1/support/dead-letters`` (registered support staff signed in with a second
factor; counts only, with the queue attributes the platform function may read) and the operator command
``make dead-letters`` (``dead_letters_cli.py``), which can also ``peek`` at messages with the operator's
own credentials. A peek shows each message's id, when it was first sent, how often it was delivered and
the ids its body names (workspace, run, request, backup...), never the body itself. Each dead-letter
queue also has a CloudWatch alarm in the deployment template (``infra/template.py``).
"""
from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.authz import Principal
from chalicelib.core.http.errors import ApiError
from chalicelib.core.regions import served_regions
from chalicelib.platform.access import mfa_used, require_user_token
from chalicelib.platform.support.service import is_staff

DLQ_SUFFIX = "-dlq"  # infra/bootstrap.py and infra/template.py name each dead-letter queue so
PEEK_LIMIT = 10
ID_VALUE = re.compile(r"^[a-z]{2,5}_[0-9A-Z]{26}$")  # a prefixed ULID (core/ids.py)


def queues(region: str) -> dict[str, str]:
    """The deployment's dead-letter queues in ``region``, by the queue they serve: every queue named with
    the resource prefix and ``DLQ_SUFFIX`` (bootstrap and the template make one per declared queue)."""
    prefix = aws.queue_name("")
    found: dict[str, str] = {}
    for page in aws.client("sqs", region).get_paginator("list_queues").paginate(QueueNamePrefix=prefix):
        for url in page.get("QueueUrls", []):
            name = url.rsplit("/", 1)[-1]
            if name.endswith(DLQ_SUFFIX):
                found[name[len(prefix):-len(DLQ_SUFFIX)]] = url
    return dict(sorted(found.items()))


def counts(region: str) -> list[dict[str, Any]]:
    """Per queue of ``region``: its dead-letter queue's name, waiting and in-flight messages."""
    sqs = aws.client("sqs", region)
    out = []
    for queue, url in queues(region).items():
        entry: dict[str, Any] = {"queue": queue, "dead_letter_queue": aws.queue_name(queue + DLQ_SUFFIX)}
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        out.append({**entry, "messages": int(attrs.get("ApproximateNumberOfMessages", 0)),
                    "in_flight": int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0))})
    return out


def overview(regions: tuple[str, ...] | list[str] | None = None) -> dict[str, Any]:
    """Every served region's dead-letter queues and the total waiting in each region."""
    out: dict[str, Any] = {}
    for region in regions or served_regions():
        listed = counts(region)
        out[region] = {"messages": sum(q["messages"] for q in listed), "dead_letter_queues": listed}
    return {"checked_at": clock.iso(), "regions": out}


def for_operator(principal: Principal) -> dict[str, Any]:
    """The API view: registered, active support staff who signed in with a second factor only."""
    require_user_token(principal)
    if not is_staff(principal.user_id):
        raise ApiError(403, "operators_only", "Only the provider's registered support staff see dead-letter queues.")
    if not mfa_used(principal):
        raise ApiError(403, "mfa_required", "Operator views require a sign-in with a second factor.")
    return overview()


def summarise(message: dict[str, Any]) -> dict[str, Any]:
    """What a peek shows of one message: ids and delivery facts, not the body."""
    attrs = message.get("Attributes", {})
    try:
        body = json.loads(message.get("Body") or "")
    except ValueError:
        body = None
    fields = body if isinstance(body, dict) else {}
    ids = {k: v for k, v in fields.items() if isinstance(v, str) and ID_VALUE.match(v)}
    sent = attrs.get("SentTimestamp")
    kind = fields.get("kind")
    return {"message_id": message.get("MessageId"), "receive_count": int(attrs.get("ApproximateReceiveCount", 0)),
            "sent_at": clock.iso(int(sent) / 1000) if sent else None,
            "kind": kind if isinstance(kind, str) and kind.isidentifier() else None, "ids": ids,
            "body_bytes": len((message.get("Body") or "").encode())}


def peek(region: str, queue: str, limit: int = PEEK_LIMIT) -> list[dict[str, Any]]:
    """Up to ``limit`` messages of ``queue``'s dead-letter queue, summarised; they stay where they are
    (received with a zero visibility timeout)."""
    found = queues(region)
    if queue not in found:
        raise ValueError(f"unknown queue {queue!r}; one of {', '.join(found)}")
    url = found[queue]
    got = aws.client("sqs", region).receive_message(
        QueueUrl=url, MaxNumberOfMessages=max(1, min(limit, 10)), VisibilityTimeout=0, AttributeNames=["All"])
    return [summarise(m) for m in got.get("Messages", [])]
