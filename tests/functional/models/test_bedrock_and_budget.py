"""A Bedrock connection calls only the model ids its Admin declared, in the workspace's region, checked at
each call; and a workspace's monthly token budget, once spent, answers 429 with Retry-After and the
RateLimit fields on chats, chat completions and agent runs. moto does not implement Converse: Bedrock's
answers come from botocore's Stubber, which also fails on any call it was not given."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from chalicelib.core import aws
from chalicelib.core.tenancy import workspace_scope
from chalicelib.llm import connections
from chalicelib.llm.access import settings_item
from chalicelib.llm.prompt import Prompt
from chalicelib.llm.providers import bedrock
from chalicelib.llm.providers.openai_http import ProviderError
from chalicelib.llm.routing import Routing
from chalicelib.llm.service import complete
from tests.functional.agents.helpers import DEMO_PLAN_AGENT
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer

HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
MODEL = f"team-claude/{HAIKU}"
ANSWER = {"output": {"message": {"role": "assistant", "content": [{"text": "Thirty days."}]}},
          "stopReason": "end_turn", "usage": {"inputTokens": 80, "outputTokens": 30, "totalTokens": 110},
          "metrics": {"latencyMs": 5}}


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, None)
    return helpers.build(tenant)


@pytest.fixture
def claude(tenant: Tenant, world: helpers.World) -> Iterator[Stubber]:
    """A Bedrock connection with one declared model; yields the Stubber of the region's runtime client."""
    with helpers.client() as c:
        made = post(c, "/v1/models/connections", tenant.token, {"name": "team-claude", "kind": "bedrock",
                                                                 "region": "us-east", "models": [HAIKU]})
    assert made.status_code == 201, made.body
    spec = connections.workspace_registry(tenant.workspace_id, settings_item(workspace_scope(tenant.workspace_id))).get(MODEL)
    with Stubber(bedrock.client(spec, tenant.region)) as stub:
        yield stub


def _spec(tenant: Tenant) -> Any:
    return connections.workspace_registry(tenant.workspace_id, settings_item(workspace_scope(tenant.workspace_id))).get(MODEL)


@pytest.mark.parametrize("model_id", [
    "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-opus-20240229-v1:0",
    "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
    "us.anthropic.claude-3-opus-20240229-v1:0",
    "anthropic/claude", "provisioned-model-1",
])
def test_a_bedrock_connection_declares_only_foundation_model_ids_of_the_region(
        tenant: Tenant, world: helpers.World, model_id: str) -> None:
    with helpers.client() as c:
        made = post(c, "/v1/models/connections", tenant.token, {"name": "team-claude", "kind": "bedrock",
                                                                 "region": "us-east", "models": [model_id]})
        listed = c.http.get("/v1/models/connections", headers=bearer(tenant.token)).json_body
    assert made.status_code == 400, made.body
    assert made.json_body["errors"][0]["field"] == "models[0].id"
    assert listed["items"] == []


def test_only_the_declared_model_is_called_and_only_while_declared(tenant: Tenant, world: helpers.World,
                                                                   claude: Stubber) -> None:
    claude.add_response("converse", ANSWER, {"modelId": HAIKU, "messages": ANY, "system": ANY,
                                             "inferenceConfig": ANY})
    with helpers.client() as c:
        chat = post(c, "/v1/chats", world.member.token, ask("How many vacation days?", model=MODEL))
        other = post(c, "/v1/chats", world.member.token,
                     ask("Vacation days?", model="team-claude/anthropic.claude-3-opus-20240229-v1:0"))
    assert chat.status_code == 201, chat.body
    assert chat.json_body["model"] == MODEL
    assert other.status_code == 400 and other.json_body["code"] == "unknown_model"
    # checked at each call: a model the connection no longer declares, or another region, is never called
    spec = _spec(tenant)
    with helpers.client() as c:
        changed = c.http.patch("/v1/models/connections/team-claude", body=b'{"models": ["amazon.nova-lite-v1:0"]}',
                               headers={**bearer(tenant.token), "Content-Type": "application/json"})
    assert changed.status_code == 200, changed.body
    prompt = Prompt([{"role": "user", "content": "Hi"}], max_tokens=5)
    for region in (tenant.region, "eu-central-1"):
        with pytest.raises(ProviderError) as refused:
            complete(Routing(spec, region, "stale routing", workspace_id=tenant.workspace_id), prompt)
        assert refused.value.code == "model_not_declared"
    claude.assert_no_pending_responses()  # the one call was the declared model's; no other was made


