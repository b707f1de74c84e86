"""``POST /v1/chat/completions`` and ``GET /v1/models`` in OpenAI's shapes, in process: the grounded answer with
verified citations as extension fields, the chunk stream ending in [DONE], usage on request, OpenAI-shaped
errors for bad input (nothing stored), tools refused, idempotent replays, Viewers refused, MCP tokens refused."""
from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.chat.models import chats
from chalicelib.core import audit
from chalicelib.core.tokens import mcp_resource
from chalicelib.identity.oauth.signing import issue_access_token
from tests.functional.chat import helpers
from tests.functional.chat.helpers import post
from tests.functional.chat.test_bad_input import US_ONLY, _nothing_stored
from tests.functional.conftest import Tenant, bearer

QUESTION = "How many vacation days do employees get?"


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, US_ONLY)
    return helpers.build(tenant)


def ask(**extra: Any) -> dict[str, Any]:
    return {"model": "builtin/extractive", "messages": [{"role": "user", "content": QUESTION}], **extra}


def test_models_answer_in_both_shapes(world: helpers.World) -> None:
    with helpers.client() as c:
        body = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body
    assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["auto"] + [m["id"] for m in body["items"]]
    assert all(m["object"] == "model" and isinstance(m["created"], int) for m in body["data"])
    assert "builtin/extractive" in [m["id"] for m in body["data"]]


def test_completion_is_the_grounded_chat(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chat/completions", world.member.token, ask(temperature=0.2, user="u-1"))
    assert r.status_code == 200, r.body
    body = json.loads(r.body)
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-msg_")
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant" and "[1]" in message["content"] and "thirty vacation days" in message["content"]
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    assert body["citations"] and all(cit["verified"] for cit in body["citations"])
    assert body["citations"][0]["source"]["dataset_id"] == world.handbook and body["grounding"]["ratio"] > 0
    assert "board decided" not in r.body.decode()  # an Admin-only document never reaches a Member
    stored = chats(tenant.region).get(tenant.workspace_id, body["chat_id"])
    assert json.loads(stored.messages)[-1]["content"] == message["content"]
    assert any(e.action == "chat.answered" for e in audit.model(tenant.region).query(tenant.workspace_id))


def test_stream_ends_in_done_with_usage_on_request(world: helpers.World) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chat/completions", world.member.token,
                 ask(stream=True, stream_options={"include_usage": True}))
        plain = post(c, "/v1/chat/completions", world.member.token, ask(stream=True))
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    lines = [line[6:] for line in r.body.decode().split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(x) for x in lines[:-1]]
    assert {ch["object"] for ch in chunks} == {"chat.completion.chunk"} and len({ch["id"] for ch in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks if ch["choices"])
    assert "[1]" in text
    finish = next(ch for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"] == "stop")
    assert finish["citations"][0]["verified"] is True
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    plain_chunks = [json.loads(x[6:]) for x in plain.body.decode().split("\n\n") if x.startswith("data: {")]
    assert plain_chunks and all("usage" not in ch for ch in plain_chunks)  # usage only when asked for


BAD: list[tuple[str, Any, str | None, str]] = [
    ("empty messages", {"model": "auto", "messages": []}, "messages", "empty_array"),
    ("unknown field", ask(frobnicate=1), "frobnicate", "unknown_parameter"),
    ("wrong type", {"model": "auto", "messages": "hi"}, "messages", "invalid_type"),
    ("temperature out of range", ask(temperature=3), "temperature", "invalid_value"),
    ("n above one", ask(n=2), "n", "invalid_value"),
    ("image part", {"model": "auto", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]}, "messages[0].content[0]", "invalid_value"),
    ("tool message", {"model": "auto", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role",
     "invalid_value"),
    ("tools", ask(tools=[{"type": "function", "function": {"name": "f"}}]), "tools", "tools_not_supported"),
    ("last not the user's", {"model": "auto", "messages": [{"role": "user", "content": "q"},
                                                           {"role": "assistant", "content": "a"}]}, "messages",
     "invalid_value"),
    ("missing model", {"messages": [{"role": "user", "content": "q"}]}, "model", "missing_required_parameter"),
]


@pytest.mark.parametrize("label,body,param,code", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_an_openai_400_and_stores_nothing(tenant: Tenant, world: helpers.World, label: str, body: Any,
                                                        param: str | None, code: str) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chat/completions", world.member.token, body, headers={"Idempotency-Key": "bad-1"})
    assert r.status_code == 400, r.body
    assert r.headers["Content-Type"] == "application/json"
    error = json.loads(r.body)["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["code"] == code
    _nothing_stored(tenant.workspace_id, tenant.region)


def test_unknown_model_tools_none_and_idempotent_replay(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chat/completions", world.member.token, ask(model="nope/model"))
        assert r.status_code == 404 and json.loads(r.body)["error"]["code"] == "model_not_found"
        none = post(c, "/v1/chat/completions", world.member.token,
                    ask(tools=[{"type": "function", "function": {"name": "f"}}], tool_choice="none"))
        assert none.status_code == 200, none.body
        first = post(c, "/v1/chat/completions", world.member.token, ask(), headers={"Idempotency-Key": "k-1"})
        again = post(c, "/v1/chat/completions", world.member.token, ask(), headers={"Idempotency-Key": "k-1"})
        other = post(c, "/v1/chat/completions", world.member.token, ask(seed=1), headers={"Idempotency-Key": "k-1"})
    assert json.loads(first.body) == json.loads(again.body) and again.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 409 and json.loads(other.body)["error"]["code"] == "idempotency_key_reused"
    assert len(list(chats(tenant.region).query(tenant.workspace_id))) == 2  # tool_choice none, and k-1 once


def test_auth_errors_are_openai_shaped(tenant: Tenant, world: helpers.World) -> None:
    mcp, _ = issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                                roles=["admin"], amr=["pwd", "mfa"], audience=mcp_resource())
    with helpers.client() as c:
        viewer = post(c, "/v1/chat/completions", world.viewer.token, ask())
        nobody = c.http.post("/v1/chat/completions", headers={"Content-Type": "application/json"},
                             body=json.dumps(ask()))
        wrong_audience = post(c, "/v1/chat/completions", mcp, ask())
    assert viewer.status_code == 403 and json.loads(viewer.body)["error"]["type"] == "permission_error"
    assert nobody.status_code == 401 and json.loads(nobody.body)["error"]["code"] == "invalid_api_key"
    assert wrong_audience.status_code == 401 and json.loads(wrong_audience.body)["error"]["code"] == "invalid_api_key"
