"""Bedrock requests checked with botocore's Stubber (moto does not implement Converse): the client is
in the workspace's region, the model id is single-region, and the Converse shape is right."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.stub import ANY, Stubber

from chalicelib.core import process_state
from chalicelib.llm.prompt import Passage, Prompt
from chalicelib.llm.providers import bedrock
from chalicelib.llm.providers.openai_http import ProviderError
from chalicelib.llm.registry import parse
from chalicelib.llm.routing import Routing
from chalicelib.llm.service import complete

CONFIG = {"providers": [{"id": "bedrock", "kind": "bedrock", "regions": ["us-east-1", "eu-central-1"], "models": [
    {"id": "anthropic.claude-3-haiku-20240307-v1:0", "context_tokens": 200000},
    {"id": "eu.anthropic.claude-3-haiku-20240307-v1:0", "context_tokens": 200000},
    {"id": "global.anthropic.claude-sonnet-4-v1:0", "context_tokens": 200000},
    {"id": "us.meta.llama3-70b-instruct-v1:0", "context_tokens": 8000}]}]}


@pytest.fixture(autouse=True)
def _creds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [n for n in __import__("os").environ if n.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    process_state.reset_all(derived=True)
    yield
    process_state.reset_all(derived=True)


def _prompt() -> Prompt:
    return Prompt([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Vacation days?"}],
                  [Passage(1, "handbook", "Employees get thirty vacation days per year.")], max_tokens=256)


def test_cross_region_profiles_are_never_offered() -> None:
    reg = parse(CONFIG)
    single = reg.get("bedrock/anthropic.claude-3-haiku-20240307-v1:0")
    assert single is not None
    assert single.regions == ("us-east-1", "eu-central-1")
    for profile in ("bedrock/eu.anthropic.claude-3-haiku-20240307-v1:0", "bedrock/global.anthropic.claude-sonnet-4-v1:0",
                    "bedrock/us.meta.llama3-70b-instruct-v1:0"):
        assert reg.get(profile).regions == ()
    assert [m.id for m in reg.in_region("eu-central-1")] == ["builtin/extractive", single.id]


@pytest.mark.parametrize("region", ["eu-central-1", "us-east-1"])
def test_converse_runs_in_the_workspace_region(region: str) -> None:
    spec = parse(CONFIG).get("bedrock/anthropic.claude-3-haiku-20240307-v1:0")
    client = bedrock.client(spec, region)
    assert client.meta.region_name == region
    expected = {
        "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
        "system": [{"text": ANY}, {"text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"text": "Vacation days?"}]}],
        "inferenceConfig": {"maxTokens": 256, "temperature": 0.0},
    }
    response = {"output": {"message": {"role": "assistant", "content": [
        {"text": 'Thirty days [1: "Employees get thirty vacation days per year."].'}]}},
        "stopReason": "end_turn", "usage": {"inputTokens": 50, "outputTokens": 12, "totalTokens": 62},
        "metrics": {"latencyMs": 10}}
    with Stubber(client) as stub:
        stub.add_response("converse", response, expected)
        done = complete(Routing(spec, region, "test"), _prompt())
        stub.assert_no_pending_responses()
    assert done.text.startswith("Thirty days")
    assert (done.input_tokens, done.output_tokens) == (50, 12)
    req = bedrock.request(spec, region, _prompt())
    assert "thirty vacation days" in req["system"][0]["text"]  # the passages travel in the system prompt


def test_converse_refuses_a_region_the_model_does_not_serve() -> None:
    spec = parse({"providers": [{"id": "bedrock", "kind": "bedrock", "regions": ["us-east-1"],
                                 "models": [{"id": "amazon.nova-lite-v1:0"}]}]}).get("bedrock/amazon.nova-lite-v1:0")
    client = bedrock.client(spec, "eu-central-1")
    with Stubber(client) as stub:  # no response queued: any call would fail the stubber
        with pytest.raises(ProviderError):
            complete(Routing(spec, "eu-central-1", "test"), _prompt())
        stub.assert_no_pending_responses()


def test_converse_stream_request_shape_and_region() -> None:
    """ConverseStream's request is checked the same way (the Stubber cannot build an event stream, so the
    answer is empty)."""
    from chalicelib.llm.service import stream

    spec = parse(CONFIG).get("bedrock/anthropic.claude-3-haiku-20240307-v1:0")
    client = bedrock.client(spec, "eu-central-1")
    expected = {"modelId": "anthropic.claude-3-haiku-20240307-v1:0", "system": [{"text": ANY}, {"text": "Be brief."}],
                "messages": [{"role": "user", "content": [{"text": "Vacation days?"}]}],
                "inferenceConfig": {"maxTokens": 256, "temperature": 0.0}}
    with Stubber(client) as stub:
        stub.add_response("converse_stream", {"stream": {}}, expected)
        parts = list(stream(Routing(spec, "eu-central-1", "test"), _prompt()))
        stub.assert_no_pending_responses()
    assert parts[-1].text == ""
    assert parts[-1].input_tokens > 0


def test_converse_tool_config_and_tool_use_round_trip() -> None:
    """Model-chosen tools on Bedrock: the tools go as ``toolConfig``; the model's ``toolUse`` blocks come
    back as tool calls; the next request carries the assistant's ``toolUse`` and the ``toolResult``."""
    from chalicelib.llm.prompt import ToolCall

    spec = parse({"providers": [{"id": "bedrock", "kind": "bedrock", "regions": ["eu-central-1"], "models": [
        {"id": "anthropic.claude-3-haiku-20240307-v1:0", "tool_use": True, "max_answer_tokens": 200}]}]}).get(
        "bedrock/anthropic.claude-3-haiku-20240307-v1:0")
    tool = {"name": "query", "description": "Run SQL.",
            "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}
    client = bedrock.client(spec, "eu-central-1")
    first = Prompt([{"role": "system", "content": "Use tools."}, {"role": "user", "content": "How many orders?"}],
                   tools=[tool], max_tokens=1000)
    call = ToolCall("tu_1", "query", {"sql": "SELECT count(*) FROM orders"}, '{"sql": "SELECT count(*) FROM orders"}')
    second = Prompt(first.messages + [{"role": "assistant", "content": "", "tool_calls": [call]},
                                      {"role": "tool", "tool_call_id": "tu_1", "name": "query", "content": "[[72]]"}],
                    tools=[tool], max_tokens=1000)
    config = {"tools": [{"toolSpec": {"name": "query", "description": "Run SQL.",
                                      "inputSchema": {"json": tool["parameters"]}}}], "toolChoice": {"auto": {}}}
    with Stubber(client) as stub:
        stub.add_response("converse", {
            "output": {"message": {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "tu_1", "name": "query", "input": {"sql": "SELECT count(*) FROM orders"}}}]}},
            "stopReason": "tool_use", "usage": {"inputTokens": 30, "outputTokens": 9, "totalTokens": 39},
            "metrics": {"latencyMs": 5}},
            {"modelId": spec.model, "system": [{"text": "Use tools."}],
             "messages": [{"role": "user", "content": [{"text": "How many orders?"}]}],
             "inferenceConfig": {"maxTokens": 200, "temperature": 0.0}, "toolConfig": config})
        stub.add_response("converse", {
            "output": {"message": {"role": "assistant", "content": [{"text": "72 orders."}]}},
            "stopReason": "end_turn", "usage": {"inputTokens": 40, "outputTokens": 3, "totalTokens": 43},
            "metrics": {"latencyMs": 5}},
            {"modelId": spec.model, "system": [{"text": "Use tools."}], "messages": [
                {"role": "user", "content": [{"text": "How many orders?"}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu_1", "name": "query",
                                                               "input": {"sql": "SELECT count(*) FROM orders"}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "content": [{"text": "[[72]]"}],
                                                             "status": "success"}}]}],
             "inferenceConfig": {"maxTokens": 200, "temperature": 0.0}, "toolConfig": config})
        asked = complete(Routing(spec, "eu-central-1", "test"), first)
        answered = complete(Routing(spec, "eu-central-1", "test"), second)
        stub.assert_no_pending_responses()
    assert [(c.id, c.name, c.arguments) for c in asked.tool_calls] == [
        ("tu_1", "query", {"sql": "SELECT count(*) FROM orders"})]
    assert answered.text == "72 orders." and answered.tool_calls == []


