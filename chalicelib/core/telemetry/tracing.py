"""OpenTelemetry traces (GenAI semantic conventions): one span per request, model call, tool call,
retrieval, AWS call, queued job, sync, query and MCP tool call.

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set: then the SDK is imported (lazily, on the first span)
and spans are exported over OTLP/HTTP through a ``BatchSpanProcessor``, flushed at the end of each Lambda
invocation and worker job. Without an endpoint no SDK is imported and every hook is a ``nullcontext``.

The trace ID is the correlation ID: a UUID's 128 bits directly, any other correlation ID's first 128 bits
of SHA-256 (``trace_id_of``). A W3C ``traceparent`` is accepted on requests and queued messages and
emitted on responses and messages.

Prompts and answers become span attributes only for a workspace with the setting ``trace_content: true``
(``set_workspace``), and only the conversation's messages: never the retrieved passages, so masked values
never reach a span.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from chalicelib.core import correlation
from chalicelib.core.config import settings
from chalicelib.core.telemetry import openlineage

TRACEPARENT = "traceparent"
TRACE_CONTENT = "trace_content"  # the workspace setting that lets prompts and answers into spans
F = TypeVar("F", bound=Callable[..., Any])
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_FLUSH_TIMEOUT_MS = 2000
_lock = threading.Lock()
_state: dict[str, Any] = {"provider": None, "configured": False}
_tracers: dict[Any, Any] = {}  # provider -> its tracer (one per provider, not one per span)
_workspace: contextvars.ContextVar[str] = contextvars.ContextVar("trace_workspace", default="")
_content: contextvars.ContextVar[bool] = contextvars.ContextVar("trace_content", default=False)

# attribute names (opentelemetry-semantic-conventions; tests check each against the package's constants)
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_DATA_SOURCE_ID = "gen_ai.data_source.id"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
AWS_DYNAMODB_TABLE_NAMES = "aws.dynamodb.table_names"
AWS_REQUEST_ID = "aws.request_id"
HTTP_REQUEST_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
DB_SYSTEM_NAME = "db.system.name"
DB_OPERATION_NAME = "db.operation.name"
ERROR_TYPE = "error.type"
WORKSPACE_ID = "aiplat.workspace.id"  # the platform's own namespace
SYNC_ID = "aiplat.sync.id"


# --- configuration ------------------------------------------------------------------------------------

def enabled() -> bool:
    """Whether spans are recorded: an OTLP endpoint is configured, or a test installed a processor."""
    if not _state["configured"]:
        _configure_from_env()
    return _state["provider"] is not None


def _configure_from_env() -> None:
    with _lock:
        if _state["configured"]:
            return
        _state["configured"] = True
        if not settings().otlp_endpoint:
            return
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        _state["provider"] = _new_provider(BatchSpanProcessor(OTLPSpanExporter(timeout=5)))


def _new_provider(processor: Any) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class CorrelationIds(RandomIdGenerator):
        """A root span's trace ID is the correlation ID's (``trace_id_of``)."""

        def generate_trace_id(self) -> int:
            return trace_id_of(correlation.current())

        def is_trace_id_random(self) -> bool:
            return False  # a caller's correlation ID need not be

    service = settings().otel_service_name
    provider = TracerProvider(resource=Resource.create({"service.name": service}), id_generator=CorrelationIds())
    provider.add_span_processor(processor)
    return provider


def use_processor(processor: Any | None) -> None:
    """Record spans into ``processor`` (a test's ``SimpleSpanProcessor(InMemorySpanExporter())``); None
    turns tracing off again."""
    with _lock:
        old = _state["provider"]
        _state["provider"] = _new_provider(processor) if processor is not None else None
        _state["configured"] = True
    if old is not None:
        _tracers.pop(old, None)
        old.shutdown()


def flush() -> None:
    """Export what is buffered (end of a Lambda invocation or a worker job); never raises."""
    provider = _state["provider"]
    if provider is not None:
        try:
            provider.force_flush(_FLUSH_TIMEOUT_MS)
        except Exception:  # noqa: BLE001 - telemetry never fails the work
            pass


def flush_if_lambda() -> None:
    """Flush spans and lineage events when the process is frozen after answering (Lambda); the local server
    sends both in the background."""
    if settings().in_lambda:
        flush()
        openlineage.drain()


# --- identifiers ------------------------------------------------------------------------------------

def trace_id_of(correlation_id: str) -> int:
    """The 128-bit trace ID of a correlation ID: a UUID's own bits, else the first 16 bytes of SHA-256."""
    try:
        value = uuid.UUID(correlation_id).int
    except ValueError:
        value = 0
    if value == 0 and re.fullmatch(r"[0-9a-f]{32}", correlation_id or ""):
        value = int(correlation_id, 16)
    if value == 0:
        value = int.from_bytes(hashlib.sha256(correlation_id.encode()).digest()[:16], "big")
    return value or 1


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """(trace id hex, parent span id hex) of a well-formed W3C ``traceparent``, else None."""
    match = _TRACEPARENT.match((value or "").strip().lower())
    if not match or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None
    return match.group(1), match.group(2)


def accept_request(correlation_header: str | None, traceparent: str | None) -> str:
    """The request's correlation ID: the caller's ``X-Correlation-Id``, else the trace ID of its
    ``traceparent``, else a new one (``correlation.accept``)."""
    if not correlation_header:
        parsed = parse_traceparent(traceparent)
        if parsed:
            return correlation.accept(parsed[0])
    return correlation.accept(correlation_header)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span (None when tracing is off or no span is open)."""
    if _state["provider"] is None:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _parent(traceparent: str | None) -> Any:
    """An OpenTelemetry context whose parent is ``traceparent`` when it belongs to the current trace."""
    parsed = parse_traceparent(traceparent)
    if not parsed or int(parsed[0], 16) != trace_id_of(correlation.current()):
        return None
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    remote = SpanContext(int(parsed[0], 16), int(parsed[1], 16), is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(remote))


# --- spans --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _span(name: str, kind: str, attributes: dict[str, Any], parent: str | None = None) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    provider = _state["provider"]
    tracer = _tracers.get(provider)
    if tracer is None:
        tracer = _tracers[provider] = provider.get_tracer("aiplatform")
    with tracer.start_as_current_span(name, context=_parent(parent), kind=getattr(SpanKind, kind),
                                      attributes=_clean(attributes), record_exception=False,
                                      set_status_on_exception=False) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute(ERROR_TYPE, type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            raise


def span(name: str, attributes: dict[str, Any] | None = None, *, kind: str = "INTERNAL",
         parent: str | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (``with tracing.span(...) as s``; ``s`` is None when tracing is off)."""
    if not enabled():
        return contextlib.nullcontext()
    return _span(name, kind, attributes or {}, parent)


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None and v != ""}


