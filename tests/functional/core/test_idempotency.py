"""``Idempotency-Key`` under concurrency, on every route that starts work: 16 requests with one key at
once give exactly one effect and one audit event; every other request gets the replay (the same
resource) or ``409 request_in_progress``; the same key with another body is ``409
idempotency_key_reused``; another user's same key is a request of its own; the record keeps a
reference (ids), never the answer or personal data, and erasure removes a user's records."""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.agents import models as agent_models
from chalicelib.chat.models import chats
from chalicelib.core import audit, aws
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store import idempotency
from chalicelib.gateway import demo
from chalicelib.gateway import models as gw_models
from chalicelib.groups import create_app
from chalicelib.platform.models import invitations
from chalicelib.residency import erasure
from tests.functional.agents.helpers import DEMO_PLAN_AGENT, member, queue_depth
from tests.functional.chat import helpers as chat_helpers
from tests.functional.conftest import Outbox, Tenant
from tests.functional.platform.helpers import call

N = 16


@dataclass
class World:
    tenant: Tenant
    agent_id: str
    connector_id: str
    owner_token: str
    member_token: str  # a second user of the same workspace (Member)
    member_id: str
    second_admin_token: str  # another Admin (for the Admin-only routes)


@dataclass(frozen=True)
class Route:
    name: str
    group: str
    path: Callable[[World], str]
    body: dict[str, Any]
    other_body: dict[str, Any]
    token: Callable[[World], str]
    other_user_token: Callable[[World], str]
    statuses: tuple[int, ...]
    action: str  # the audit event of the effect
    effects: Callable[[World], int]  # how many effects exist
    other_user_body: dict[str, Any] | None = None  # what the other user sends with the same key (default: body)


def _runs(w: World) -> int:
    return len(list(agent_models.runs(w.tenant.region).query(w.tenant.workspace_id)))


def _chats(w: World) -> int:
    return len(list(chats(w.tenant.region).query(w.tenant.workspace_id)))


def _syncs(w: World) -> int:
    return len([r for r in gw_models.sync_runs(w.tenant.region).query(w.tenant.workspace_id)
                if r.connector_id == w.connector_id])


def _invitations(w: World) -> int:
    return len([i for i in invitations(w.tenant.region).query(w.tenant.workspace_id) if i.id.startswith("inv_")])


def _workspaces(w: World) -> int:
    from chalicelib.core.tenancy import workspaces

    return len([ws for ws in workspaces().scan() if ws.name == "Concurrent Co"])


ROUTES = (
    Route("agent run", "platform", lambda w: f"/v1/agents/{w.agent_id}/runs",
          {"input": {"topic": "customers", "sql": "SELECT 1 AS one"}}, {"input": {"topic": "orders", "sql": "SELECT 2"}},
          lambda w: w.member_token, lambda w: w.owner_token, (202,), "agent_run.created", _runs),
    Route("chat", "platform", lambda w: "/v1/chats", chat_helpers.ask("How is travel booked?"),
          chat_helpers.ask("How many vacation days?"), lambda w: w.member_token, lambda w: w.owner_token, (201,),
          "chat.answered", _chats),
    Route("sync", "gateway", lambda w: f"/v1/connectors/{w.connector_id}/sync", {"mode": "FULL_REFRESH"},
          {"mode": "INCREMENTAL"}, lambda w: w.owner_token, lambda w: w.second_admin_token, (202,),
          "connector.sync_requested", _syncs),
    Route("invitation", "platform", lambda w: f"/v1/workspaces/{w.tenant.workspace_id}/invitations",
          {"email": "newcomer@example.com", "role": "member"}, {"email": "newcomer@example.com", "role": "viewer"},
          lambda w: w.owner_token, lambda w: w.second_admin_token, (201,), "invitation.created",
          _invitations, {"email": "second.newcomer@example.com", "role": "member"}),
    Route("workspace", "platform", lambda w: "/v1/workspaces", {"name": "Concurrent Co", "residency": "us-east"},
          {"name": "Other Co", "residency": "us-east"}, lambda w: w.owner_token,
          lambda w: w.second_admin_token, (201,), "workspace.created", _workspaces),
)