def test_each_model_waits_its_own_timeout_and_a_timeout_is_a_clear_error() -> None:
    """The client of a model waits that model's ``timeout_seconds`` and does not retry; a read timeout
    (Converse or ConverseStream) is a ``ProviderError`` with code ``timeout``, never a hung request."""
    from botocore.exceptions import ReadTimeoutError

    from chalicelib.llm.service import stream

    reg = parse({"providers": [{"id": "bedrock", "kind": "bedrock", "regions": ["eu-central-1"], "models": [
        {"id": "amazon.nova-lite-v1:0", "timeout_seconds": 7},
        {"id": "amazon.nova-pro-v1:0", "timeout_seconds": 120}]}]})
    lite, pro = reg.get("bedrock/amazon.nova-lite-v1:0"), reg.get("bedrock/amazon.nova-pro-v1:0")
    fast, slow = bedrock.client(lite, "eu-central-1"), bedrock.client(pro, "eu-central-1")
    assert (fast.meta.config.read_timeout, slow.meta.config.read_timeout) == (7, 120)
    assert fast.meta.config.retries["total_max_attempts"] == 1  # one attempt: no retry doubles the wait
    assert bedrock.client(lite, "eu-central-1") is fast  # one client per model timeout and region

    def times_out(**_: object) -> None:
        raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.eu-central-1.amazonaws.com")

    for call in ("converse", "converse_stream"):
        original = getattr(fast, call)
        setattr(fast, call, times_out)
        try:
            with pytest.raises(ProviderError) as err:
                if call == "converse":
                    complete(Routing(lite, "eu-central-1", "test"), _prompt())
                else:
                    list(stream(Routing(lite, "eu-central-1", "test"), _prompt()))
            assert err.value.code == "timeout" and "7 s" in str(err.value)
        finally:
            setattr(fast, call, original)
