"""Trace IDs from correlation IDs, W3C traceparent parsing, and the attribute names the spans use: each one
the OpenTelemetry semantic conventions' own (checked against opentelemetry-semantic-conventions)."""
from __future__ import annotations

import uuid

from opentelemetry.semconv._incubating.attributes import aws_attributes as aws
from opentelemetry.semconv._incubating.attributes import db_attributes as db
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.attributes import messaging_attributes as messaging
from opentelemetry.semconv._incubating.attributes import rpc_attributes as rpc
from opentelemetry.semconv.attributes import error_attributes, http_attributes

from chalicelib.core import correlation
from chalicelib.core.telemetry import tracing


def test_attribute_names_are_the_semantic_conventions() -> None:
    assert tracing.GEN_AI_SYSTEM == gen_ai.GEN_AI_SYSTEM
    assert tracing.GEN_AI_PROVIDER_NAME == gen_ai.GEN_AI_PROVIDER_NAME
    assert tracing.GEN_AI_OPERATION_NAME == gen_ai.GEN_AI_OPERATION_NAME
    assert tracing.GEN_AI_REQUEST_MODEL == gen_ai.GEN_AI_REQUEST_MODEL
    assert tracing.GEN_AI_REQUEST_MAX_TOKENS == gen_ai.GEN_AI_REQUEST_MAX_TOKENS
    assert tracing.GEN_AI_USAGE_INPUT_TOKENS == gen_ai.GEN_AI_USAGE_INPUT_TOKENS
    assert tracing.GEN_AI_USAGE_OUTPUT_TOKENS == gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
    assert tracing.GEN_AI_RESPONSE_FINISH_REASONS == gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
    assert tracing.GEN_AI_TOOL_NAME == gen_ai.GEN_AI_TOOL_NAME
    assert tracing.GEN_AI_TOOL_TYPE == gen_ai.GEN_AI_TOOL_TYPE
    assert tracing.GEN_AI_DATA_SOURCE_ID == gen_ai.GEN_AI_DATA_SOURCE_ID
    assert tracing.GEN_AI_INPUT_MESSAGES == gen_ai.GEN_AI_INPUT_MESSAGES
    assert tracing.GEN_AI_OUTPUT_MESSAGES == gen_ai.GEN_AI_OUTPUT_MESSAGES
    assert tracing.RPC_SYSTEM == rpc.RPC_SYSTEM
    assert tracing.RPC_SERVICE == rpc.RPC_SERVICE
    assert tracing.RPC_METHOD == rpc.RPC_METHOD
    assert tracing.AWS_DYNAMODB_TABLE_NAMES == aws.AWS_DYNAMODB_TABLE_NAMES
    assert tracing.AWS_REQUEST_ID == aws.AWS_REQUEST_ID
    assert tracing.MESSAGING_SYSTEM == messaging.MESSAGING_SYSTEM
    assert tracing.MESSAGING_DESTINATION_NAME == messaging.MESSAGING_DESTINATION_NAME
    assert tracing.MESSAGING_OPERATION_TYPE == messaging.MESSAGING_OPERATION_TYPE
    assert tracing.DB_SYSTEM_NAME == db.DB_SYSTEM_NAME
    assert tracing.DB_OPERATION_NAME == db.DB_OPERATION_NAME
    assert tracing.HTTP_REQUEST_METHOD == http_attributes.HTTP_REQUEST_METHOD
    assert tracing.HTTP_ROUTE == http_attributes.HTTP_ROUTE
    assert tracing.HTTP_RESPONSE_STATUS_CODE == http_attributes.HTTP_RESPONSE_STATUS_CODE
    assert tracing.ERROR_TYPE == error_attributes.ERROR_TYPE


def test_a_uuid_correlation_id_is_the_trace_id() -> None:
    cid = str(uuid.uuid4())
    assert f"{tracing.trace_id_of(cid):032x}" == cid.replace("-", "")


def test_another_correlation_id_hashes_to_a_stable_trace_id() -> None:
    a, b = tracing.trace_id_of("order-42:retry"), tracing.trace_id_of("order-42:retry")
    assert a == b and 0 < a < 2**128
    assert tracing.trace_id_of("order-43:retry") != a
    assert f"{tracing.trace_id_of('0af7651916cd43dd8448eb211c80319c'):032x}" == "0af7651916cd43dd8448eb211c80319c"


def test_traceparent_parsing_refuses_malformed_values() -> None:
    good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert tracing.parse_traceparent(good) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    for bad in (None, "", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
                "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01", good + "x"):
        assert tracing.parse_traceparent(bad) is None


def test_a_traceparent_without_correlation_id_names_the_request() -> None:
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert tracing.accept_request(None, tp) == "0af7651916cd43dd8448eb211c80319c"
    assert tracing.accept_request("caller-chosen-id", tp) == "caller-chosen-id"  # the caller's ID wins
    assert correlation.current() == "caller-chosen-id"
    assert tracing.accept_request(None, "garbage") != "garbage"


def test_off_without_an_endpoint(monkeypatch: object) -> None:
    tracing.use_processor(None)
    assert not tracing.enabled()
    with tracing.span("anything") as s:
        assert s is None
    assert tracing.message_attributes() == {}
    assert tracing.current_traceparent() is None