def _budget(c: Any, token: str, body: Any) -> Any:
    return c.http.put("/v1/models/budget", headers={**bearer(token), "Content-Type": "application/json"},
                      body=json.dumps(body))


def test_a_spent_monthly_budget_answers_429_on_chats_completions_and_runs(
        tenant: Tenant, world: helpers.World, claude: Stubber) -> None:
    claude.add_response("converse", ANSWER, {"modelId": HAIKU, "messages": ANY, "system": ANY,
                                             "inferenceConfig": ANY})
    with helpers.client() as c:
        assert _budget(c, world.member.token, {"monthly_tokens": 100}).status_code == 403
        for bad in ({"monthly_tokens": 0}, {"monthly_tokens": "100"}, {"monthly_tokens": True}, {"tokens": 5},
                    {"monthly_tokens": 10**13}, [100]):
            r = _budget(c, tenant.token, bad)
            assert r.status_code == 400 and r.json_body["errors"][0]["field"] == "monthly_tokens", (bad, r.body)
        assert c.http.get("/v1/models/budget", headers=bearer(tenant.token)).json_body["monthly_tokens"] is None
        set_ = _budget(c, tenant.token, {"monthly_tokens": 100})
        agent = post(c, "/v1/agents", tenant.token, DEMO_PLAN_AGENT).json_body
        first = post(c, "/v1/chats", world.member.token, ask("How many vacation days?", model=MODEL))
        state = c.http.get("/v1/models/budget", headers=bearer(tenant.token)).json_body
        spent = [post(c, "/v1/chats", world.member.token, ask("Vacation days?")),
                 post(c, "/v1/chat/completions", world.member.token, ask("Vacation days?")),
                 post(c, f"/v1/agents/{agent['id']}/runs", tenant.token,
                      {"input": {"topic": "orders", "sql": "SELECT 1"}})]
        lifted = _budget(c, tenant.token, {"monthly_tokens": None})
        again = post(c, "/v1/chats", world.member.token, ask("Vacation days?", model="builtin/extractive"))
    assert set_.status_code == 200 and set_.json_body["monthly_tokens"] == 100, set_.body
    assert first.status_code == 201, first.body  # under budget when it started: it finishes and counts
    assert state["used_tokens"] == 110 and state["remaining_tokens"] == 0
    for r in spent:
        assert r.status_code == 429, r.body
        h = {k.lower(): v for k, v in r.headers.items()}
        retry = int(h["retry-after"])
        assert 0 < retry <= 31 * 86400
        assert re.fullmatch(r'"monthly-tokens";q=100;qu="tokens";w=\d+', h["ratelimit-policy"]), h
        assert h["ratelimit"] == f'"monthly-tokens";r=0;t={retry}'
    assert spent[0].json_body["code"] == "token_budget_exhausted"
    assert "token budget" in spent[1].body.decode()  # the OpenAI-shaped error says it too
    assert lifted.status_code == 200 and lifted.json_body["monthly_tokens"] is None
    assert again.status_code == 201, again.body
    items = aws.client("dynamodb", "us-east-1").scan(TableName=aws.table_name("agent_runs"))["Items"]
    assert not [i for i in items if i["workspace_id"]["S"] == tenant.workspace_id]  # the refused run was not queued
