"""The request scope's version items (docs/decisions.md, "Request scope"): AWS calls per request after quiet
(the clock moved past every former time-to-live: 5 s and 60 s, never slept), and a change of each piece made
in another container (the item written straight to DynamoDB with its version bumped, as that container's
write path does; nothing forgotten here) applying on the next request. A membership removed elsewhere:
``tests/functional/platform/test_round_trips.py``."""
from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.agents.runtime import worker
from chalicelib.core import aws, clock
from chalicelib.core.store import scope_versions
from chalicelib.gateway import demo
from chalicelib.groups import create_app
from chalicelib.identity.oauth import signing
from chalicelib.knowledge import store
from chalicelib.workers import jobs
from infra.local.workers import sqs_event
from tests.functional.agents.helpers import DEMO_PLAN_AGENT, create_agent, get_run, member, receive, start_run
from tests.functional.aws_calls import counting, route_calls
from tests.functional.chat import helpers as chat_helpers
from tests.functional.conftest import Tenant, bearer
from tests.functional.platform.helpers import call

QUIET = (0, 5, 60)  # seconds of quiet before the counted request: steady, past the former bounds, long after
CHAT_READS_MAX = 2  # the scope (one batch) and the catalog version check of the knowledge search
ME_MAX = 2
AGENT_RUN_MAX = 16
READS = ("GetItem", "BatchGetItem", "Query", "Scan", "GetObject")
SQL = "SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY n DESC, city LIMIT 2"


def _reads(calls: Counter[str]) -> int:
    return sum(n for k, n in calls.items() if k.split(" ")[1] in READS)


def _me(c: Client, token: str) -> Any:
    return c.http.get("/v1/me", headers=bearer(token))


def _elsewhere(subject: str, piece: str) -> None:
    """Another container's bump after its write (straight to DynamoDB: this process forgets nothing)."""
    aws.client("dynamodb", "us-east-1").update_item(
        TableName=aws.table_name(scope_versions.TABLE), Key=scope_versions.key(subject),
        UpdateExpression="ADD #p :one", ExpressionAttributeNames={"#p": piece},
        ExpressionAttributeValues={":one": {"N": "1"}})


