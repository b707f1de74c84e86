"""AWS round trips per request, counted (not timed): a regression above a target fails here.

GET /v1/me: at most 2 once the container knows the caller (the listing of the caller's workspaces, one
query per region); the token's revocation state, the membership and the directory entry are cached per
container for their bounds (``tokens.REVOCATION_CACHE_SECONDS``, ``tenancy.SCOPE_CACHE_SECONDS``).
A repeated federated query (its sandbox cached): the catalog version check and the lineage write, nothing
per dataset, column or policy."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import aws, clock, tenancy, tokens
from chalicelib.groups import create_app
from chalicelib.identity.oauth import signing
from tests.functional.aws_calls import counting, route_calls
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import World, build_world, query

ME_TARGET = 2


def _me(client: Client, token: str) -> Any:
    return client.http.get("/v1/me", headers=bearer(token))


def _fresh_token(t: Tenant) -> str:
    return signing.issue_access_token(user_id=t.user_id, email=t.email, workspace_id=t.workspace_id,
                                      roles=["admin"], amr=["pwd", "mfa"])[0]


def test_me_costs_at_most_two_round_trips_once_the_container_knows_the_caller(tenant: Tenant) -> None:
    with Client(create_app("platform")) as client:
        with counting() as first:
            assert _me(client, tenant.token).status_code == 200
        with counting() as again:
            assert _me(client, tenant.token).status_code == 200
        fresh = _fresh_token(tenant)
        with counting() as new_token:
            assert _me(client, fresh).status_code == 200
    first, again, new_token = route_calls(first), route_calls(again), route_calls(new_token)
    assert sum(again.values()) <= ME_TARGET, again
    assert sum(new_token.values()) <= ME_TARGET, new_token  # a new token of a known user: no revocation read
    assert all("Query memberships" in call for call in again), again
    # the container's first request also loads the key ring and reads the revocation watermark, the
    # membership and the directory entry, once each
    assert sum(first.values()) <= ME_TARGET + 4, first
    assert first["dynamodb GetItem memberships"] == 1 and first["dynamodb GetItem workspaces"] == 1


def test_me_reads_again_after_the_bound(tenant: Tenant) -> None:
    with clock.frozen(), Client(create_app("platform")) as client:
        assert _me(client, tenant.token).status_code == 200
        clock.advance(max(tenancy.SCOPE_CACHE_SECONDS, tokens.REVOCATION_CACHE_SECONDS))
        with counting() as later:
            assert _me(client, tenant.token).status_code == 200
    assert later["dynamodb GetItem memberships"] == 1
    assert later["dynamodb GetItem revoked_tokens"] == 1  # the watermark, shared by every user


def test_a_member_removed_here_is_refused_at_once(tenant: Tenant) -> None:
    from chalicelib.core.tenancy import memberships

    with Client(create_app("platform")) as client:
        token = _fresh_token(tenant)
        assert _me(client, token).status_code == 200
        memberships(tenant.region)(tenant.workspace_id, tenant.user_id).delete()
        r = _me(client, token)
    assert r.status_code == 403 and json.loads(r.body)["code"] == "membership_revoked"


def test_a_member_removed_in_another_container_is_refused_within_the_bound(tenant: Tenant) -> None:
    """The removal written straight to DynamoDB (as another container's write would land): this container
    answers from its cache until the bound, then refuses."""
    ddb = aws.client("dynamodb", tenant.region)
    with clock.frozen(), Client(create_app("platform")) as client:
        assert _me(client, tenant.token).status_code == 200
        ddb.delete_item(TableName=aws.table_name("memberships"),
                        Key={"workspace_id": {"S": tenant.workspace_id}, "user_id": {"S": tenant.user_id}})
        clock.advance(tenancy.SCOPE_CACHE_SECONDS - 1)
        assert _me(client, tenant.token).status_code == 200  # within the bound
        clock.advance(1)
        r = _me(client, tenant.token)
    assert r.status_code == 403 and json.loads(r.body)["code"] == "membership_revoked"


def test_enforce_mfa_set_in_another_container_applies_within_the_bound(tenant: Tenant) -> None:
    ddb = aws.client("dynamodb", "us-east-1")
    pwd_only = signing.issue_access_token(user_id=tenant.user_id, email=tenant.email,
                                          workspace_id=tenant.workspace_id, roles=["admin"], amr=["pwd"])[0]
    with clock.frozen(), Client(create_app("platform")) as client:
        assert _me(client, pwd_only).status_code == 200
        ddb.update_item(TableName=aws.table_name("workspaces"), Key={"id": {"S": tenant.workspace_id}},
                        UpdateExpression="SET enforce_mfa = :t", ExpressionAttributeValues={":t": {"BOOL": True}})
        clock.advance(tenancy.SCOPE_CACHE_SECONDS)
        r = _me(client, pwd_only)
    assert r.status_code == 403 and json.loads(r.body)["code"] == "mfa_required"


@pytest.fixture
def world(tenant: Tenant) -> Iterator[World]:
    yield from build_world(tenant)


QUERY_TARGET = 2


def test_a_federated_query_counts_its_round_trips(world: World) -> None:
    sql = "SELECT c.country, count(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY 1"
    status, _ = query(world, sql)
    assert status == 200
    with counting() as again:
        status, body = query(world, sql)
    assert status == 200, body
    again = route_calls(again)
    assert sum(again.values()) <= QUERY_TARGET, again  # the catalog version check and the lineage write
    assert again["dynamodb GetItem catalog_versions"] == 1