@pytest.fixture
def world(tenant: Tenant, outbox: Outbox, monkeypatch: pytest.MonkeyPatch) -> World:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email)
    chat_helpers.use_providers(monkeypatch, None)
    chat_helpers.build(tenant)
    with Client(create_app("platform")) as c:
        status, agent, _ = call(c, "POST", "/v1/agents", tenant.token, DEMO_PLAN_AGENT)
        assert status == 201, agent
    with Client(create_app("gateway")) as g:
        status, conns, _ = call(g, "GET", "/v1/connectors", tenant.token)
        assert status == 200, conns
    m = member(tenant.workspace_id)
    second = member(tenant.workspace_id, "admin")
    return World(tenant, agent["id"], conns["connectors"][0]["id"], tenant.token, m.token, m.user_id, second.token)


def _audited(w: World, action: str) -> int:
    if action == "workspace.created":
        from chalicelib.core.tenancy import workspaces

        return sum(1 for ws in workspaces().scan() if ws.name == "Concurrent Co"
                   for e in audit.iter_chain(ws.region, ws.id) if e["action"] == action)
    return sum(1 for e in audit.iter_chain(w.tenant.region, w.tenant.workspace_id) if e["action"] == action)


def _at_once(route: Route, w: World, token: str, key: str) -> list[tuple[int, Any, dict[str, str]]]:
    clients = [Client(create_app(route.group)) for _ in range(N)]  # one app each: Chalice keeps one request
    barrier = threading.Barrier(N)
    answers: list[Any] = [None] * N

    def send(i: int) -> None:
        barrier.wait()
        answers[i] = call(clients[i], "POST", route.path(w), token, route.body, headers={"Idempotency-Key": key})

    threads = [threading.Thread(target=send, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_sixteen_concurrent_requests_with_one_key_make_one_effect(world: World, route: Route) -> None:
    before = route.effects(world)
    before_events = _audited(world, route.action)
    answers = _at_once(route, world, route.token(world), "same-key-1")
    ok = [a for a in answers if a[0] in route.statuses]
    busy = [a for a in answers if a[0] == 409]
    assert len(ok) + len(busy) == N, [a[:2] for a in answers if a[0] not in (*route.statuses, 409)]
    assert all(b[1]["code"] == "request_in_progress" for b in busy)
    assert all(b[2].get("Retry-After") for b in busy)
    assert ok, "no request did the work"
    assert len({a[1]["id"] for a in ok}) == 1  # every success names the one resource
    assert sum(1 for a in ok if a[2].get("Idempotent-Replayed") != "true") == 1  # and one of them made it
    assert route.effects(world) == before + 1
    assert _audited(world, route.action) == before_events + 1
    # a later retry replays it (re-read: the resource as it is now)
    with Client(create_app(route.group)) as c:
        status, again, headers = call(c, "POST", route.path(world), route.token(world), route.body,
                                      headers={"Idempotency-Key": "same-key-1"})
        assert status in route.statuses
        assert again["id"] == ok[0][1]["id"]
        assert headers.get("Idempotent-Replayed") == "true"
        # the same key with another body is refused, and does nothing
        status, refused, _ = call(c, "POST", route.path(world), route.token(world), route.other_body,
                                  headers={"Idempotency-Key": "same-key-1"})
        assert status == 409
        assert refused["code"] == "idempotency_key_reused"
        assert route.effects(world) == before + 1
        # another user's same key is their own request
        status, theirs, headers = call(c, "POST", route.path(world), route.other_user_token(world),
                                       route.other_user_body or route.body, headers={"Idempotency-Key": "same-key-1"})
        assert status in route.statuses, theirs
        assert theirs["id"] != ok[0][1]["id"]
        assert headers.get("Idempotent-Replayed") != "true"
    assert route.effects(world) == before + 2
    assert _audited(world, route.action) == before_events + 2


def test_the_record_keeps_a_reference_never_the_answer(world: World) -> None:
    with Client(create_app("platform")) as c:
        status, run, _ = call(c, "POST", f"/v1/agents/{world.agent_id}/runs", world.member_token,
                              {"input": {"topic": "secret-topic-value", "sql": "SELECT 1"}},
                              headers={"Idempotency-Key": "ref-1"})
        assert status == 202
        status, inv, _ = call(c, "POST", f"/v1/workspaces/{world.tenant.workspace_id}/invitations", world.owner_token,
                              {"email": "private.person@example.com", "role": "member"},
                              headers={"Idempotency-Key": "ref-2"})
        assert status == 201
    stored = json.dumps(aws.client("dynamodb", world.tenant.region).scan(
        TableName=aws.table_name("idempotency"))["Items"])
    assert "secret-topic-value" not in stored
    assert "private.person" not in stored
    assert run["id"] in stored and inv["id"] in stored
    records = list(idempotency.model(world.tenant.region).query(world.member_id))
    assert [(r.state, json.loads(r.ref)) for r in records] == [("done", {"type": "agent_run", "id": run["id"]})]


def test_erasure_removes_the_users_records(world: World) -> None:
    with Client(create_app("platform")) as c:
        assert call(c, "POST", f"/v1/agents/{world.agent_id}/runs", world.member_token,
                    {"input": {"topic": "customers", "sql": "SELECT 1"}}, headers={"Idempotency-Key": "e-1"})[0] == 202
    assert list(idempotency.model(world.tenant.region).query(world.member_id))
    counts = erasure.erase_in_workspace(world.tenant.region, world.tenant.workspace_id, world.member_id, "")
    assert counts["idempotency"] == 1
    assert list(idempotency.model(world.tenant.region).query(world.member_id)) == []


def test_a_failed_request_releases_its_key(world: World) -> None:
    with Client(create_app("platform")) as c:
        status, err, _ = call(c, "POST", f"/v1/agents/{world.agent_id}/runs", world.member_token,
                              {"input": {"topic": "customers"}}, headers={"Idempotency-Key": "bad-1"})
        assert status == 400 and err["code"] == "missing_input"
        status, err, _ = call(c, "POST", f"/v1/workspaces/{world.tenant.workspace_id}/invitations", world.owner_token,
                              {"email": world.tenant.email, "role": "member"}, headers={"Idempotency-Key": "bad-2"})
        assert status == 409 and err["code"] == "already_member"
    assert queue_depth(world.tenant.region, "agent-runs") == 0
    assert [r.key for r in idempotency.model(world.tenant.region).query(world.tenant.user_id)
            if "invitations" in r.key] == []


def test_a_dead_holders_claim_is_taken_over_and_its_late_commit_refused(tenant: Tenant) -> None:
    """A holder that died mid-work leaves its claim in progress: after ``CLAIM_S`` the next request takes
    it over and does the work once; the dead holder's late commit (its effect with the done mark) is
    refused by the claim token, so nothing is done twice."""
    from chalicelib.core import clock
    from chalicelib.core.store.transact import Refused

    region, ws = tenant.region, tenant.workspace_id
    cls = idempotency.model(region)
    dead, _ = idempotency._claim(cls, "usr_x", f"{ws}#test#k", idempotency.fingerprint({"a": 1}))
    assert dead is not None
    effects: list[str] = []

    def work(label: str):  # type: ignore[no-untyped-def]
        def run() -> tuple[int, dict[str, str]]:
            audit.append(region, ws, "test.effect", actor=audit.SYSTEM, details={"by": label},
                         effects=lambda tx: idempotency.complete_in(tx, {"type": "test", "id": label}))
            effects.append(label)
            return 201, {"id": label}
        return run

    def replay(ref: dict[str, str]) -> tuple[int, dict[str, str]]:
        return 201, {"id": ref["id"]}

    with pytest.raises(ApiError) as busy:  # the claim is live: a duplicate waits, then 409
        idempotency.run(region, "usr_x", f"{ws}#test", "k", {"a": 1}, work("second"),
                        ref_of=lambda b: {"type": "test", "id": b["id"]}, replay=replay)
    assert busy.value.code == "request_in_progress"
    clock.advance(idempotency.CLAIM_S + 1)
    status, body, replayed = idempotency.run(region, "usr_x", f"{ws}#test", "k", {"a": 1}, work("second"),
                                             ref_of=lambda b: {"type": "test", "id": b["id"]}, replay=replay)
    assert (status, body, replayed) == (201, {"id": "second"}, False)
    token = idempotency._current.set(dead)  # the dead holder wakes up and commits
    try:
        with pytest.raises(Refused) as late:
            work("dead")()
    finally:
        idempotency._current.reset(token)
    assert "idempotency" in late.value.tags
    assert effects == ["second"]
    assert [e["details"]["by"] for e in audit.iter_chain(region, ws) if e["action"] == "test.effect"] == ["second"]
    assert idempotency.run(region, "usr_x", f"{ws}#test", "k", {"a": 1}, work("third"),
                           ref_of=lambda b: {"type": "test", "id": b["id"]}, replay=replay)[1:] == (
        {"id": "second"}, True)