def set_attributes(target: Any, attributes: dict[str, Any]) -> None:
    """Add attributes to a span from ``span`` (no-op when it is None)."""
    if target is not None:
        target.set_attributes(_clean(attributes))


def traced(name: str, attributes: Callable[..., dict[str, Any]] | None = None, *,
           kind: str = "INTERNAL") -> Callable[[F], F]:
    """Decorator: the function runs inside a span; ``attributes(*args, **kwargs)`` names what it acts on."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not enabled():
                return fn(*args, **kwargs)
            attrs = _safe(attributes, *args, **kwargs) if attributes else {}
            tool = attrs.get(GEN_AI_TOOL_NAME)
            with _span(f"{name} {tool}" if tool else name, kind, attrs):
                return fn(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


def _safe(attributes: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        return attributes(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a span's attributes never fail the call
        return {}


def tool_attrs(tool: str, tool_type: str = "function") -> dict[str, Any]:
    """A tool call's span: ``execute_tool`` with ``gen_ai.tool.name``."""
    return {GEN_AI_OPERATION_NAME: "execute_tool", GEN_AI_TOOL_NAME: tool, GEN_AI_TOOL_TYPE: tool_type,
            WORKSPACE_ID: _workspace.get()}


def retrieval_attrs(workspace_id: str) -> dict[str, Any]:
    """A knowledge search's span (the query text is content: never an attribute here)."""
    return {GEN_AI_OPERATION_NAME: "retrieval", GEN_AI_DATA_SOURCE_ID: "knowledge", WORKSPACE_ID: workspace_id}


def query_attrs(workspace_id: str) -> dict[str, Any]:
    """A federated query's span (the SQL may quote values: never an attribute)."""
    return {DB_SYSTEM_NAME: "duckdb", DB_OPERATION_NAME: "SELECT", WORKSPACE_ID: workspace_id}


