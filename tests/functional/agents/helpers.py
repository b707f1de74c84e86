"""Helpers for the agents tests: members with roles, JSON calls to the platform group, and a drain of
the region's ``agent-runs`` queue that hands messages to the worker as Lambda would."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalice.test import Client

from chalicelib.agents.runtime import worker
from chalicelib.core import aws
from chalicelib.groups import create_app
from infra.local.workers import sqs_event
from tests.functional.platform.helpers import User, add_member, call

QUEUE = "agent-runs"

DEMO_PLAN_AGENT = {
    "name": "Order analyst",
    "instructions": "Answer questions about customers and their orders.",
    "model": "auto",
    "tools": ["catalog_search", "dataset_schema", "query", "memory_read", "memory_write"],
    "plan": [
        {"name": "find", "tool": "catalog_search", "input": {"query": "{{input.topic}}"}},
        {"name": "schema", "tool": "dataset_schema", "input": {"dataset": "{{steps.find.output.datasets.0.id}}"}},
        {"name": "rows", "tool": "query", "input": {"sql": "{{input.sql}}", "limit": 5}},
        {"name": "remember", "tool": "memory_write", "input": {"key": "last_topic", "value": "{{input.topic}}"}},
    ],
    "limits": {"max_steps": 6, "deadline": "PT10M", "max_tokens": 2000},
}


def platform_client() -> Client:
    return Client(create_app("platform"))


def member(workspace_id: str, role: str = "member", email: str | None = None) -> User:
    from chalicelib.core.ids import new_id

    return add_member(workspace_id, email or f"{role}-{new_id('usr')[-8:].lower()}@example.com", role)


def create_agent(c: Client, token: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    status, agent, _ = call(c, "POST", "/v1/agents", token, body or DEMO_PLAN_AGENT)
    assert status == 201, agent
    return agent


def start_run(c: Client, token: str, agent_id: str, run_input: Any, headers: dict[str, str] | None = None
              ) -> tuple[int, Any]:
    status, body, _ = call(c, "POST", f"/v1/agents/{agent_id}/runs", token, {"input": run_input}, headers=headers)
    return status, body


def get_run(c: Client, token: str, agent_id: str, run_id: str) -> dict[str, Any]:
    status, body, _ = call(c, "GET", f"/v1/agents/{agent_id}/runs/{run_id}", token)
    assert status == 200, body
    return body


def receive(region: str, queue: str = QUEUE, visibility: int | None = None) -> list[dict[str, Any]]:
    sqs = aws.client("sqs", region)
    kw: dict[str, Any] = {"VisibilityTimeout": visibility} if visibility is not None else {}
    return sqs.receive_message(QueueUrl=aws.queue_url(queue, region), MaxNumberOfMessages=10, WaitTimeSeconds=0,
                               AttributeNames=["All"], MessageAttributeNames=["All"], **kw).get("Messages", [])


def deliver(region: str, *, after_step: Callable[[int], None] | None = None, visibility: int | None = None
            ) -> dict[str, Any]:
    """Receive what the queue holds and call the worker with it, deleting what succeeded (as Lambda's
    poller does); returns the handler's result."""
    sqs = aws.client("sqs", region)
    url = aws.queue_url(QUEUE, region)
    msgs = receive(region, visibility=visibility)
    if not msgs:
        return {"batchItemFailures": [], "received": 0}
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    result = worker.handle(sqs_event(msgs, region, arn), after_step=after_step)
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    for m in msgs:
        if m["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return {**result, "received": len(msgs)}


def run_once(region: str, token: str, body: dict[str, Any], run_input: Any = None) -> dict[str, Any]:
    """Create an agent from ``body``, start one run as ``token``'s user, let the worker take it, and
    return the run as that user reads it."""
    with platform_client() as c:
        agent = create_agent(c, token, body)
        run = start_run(c, token, agent["id"], {} if run_input is None else run_input)[1]
        deliver(region)
        return get_run(c, token, agent["id"], run["id"])


def queue_depth(region: str, queue: str) -> int:
    sqs = aws.client("sqs", region)
    attrs = sqs.get_queue_attributes(QueueUrl=aws.queue_url(queue, region),
                                     AttributeNames=["ApproximateNumberOfMessages",
                                                     "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def sse_events(body: str) -> list[dict[str, Any]]:
    """Parse a text/event-stream body into ``[{id, event, data}]``."""
    out = []
    for block in body.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name in ("id", "event"):
                fields[name] = value
            elif name == "data":
                fields["data"] = json.loads(value)
        if "id" in fields:
            out.append(fields)
    return out
