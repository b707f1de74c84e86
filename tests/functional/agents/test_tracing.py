"""An agent run traced end to end: the request that starts it, the queued message, the worker's consumer
span in the same trace, one ``chat`` span per model call (an OpenAI-compatible endpoint) and one
``execute_tool`` span per tool call, named as the GenAI semantic conventions name them."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from chalicelib.core.telemetry import tracing
from tests.functional.agents.helpers import member, run_once
from tests.functional.agents.scripted_model import ScriptedModel
from tests.functional.conftest import Tenant


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(exporter))
    yield exporter
    tracing.use_processor(None)


def test_an_agent_run_is_one_trace_with_model_and_tool_spans(seeded: Tenant, model: ScriptedModel,
                                                             spans: InMemorySpanExporter) -> None:
    user = member(seeded.workspace_id)
    model.turns = [{"tool": "catalog_search", "input": {"query": "orders"}}, {"answer": "Orders are in orders."}]
    body: dict[str, Any] = {"name": "finder", "instructions": "Find datasets.", "model": "auto",
                            "tools": ["catalog_search"],
                            "limits": {"max_steps": 4, "deadline": "PT5M", "max_tokens": 20000}}
    done = run_once(seeded.region, user.token, body, {"question": "Where are orders?"})
    assert done["status"] == "completed", done
    finished = spans.get_finished_spans()
    start = next(s for s in finished if s.kind.name == "SERVER" and s.attributes["http.request.method"] == "POST"
                 and "/runs" in s.attributes["http.route"])
    consumer = next(s for s in finished if s.kind.name == "CONSUMER")
    assert consumer.context.trace_id == start.context.trace_id  # the worker continues the request's trace
    calls = [s for s in finished if s.attributes.get(gen_ai.GEN_AI_OPERATION_NAME) == "chat"]
    assert len(calls) == 2
    assert all(s.attributes[gen_ai.GEN_AI_SYSTEM] == "openai" and s.attributes[gen_ai.GEN_AI_REQUEST_MODEL]
               == "tool-model" and s.context.trace_id == start.context.trace_id for s in calls)
    assert [tuple(s.attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS]) for s in calls] == [("tool_calls",), ("stop",)]
    (tool,) = [s for s in finished if s.attributes.get(gen_ai.GEN_AI_OPERATION_NAME) == "execute_tool"]
    assert tool.name == "execute_tool catalog_search"
    assert tool.attributes[gen_ai.GEN_AI_TOOL_NAME] == "catalog_search"
    assert gen_ai.GEN_AI_INPUT_MESSAGES not in calls[0].attributes  # no opt-in: no content