def sync_attrs(workspace_id: str, sync_id: str) -> dict[str, Any]:
    """A connector sync run's span."""
    return {WORKSPACE_ID: workspace_id, SYNC_ID: sync_id}


# --- requests and queued work -----------------------------------------------------------------------

def serve(event: Any, get_response: Callable[[Any], Any]) -> Any:
    """``get_response(event)`` inside the server span of one HTTP request (a child of the caller's
    ``traceparent`` when it belongs to the request's trace); the response carries ``traceparent``."""
    if event is None or not enabled():
        response = get_response(event)
        flush_if_lambda()
        return response
    _workspace.set("")
    _content.set(False)
    method = getattr(event, "method", "") or ""
    route = (getattr(event, "context", None) or {}).get("resourcePath") or ""
    headers = getattr(event, "headers", None) or {}
    with _span(f"{method} {route}".strip(), "SERVER", {HTTP_REQUEST_METHOD: method, HTTP_ROUTE: route},
               parent=headers.get(TRACEPARENT)) as current:
        response = get_response(event)
        status = getattr(response, "status_code", 0)
        current.set_attribute(HTTP_RESPONSE_STATUS_CODE, status)
        if status >= 500:
            from opentelemetry.trace import Status, StatusCode

            current.set_status(Status(StatusCode.ERROR))
        tp = current_traceparent()
        if tp and isinstance(getattr(response, "headers", None), dict):
            response.headers[TRACEPARENT] = tp
    flush_if_lambda()
    return response


def message_attributes() -> dict[str, dict[str, str]]:
    """SQS message attributes carrying the current span (empty when tracing is off)."""
    tp = current_traceparent()
    return {TRACEPARENT: {"DataType": "String", "StringValue": tp}} if tp else {}


def record_span(record: dict[str, Any], queue: str) -> contextlib.AbstractContextManager[Any]:
    """The consumer span of one SQS record, a child of the span that sent it (its ``traceparent``)."""
    if not enabled():
        return contextlib.nullcontext()
    attrs = record.get("messageAttributes") or {}
    parent = (attrs.get(TRACEPARENT) or {}).get("stringValue")
    _workspace.set("")
    _content.set(False)
    return _span(f"process {queue}", "CONSUMER", {MESSAGING_SYSTEM: "aws_sqs", MESSAGING_DESTINATION_NAME: queue,
                                                   MESSAGING_OPERATION_TYPE: "process"}, parent)


# --- model calls ----------------------------------------------------------------------------------------

def set_workspace(scope: Any) -> None:
    """The workspace a request acts for (a ``RequestScope``): its span gets the attribute, and its setting
    ``trace_content`` decides whether prompts and answers become attributes."""
    if _state["provider"] is None or not getattr(scope, "workspace_id", None):
        return
    try:
        opted_in = json.loads(getattr(scope.workspace, "settings", None) or "{}").get(TRACE_CONTENT) is True
    except (ValueError, AttributeError):
        opted_in = False
    _workspace.set(scope.workspace_id)
    _content.set(opted_in)
    set_attributes(trace_current(), {WORKSPACE_ID: scope.workspace_id})


def _model_attrs(chosen: Any, prompt: Any, operation: str) -> dict[str, Any]:
    spec = chosen.chosen
    return {GEN_AI_OPERATION_NAME: operation, GEN_AI_SYSTEM: spec.provider_kind, GEN_AI_PROVIDER_NAME: spec.provider,
            GEN_AI_REQUEST_MODEL: spec.model, GEN_AI_REQUEST_MAX_TOKENS: getattr(prompt, "max_tokens", None)}


def _completion_attrs(completion: Any, prompt: Any, workspace_id: str | None) -> dict[str, Any]:
    reason = "tool_calls" if getattr(completion, "tool_calls", None) else "stop"
    attrs: dict[str, Any] = {GEN_AI_USAGE_INPUT_TOKENS: completion.input_tokens,
                             GEN_AI_USAGE_OUTPUT_TOKENS: completion.output_tokens,
                             GEN_AI_RESPONSE_FINISH_REASONS: [reason]}
    if workspace_id and _content.get():
        attrs[GEN_AI_INPUT_MESSAGES] = json.dumps(
            [{"role": m.get("role"), "content": m.get("content")} for m in prompt.messages], default=str)
        attrs[GEN_AI_OUTPUT_MESSAGES] = json.dumps([{"role": "assistant", "content": completion.text}])
    return attrs


