"""Request limits on every authenticated API: per token and per workspace, one conditional write per request in
the workspace's region, the IETF RateLimit fields on each answer, 429 with Retry-After, plan ceilings an Admin
may lower but not raise, and nothing done for a refused request."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.http import rate_limits
from chalicelib.core.tenancy import forget_scopes
from chalicelib.groups import create_app
from tests.functional.aws_calls import counting
from tests.functional.conftest import Tenant, bearer, make_tenant, stored_items
from tests.functional.gateway.data import token_for


def limit(c: Client, tenant: Tenant, **quotas: Any) -> Any:
    r = c.http.patch(f"/v1/workspaces/{tenant.workspace_id}", headers={**bearer(tenant.token),
                     "Content-Type": "application/json"}, body=json.dumps({"rate_limits": quotas or None}))
    forget_scopes()  # the next request reads the new setting (another container reads it within seconds)
    return r


def fields(r: Any) -> dict[str, Any]:
    """``RateLimit: "name";r=N;t=S`` as {name, r, t}."""
    name, *params = r.headers["RateLimit"].split(";")
    return {"name": name.strip('"'), **{k: int(v) for k, v in (p.split("=") for p in params)}}


@pytest.fixture(autouse=True)
def _frozen_clock(stack: None) -> Any:
    """The window must not turn over in the middle of a test: start each test at a window's beginning
    (after the stack's set-up, which resets the clock)."""
    clock.advance(rate_limits.WINDOW_SECONDS - clock.now() % rate_limits.WINDOW_SECONDS + 1)
    yield
    clock.reset()


def test_every_answer_carries_the_policy_and_what_is_left(tenant: Tenant) -> None:
    with Client(create_app("platform")) as c:
        first = c.http.get("/v1/me", headers=bearer(tenant.token))
        second = c.http.get("/v1/me", headers=bearer(tenant.token))
    assert first.status_code == second.status_code == 200
    plan = rate_limits.PLANS["free"]
    assert first.headers["RateLimit-Policy"] == (f'"token";q={plan.per_token};w=60, '
                                                 f'"workspace";q={plan.per_workspace};w=60')
    assert fields(first)["name"] == "token" and fields(second)["r"] == fields(first)["r"] - 1 == plan.per_token - 2
    assert 0 < fields(first)["t"] <= 60


def test_a_token_over_its_quota_gets_429_and_its_request_does_nothing(tenant: Tenant) -> None:
    member = token_for(tenant.workspace_id, "member")
    with Client(create_app("platform")) as c:
        assert limit(c, tenant, per_token=3).status_code == 200
        for _ in range(3):
            assert c.http.get("/v1/me", headers=bearer(member.token)).status_code == 200
        refused = c.http.post("/v1/chats", headers={**bearer(member.token), "Content-Type": "application/json"},
                              body=json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}))
        assert refused.status_code == 429 and refused.json_body["code"] == "rate_limited"
        assert 0 < int(refused.headers["Retry-After"]) <= 60 and fields(refused)["r"] == 0
        assert c.http.get("/v1/chats", headers=bearer(tenant.token)).json_body["items"] == []  # no chat was made
        assert c.http.get("/v1/me", headers=bearer(tenant.token)).status_code == 200  # another token still may
        clock.advance(rate_limits.WINDOW_SECONDS)  # the next window
        assert c.http.get("/v1/me", headers=bearer(member.token)).status_code == 200


def test_the_workspace_quota_holds_across_tokens(tenant: Tenant) -> None:
    others = [token_for(tenant.workspace_id, "member").token for _ in range(2)]
    with Client(create_app("platform")) as c:
        assert limit(c, tenant, per_workspace=5).status_code == 200  # the PATCH itself is the first request
        answers = [c.http.get("/v1/me", headers=bearer(token)).status_code for token in others * 3]
    assert answers == [200, 200, 200, 200, 429, 429]


def test_refused_requests_are_not_counted(tenant: Tenant) -> None:
    viewer = token_for(tenant.workspace_id, "viewer")
    with Client(create_app("platform")) as c:
        assert limit(c, tenant, per_token=2).status_code == 200
        for _ in range(3):  # a Viewer may not invite: 403 before any count
            r = c.http.post(f"/v1/workspaces/{tenant.workspace_id}/invitations", headers={
                **bearer(viewer.token), "Content-Type": "application/json"},
                body=json.dumps({"email": "x@example.com", "role": "member"}))
            assert r.status_code == 403
        assert c.http.get("/v1/me", headers=bearer("not-a-token")).status_code == 401
        assert [c.http.get("/v1/me", headers=bearer(viewer.token)).status_code for _ in range(3)] == [200, 200, 429]


def test_one_conditional_write_in_the_workspace_region(stack: None) -> None:
    eu = make_tenant("eu-owner@example.com", residency="eu-central", name="EU")
    with Client(create_app("platform")) as c:
        c.http.get("/v1/me", headers=bearer(eu.token))  # caches warm
        with counting() as calls:
            assert c.http.get("/v1/me", headers=bearer(eu.token)).status_code == 200
    assert calls["dynamodb UpdateItem request_counters"] == 1
    assert not [k for k in calls if "request_counters" in k and not k.startswith("dynamodb UpdateItem")]
    stored = stored_items("eu-central-1", "request_counters")
    assert len(stored) == 1 and eu.workspace_id in stored[0] and eu.token not in stored[0]
    assert stored_items("us-east-1", "request_counters") == []
    assert eu.claims["jti"] not in stored[0]  # tokens are counted under a digest


def test_admins_lower_the_plan_quotas_but_never_raise_them(tenant: Tenant) -> None:
    with Client(create_app("platform")) as c:
        too_high = limit(c, tenant, per_token=rate_limits.PLANS["free"].per_token + 1)
        assert too_high.status_code == 422 and too_high.json_body["errors"][0]["field"] == "rate_limits.per_token"
        for bad in ({"per_token": 0}, {"per_token": "10"}, {"per_minute": 5}, {"per_token": True}):
            assert limit(c, tenant, **bad).status_code == 400, bad
        assert limit(c, tenant, per_token=100).json_body["settings"]["rate_limits"] == {
            "per_token": 100, "per_workspace": rate_limits.PLANS["free"].per_workspace}
        back = limit(c, tenant)  # null: the plan's quotas again
        assert back.json_body["settings"]["rate_limits"]["per_token"] == rate_limits.PLANS["free"].per_token
        events = c.http.get("/v1/audit/events?limit=5", headers=bearer(tenant.token)).json_body["events"]
        assert any("rate_limits" in e["details"].get("changes", {}) for e in events)


def test_every_surface_is_limited(tenant: Tenant) -> None:
    """The gateway's REST and GraphQL answer through the same path as the platform API."""
    with Client(create_app("platform")) as c:
        assert limit(c, tenant, per_token=2).status_code == 200
    with Client(create_app("gateway")) as c:
        assert c.http.get("/v1/catalog/datasets", headers=bearer(tenant.token)).status_code == 200
        r = c.http.post("/graphql", headers={**bearer(tenant.token), "Content-Type": "application/json"},
                        body=json.dumps({"query": "{ datasets(first: 1) { totalCount } }"}))
        assert r.status_code == 429 and "RateLimit" in r.headers
