"""Bad chat requests get a 4xx problem+json and store nothing: no chat, no usage, no audit event, no
idempotency record, no lineage."""
from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.chat.models import chats, usage
from chalicelib.core import audit
from chalicelib.core.store.idempotency import IdempotencyAttrs
from chalicelib.core.store.tables import regional
from chalicelib.gateway import models as gw_models
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask, post
from tests.functional.conftest import Tenant, bearer, make_tenant

US_ONLY = {"preference": ["us-llm/small"], "providers": [
    {"id": "us-llm", "kind": "openai", "endpoints": {"us-east-1": {"base_url": "http://127.0.0.1:9"}},
     "models": [{"id": "small", "context_tokens": 32000}]}]}

CASES: list[tuple[str, Any, int, str]] = [
    ("empty messages", {"model": "auto", "messages": []}, 400, "validation_failed"),
    ("unknown role", {"model": "auto", "messages": [{"role": "robot", "content": "hi"}]}, 400, "validation_failed"),
    ("non-string content", {"model": "auto", "messages": [{"role": "user", "content": 5}]}, 400,
     "validation_failed"),
    ("list content", {"model": "auto", "messages": [{"role": "user", "content": ["a"]}]}, 400, "validation_failed"),
    ("empty content", {"model": "auto", "messages": [{"role": "user", "content": "  "}]}, 400, "validation_failed"),
    ("oversized content", ask("x" * 32_001), 400, "validation_failed"),
    ("too many messages", {"model": "auto", "messages": [{"role": "user", "content": "q"}] * 51}, 400,
     "validation_failed"),
    ("last message not the user's", {"model": "auto", "messages": [{"role": "user", "content": "q"},
                                                                   {"role": "assistant", "content": "a"}]}, 400,
     "validation_failed"),
    ("extra message field", {"model": "auto", "messages": [{"role": "user", "content": "q", "name": "x"}]}, 400,
     "validation_failed"),
    ("unknown field", {**ask("q"), "temperature": 2}, 400, "validation_failed"),
    ("missing model", {"messages": [{"role": "user", "content": "q"}]}, 400, "validation_failed"),
    ("stream not boolean", ask("q", stream="yes"), 400, "validation_failed"),
    ("not an object", ["model"], 400, "invalid_body"),
    ("unknown model", ask("q", model="nope/model"), 400, "unknown_model"),
    ("messages without roles", {"messages": [{"content": "A\u001ex"}, {"content": "LPT1"}], "stream": "x",
                                "model": "\u0007~"}, 400, "validation_failed"),
]


@pytest.fixture
def world(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> helpers.World:
    helpers.use_providers(monkeypatch, US_ONLY)
    return helpers.build(tenant)


def _nothing_stored(ws: str, region: str) -> None:
    assert list(chats(region).query(ws)) == []
    assert list(usage().query(ws)) == []
    assert [e for e in audit.model(region).query(ws) if e.action.startswith("chat.")] == []
    assert [i for i in regional(IdempotencyAttrs, region).scan() if i.key.startswith(ws)] == []
    assert [e for e in gw_models.lineage_edges(region).query(ws) if e.target_type == "chat_answer"] == []


def _problem(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, (r.status_code, r.body)
    assert r.headers["Content-Type"] == "application/problem+json"
    body = json.loads(r.body)
    assert body["code"] == code
    assert body["correlation_id"]


@pytest.mark.parametrize("label,body,status,code", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_stores_nothing(tenant: Tenant, world: helpers.World, label: str, body: Any,
                                                 status: int, code: str) -> None:
    with helpers.client() as c:
        r = post(c, "/v1/chats", world.member.token, body, headers={"Idempotency-Key": "bad-1"})
    _problem(r, status, code)
    _nothing_stored(tenant.workspace_id, tenant.region)


def test_malformed_json(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        r = c.http.post("/v1/chats", headers={**bearer(world.member.token), "Content-Type": "application/json"},
                        body="{not json")
    _problem(r, 400, "malformed_json")
    _nothing_stored(tenant.workspace_id, tenant.region)


def test_model_not_allowed_for_the_role(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        put = c.http.put("/v1/models/allow-list", headers={**bearer(tenant.token), "Content-Type": "application/json"},
                         body=json.dumps({"roles": {"member": []}}))
        assert put.status_code == 200, put.body
        named = post(c, "/v1/chats", world.member.token, ask("q", model="builtin/extractive"))
        auto = post(c, "/v1/chats", world.member.token, ask("q"))
        listed = c.http.get("/v1/models", headers=bearer(world.member.token)).json_body["items"]
        admin = post(c, "/v1/chats", tenant.token, ask("How is travel booked?", model="builtin/extractive"))
    _problem(named, 422, "model_not_allowed")
    _problem(auto, 422, "no_model_available")
    assert json.loads(auto.body)["routing"]["excluded"][0]["reason"] == "not allowed for your role"
    assert listed == []
    assert admin.status_code == 201  # the Admin role has no list: every model of the region


def test_model_without_an_endpoint_in_the_workspace_region(stack: None, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, US_ONLY)
    eu = make_tenant("eu-owner@example.com", residency="eu-central", name="Euro")
    with helpers.client() as c:
        r = post(c, "/v1/chats", eu.token, ask("q", model="us-llm/small"))
    _problem(r, 422, "model_not_available")
    _nothing_stored(eu.workspace_id, eu.region)


def test_bad_allow_list(tenant: Tenant, world: helpers.World) -> None:
    with helpers.client() as c:
        for body in ({"roles": {"boss": []}}, {"roles": {"member": ["nope/x"]}}, {"roles": {"member": "all"}},
                     {"roles": {}, "extra": 1}, []):
            r = c.http.put("/v1/models/allow-list", headers={**bearer(tenant.token), "Content-Type": "application/json"},
                           body=json.dumps(body))
            assert r.status_code == 400, body
        assert c.http.put("/v1/models/allow-list", headers={**bearer(world.member.token),
                                                            "Content-Type": "application/json"},
                          body=json.dumps({"roles": {}})).status_code == 403
        assert c.http.get("/v1/models/allow-list", headers=bearer(tenant.token)).json_body == {"roles": {}}