def model_call(fn: F) -> F:
    """Decorator of ``llm.service.complete(chosen, prompt)``: one ``chat`` span per model call."""
    @functools.wraps(fn)
    def wrapper(chosen: Any, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        if not enabled():
            return fn(chosen, prompt, *args, **kwargs)
        attrs = _model_attrs(chosen, prompt, "chat")
        with _span(f"chat {attrs[GEN_AI_REQUEST_MODEL]}", "CLIENT", attrs) as current:
            completion = fn(chosen, prompt, *args, **kwargs)
            set_attributes(current, _completion_attrs(completion, prompt, _workspace.get()))
            return completion

    return cast(F, wrapper)


def model_stream(fn: F) -> F:
    """Decorator of ``llm.service.stream(chosen, prompt)``: the span lasts until the final ``Completion``."""
    @functools.wraps(fn)
    def wrapper(chosen: Any, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        if not enabled():
            return fn(chosen, prompt, *args, **kwargs)
        return _streamed(fn, chosen, prompt, *args, **kwargs)

    return cast(F, wrapper)


def _streamed(fn: Callable[..., Any], chosen: Any, prompt: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    attrs = _model_attrs(chosen, prompt, "chat")
    with _span(f"chat {attrs[GEN_AI_REQUEST_MODEL]}", "CLIENT", attrs) as current:
        for part in fn(chosen, prompt, *args, **kwargs):
            if not isinstance(part, str):
                set_attributes(current, _completion_attrs(part, prompt, _workspace.get()))
            yield part


# --- AWS calls ----------------------------------------------------------------------------------------

def instrument_botocore(session: Any) -> None:
    """One span per AWS API call of every client of ``session`` (botocore events; installed once)."""
    session.events.register("before-parameter-build.dynamodb", _dynamodb_tables)
    session.events.register("before-call", _aws_before)
    session.events.register("after-call", _aws_after)
    session.events.register("after-call-error", _aws_error)


def _dynamodb_tables(params: Any = None, context: Any = None, **_: Any) -> None:
    """The call's table names (its parameters are seen here, before they are serialized)."""
    if _state["provider"] is None or context is None or not isinstance(params, dict):
        return
    if params.get("TableName"):
        tables = [params["TableName"]]
    elif params.get("TransactItems"):
        tables = sorted({op.get("TableName", "") for item in params["TransactItems"] for op in item.values()})
    else:
        tables = sorted(params.get("RequestItems") or {})
    context["_trace_tables"] = tables


def _aws_before(model: Any = None, context: Any = None, **_: Any) -> None:
    if _state["provider"] is None or context is None or model is None:
        return
    attrs: dict[str, Any] = {RPC_SYSTEM: "aws-api", RPC_SERVICE: model.service_model.service_name,
                             RPC_METHOD: model.name, AWS_DYNAMODB_TABLE_NAMES: context.pop("_trace_tables", None)}
    cm = _span(f"{model.service_model.service_name}.{model.name}", "CLIENT", attrs)
    cm.__enter__()
    context["_trace_span"] = cm


def _aws_after(http_response: Any = None, parsed: Any = None, context: Any = None, **_: Any) -> None:
    cm = (context or {}).pop("_trace_span", None)
    if cm is not None:
        meta = (parsed or {}).get("ResponseMetadata") or {} if isinstance(parsed, dict) else {}
        set_attributes(trace_current(), {AWS_REQUEST_ID: meta.get("RequestId"),
                                         HTTP_RESPONSE_STATUS_CODE: meta.get("HTTPStatusCode")})
        cm.__exit__(None, None, None)


def _aws_error(exception: Any = None, context: Any = None, **_: Any) -> None:
    cm = (context or {}).pop("_trace_span", None)
    if cm is not None:
        set_attributes(trace_current(), {ERROR_TYPE: type(exception).__name__})
        cm.__exit__(None, None, None)


def trace_current() -> Any:
    """The current span (None when tracing is off)."""
    if _state["provider"] is None:
        return None
    from opentelemetry import trace

    return trace.get_current_span()