def test_a_chat_after_quiet_reads_its_scope_once(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    chat_helpers.use_providers(monkeypatch, None)
    world = chat_helpers.build(tenant)
    seen = {}
    with clock.frozen(), Client(create_app("platform")) as c:
        assert call(c, "POST", "/v1/chats", world.member.token, chat_helpers.ask("How is travel booked?"))[0] == 201
        for quiet in QUIET:
            clock.advance(quiet)
            with counting() as calls:
                status, reply, _ = call(c, "POST", "/v1/chats", world.member.token,
                                        chat_helpers.ask("How many vacation days do employees get?"))
            assert status == 201, reply
            seen[quiet] = route_calls(calls)
    for quiet, calls in seen.items():
        assert _reads(calls) <= CHAT_READS_MAX, (quiet, dict(calls))
        # the version items, the watermark when due and the membership: one batch, whatever the quiet
        assert calls["dynamodb BatchGetItem revoked_tokens"] == 1, (quiet, dict(calls))
        assert not [k for k in calls if "model_access" in k or "Query knowledge" in k], (quiet, dict(calls))


def test_me_after_quiet_costs_one_read(tenant: Tenant) -> None:
    seen = {}
    with clock.frozen(), Client(create_app("platform")) as c:
        assert _me(c, tenant.token).status_code == 200
        for quiet in QUIET:
            clock.advance(quiet)
            with counting() as calls:
                assert _me(c, tenant.token).status_code == 200
            seen[quiet] = route_calls(calls)
    for quiet, calls in seen.items():
        assert sum(calls.values()) <= ME_MAX, (quiet, dict(calls))
        assert not [k for k in calls if "Query memberships" in k], (quiet, dict(calls))  # the listing is kept


def test_an_agent_run_after_quiet_stays_within_its_target(tenant: Tenant) -> None:
    demo.seed(tenant.workspace_id, tenant.region, tenant.email, on_changed=jobs.index_changed_dataset)
    user = member(tenant.workspace_id)
    with clock.frozen(), Client(create_app("platform")) as c:
        agent = create_agent(c, user.token, DEMO_PLAN_AGENT)
        for quiet in QUIET:
            run = start_run(c, user.token, agent["id"], {"topic": "customers", "sql": SQL})[1]
            msgs = receive(tenant.region)
            clock.advance(quiet)
            with counting() as calls:
                result = worker.handle(sqs_event(msgs, tenant.region, "arn:aws:sqs:us-east-1:000000000000:agent-runs"))
            assert result["batchItemFailures"] == []
            assert get_run(c, user.token, agent["id"], run["id"])["status"] == "completed"
            assert sum(calls.values()) <= AGENT_RUN_MAX, (quiet, dict(calls))
            assert calls["dynamodb GetItem revoked_tokens"] <= 1, (quiet, dict(calls))  # once per delivery


def test_enforce_mfa_set_in_another_container_applies_on_the_next_request(tenant: Tenant) -> None:
    pwd_only = signing.issue_access_token(user_id=tenant.user_id, email=tenant.email,
                                          workspace_id=tenant.workspace_id, roles=["admin"], amr=["pwd"])[0]
    with clock.frozen(), Client(create_app("platform")) as c:
        assert _me(c, pwd_only).status_code == 200
        aws.client("dynamodb", "us-east-1").update_item(
            TableName=aws.table_name("workspaces"), Key={"id": {"S": tenant.workspace_id}},
            UpdateExpression="SET enforce_mfa = :t", ExpressionAttributeValues={":t": {"BOOL": True}})
        assert _me(c, pwd_only).status_code == 200  # the entry is kept while its version stands
        _elsewhere(tenant.workspace_id, scope_versions.DIRECTORY)
        r = _me(c, pwd_only)
    assert r.status_code == 403 and json.loads(r.body)["code"] == "mfa_required"


def test_an_allow_list_set_in_another_container_applies_on_the_next_request(tenant: Tenant) -> None:
    with clock.frozen(), Client(create_app("platform")) as c:
        before = call(c, "GET", "/v1/models/allow-list", tenant.token)
        assert before[0] == 200 and before[1] == {"roles": {}}
        aws.client("dynamodb", tenant.region).put_item(
            TableName=aws.table_name("model_access"),
            Item={"workspace_id": {"S": tenant.workspace_id}, "allow": {"S": '{"member": ["builtin/extractive"]}'},
                  "updated_at": {"S": clock.iso()}, "updated_by": {"S": tenant.user_id}})
        _elsewhere(tenant.workspace_id, scope_versions.MODELS)
        after = call(c, "GET", "/v1/models/allow-list", tenant.token)
    assert after[1] == {"roles": {"member": ["builtin/extractive"]}}


def test_an_allow_list_set_here_bumps_the_version(tenant: Tenant) -> None:
    with Client(create_app("platform")) as c:
        before = scope_versions.parse(aws.client("dynamodb", "us-east-1").get_item(
            TableName=aws.table_name(scope_versions.TABLE), Key=scope_versions.key(tenant.workspace_id)).get("Item"))
        assert call(c, "PUT", "/v1/models/allow-list", tenant.token,
                    {"roles": {"member": ["builtin/extractive"]}})[0] == 200
        after = scope_versions.parse(aws.client("dynamodb", "us-east-1").get_item(
            TableName=aws.table_name(scope_versions.TABLE), Key=scope_versions.key(tenant.workspace_id)).get("Item"))
    assert after[scope_versions.MODELS] == before[scope_versions.MODELS] + 1


def test_an_index_published_in_another_container_is_searched_from_the_next_request(tenant: Tenant) -> None:
    ws, region = tenant.workspace_id, tenant.region
    with scope_versions.unit():
        assert store.manifests(region, ws).indexes == {}
    aws.client("dynamodb", region).put_item(TableName=aws.table_name("knowledge"), Item={
        "workspace_id": {"S": ws}, "key": {"S": "index#ds_elsewhere"}, "dataset_id": {"S": "ds_elsewhere"},
        "updated_at": {"S": clock.iso()}})
    with scope_versions.unit(), counting() as calls:
        assert store.manifests(region, ws).indexes == {}  # kept while the version stands: no query
    assert not [k for k in calls if k.startswith("dynamodb Query")], dict(calls)
    _elsewhere(ws, scope_versions.KNOWLEDGE)
    with scope_versions.unit():
        assert set(store.manifests(region, ws).indexes) == {"ds_elsewhere"}


def test_a_membership_added_in_another_container_is_listed_on_the_next_request(tenant: Tenant) -> None:
    with clock.frozen(), Client(create_app("platform")) as c:
        assert [w["workspace_id"] for w in json.loads(_me(c, tenant.token).body)["workspaces"]] == [tenant.workspace_id]
        aws.client("dynamodb", "eu-central-1").put_item(TableName=aws.table_name("memberships"), Item={
            "workspace_id": {"S": "ws_elsewhere"}, "user_id": {"S": tenant.user_id}, "role": {"S": "member"},
            "email": {"S": tenant.email}, "joined_at": {"S": clock.iso()}})
        _elsewhere(tenant.user_id, scope_versions.MEMBERSHIPS)
        listed = json.loads(_me(c, tenant.token).body)["workspaces"]
    assert {(w["workspace_id"], w["region"]) for w in listed} == {(tenant.workspace_id, tenant.region),
                                                                 ("ws_elsewhere", "eu-central-1")}
