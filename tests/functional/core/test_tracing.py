"""Spans as the SDK records them (InMemorySpanExporter): the request's server span with the correlation ID as
its trace ID and a ``traceparent`` answered, one span per AWS call with the rpc and DynamoDB attributes, one
GenAI span per model call and per retrieval of a chat, prompts and answers only for a workspace that opted
in, and the context carried through a queued message to its worker."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chalicelib.core import aws, correlation, workspace_settings
from chalicelib.core.store import queues
from chalicelib.core.telemetry import tracing
from chalicelib.core.tenancy import forget_scopes, workspaces
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer

QUESTION = "How many vacation days do employees get per year?"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(exporter))
    yield exporter
    tracing.use_processor(None)


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, None)
    return helpers.build(tenant)


def named(exporter: InMemorySpanExporter, prefix: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_request_span_takes_the_correlation_id_as_trace_id(tenant: Tenant, spans: InMemorySpanExporter) -> None:
    cid = str(uuid.uuid4())
    with helpers.client() as c:
        r = c.http.get("/v1/me", headers={**bearer(tenant.token), "X-Correlation-Id": cid})
    assert r.status_code == 200
    server = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert len(server) == 1
    span = server[0]
    assert f"{span.context.trace_id:032x}" == cid.replace("-", "")
    assert span.attributes["http.request.method"] == "GET"
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes[tracing.WORKSPACE_ID] == tenant.workspace_id
    assert r.headers["traceparent"] == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"
    aws_spans = [s for s in spans.get_finished_spans() if s.attributes.get("rpc.system") == "aws-api"]
    assert aws_spans, "the request's DynamoDB reads are spans"
    ddb = [s for s in aws_spans if s.attributes["rpc.service"] == "dynamodb"]
    assert ddb and all(s.parent is not None and s.context.trace_id == span.context.trace_id for s in ddb)
    assert all(s.attributes["aws.dynamodb.table_names"] for s in ddb if s.attributes["rpc.method"] == "GetItem")


def test_a_callers_traceparent_is_the_parent(tenant: Tenant, spans: InMemorySpanExporter) -> None:
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with helpers.client() as c:
        r = c.http.get("/v1/me", headers={**bearer(tenant.token), "traceparent": tp})
    assert r.headers["X-Correlation-Id"] == "0af7651916cd43dd8448eb211c80319c"
    (server,) = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert server.parent is not None and f"{server.parent.span_id:016x}" == "b7ad6b7169203331"
    assert r.headers["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")


def test_a_foreign_traceparent_does_not_override_the_correlation_id(tenant: Tenant,
                                                                    spans: InMemorySpanExporter) -> None:
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with helpers.client() as c:
        c.http.get("/v1/me", headers={**bearer(tenant.token), "traceparent": tp, "X-Correlation-Id": "mine-12345"})
    (server,) = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert server.parent is None
    assert server.context.trace_id == tracing.trace_id_of("mine-12345")


def test_a_chat_has_model_and_retrieval_spans_without_content(world: helpers.World,
                                                              spans: InMemorySpanExporter) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask(QUESTION))
    assert r.status_code == 201, r.body
    (model,) = named(spans, "chat ")
    attrs = model.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.system"] == "extractive"
    assert attrs["gen_ai.request.model"]
    assert attrs["gen_ai.usage.input_tokens"] == r.json_body["usage"]["input_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == r.json_body["usage"]["output_tokens"]
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)
    retrieval = named(spans, "retrieval")
    assert retrieval and retrieval[0].attributes["gen_ai.operation.name"] == "retrieval"
    everything = json.dumps([dict(s.attributes) for s in spans.get_finished_spans()], default=str)
    assert "vacation" not in everything and "thirty" not in everything  # neither prompt nor answer


def test_a_workspace_that_opts_in_gets_prompts_and_answers(world: helpers.World,
                                                           spans: InMemorySpanExporter) -> None:
    ws = workspaces().get(world.tenant.workspace_id)
    ws.update(actions=[workspaces().settings.set(json.dumps({tracing.TRACE_CONTENT: True}))])
    assert tracing.TRACE_CONTENT == workspace_settings.TRACE_CONTENT  # the setting the PATCH writes
    forget_scopes()
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, ask(QUESTION))
    assert r.status_code == 201, r.body
    (model,) = named(spans, "chat ")
    assert QUESTION in model.attributes["gen_ai.input.messages"]
    assert "thirty vacation days" in model.attributes["gen_ai.output.messages"]


def test_queued_work_continues_the_trace(tenant: Tenant, spans: InMemorySpanExporter) -> None:
    correlation.accept(str(uuid.uuid4()))
    with tracing.span("sender") as sender:
        queues.enqueue("sync-jobs", tenant.region, {"hello": 1})
    sqs = aws.client("sqs", tenant.region)
    got = sqs.receive_message(QueueUrl=aws.queue_url("sync-jobs", tenant.region), MessageAttributeNames=["All"])
    (message,) = got["Messages"]
    attrs = {k: {"stringValue": v["StringValue"]} for k, v in message["MessageAttributes"].items()}
    assert attrs["traceparent"]["stringValue"].split("-")[2] == f"{sender.context.span_id:016x}"
    correlation.accept(None)  # the worker starts elsewhere
    seen: list[str] = []
    queues.handle_batch({"Records": [{"messageId": "m1", "body": message["Body"], "messageAttributes": attrs}]},
                        lambda record: seen.append(correlation.current()) or True, what="sync")
    (consumer,) = [s for s in spans.get_finished_spans() if s.kind.name == "CONSUMER"]
    assert consumer.parent is not None and consumer.parent.span_id == sender.context.span_id
    assert consumer.context.trace_id == sender.context.trace_id
    assert consumer.attributes["messaging.system"] == "aws_sqs"
    send = [s for s in spans.get_finished_spans() if s.attributes.get("rpc.method") == "SendMessage"]
    assert send and send[0].attributes["rpc.service"] == "sqs"


def test_an_admin_opts_the_workspace_in_to_content(tenant: Tenant) -> None:
    from tests.functional.gateway.data import token_for

    member = token_for(tenant.workspace_id, "member")
    path = f"/v1/workspaces/{tenant.workspace_id}"
    with helpers.client() as c:
        def patch(token: str, body: Any) -> Any:
            return c.http.patch(path, headers={**bearer(token), "Content-Type": "application/json"},
                                body=json.dumps(body))

        assert patch(tenant.token, {"trace_content": "yes"}).status_code == 400
        assert patch(member.token, {"trace_content": True}).status_code == 403
        assert c.http.get(path, headers=bearer(tenant.token)).json_body["settings"]["trace_content"] is None
        on = patch(tenant.token, {"trace_content": True})
        assert on.status_code == 200 and on.json_body["settings"]["trace_content"] is True
        stored = json.loads(workspaces().get(tenant.workspace_id, consistent_read=True).settings)
        assert stored[tracing.TRACE_CONTENT] is True  # what the tracer reads
