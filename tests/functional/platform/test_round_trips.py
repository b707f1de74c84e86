"""AWS round trips per request, counted (not timed): a regression above a target fails here.

GET /v1/me: one call once the container knows the caller (the request's scope batch: the workspace's and
the user's version items, the membership and, when due, the revocation watermark; the listing of the
caller's workspaces is kept while the user's version stands: docs/decisions.md, "Request scope").
A repeated federated query (its sandbox cached): the scope batch, the catalog version check and the lineage
write, nothing per dataset, column or policy."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import aws, clock, tokens
from chalicelib.groups import create_app
from chalicelib.identity.oauth import signing
from tests.functional.aws_calls import counting, route_calls
from tests.functional.conftest import Tenant, bearer
from tests.functional.gateway.data import World, build_world, query

ME_TARGET = 2
SCOPE_BATCH = "dynamodb BatchGetItem revoked_tokens"  # versions, membership, due watermark: one call


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
    assert again == {SCOPE_BATCH: 1}, again
    # the container's first request also loads the key ring, the directory entry and the listing
    assert sum(first.values()) <= ME_TARGET + 4, first
    assert first["dynamodb GetItem workspaces"] == 1 and first[SCOPE_BATCH] == 1


def test_me_reads_the_watermark_with_its_scope_after_the_bound(tenant: Tenant) -> None:
    with clock.frozen(), Client(create_app("platform")) as client:
        assert _me(client, tenant.token).status_code == 200
        clock.advance(tokens.REVOCATION_CACHE_SECONDS)
        reads = tokens.verifier().revocations.reads
        with counting() as later:
            assert _me(client, tenant.token).status_code == 200
    assert route_calls(later) == {SCOPE_BATCH: 1}, later  # the watermark rides on the scope's batch
    assert tokens.verifier().revocations.reads == reads + 1


def test_a_member_removed_here_is_refused_at_once(tenant: Tenant) -> None:
    from chalicelib.core.tenancy import memberships

    with Client(create_app("platform")) as client:
        token = _fresh_token(tenant)
        assert _me(client, token).status_code == 200
        memberships(tenant.region)(tenant.workspace_id, tenant.user_id).delete()
        r = _me(client, token)
    assert r.status_code == 403 and json.loads(r.body)["code"] == "membership_revoked"


def test_a_member_removed_in_another_container_is_refused_on_the_next_request(tenant: Tenant) -> None:
    """The removal written straight to DynamoDB (as another container's write would land): the membership
    is read with every request, so no time needs to pass."""
    ddb = aws.client("dynamodb", tenant.region)
    with clock.frozen(), Client(create_app("platform")) as client:
        assert _me(client, tenant.token).status_code == 200
        ddb.delete_item(TableName=aws.table_name("memberships"),
                        Key={"workspace_id": {"S": tenant.workspace_id}, "user_id": {"S": tenant.user_id}})
        r = _me(client, tenant.token)
    assert r.status_code == 403 and json.loads(r.body)["code"] == "membership_revoked"


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
    assert sum(again.values()) <= QUERY_TARGET, again  # the scope (the catalog version with it), the lineage write
    assert again[SCOPE_BATCH] == 1
    assert again["dynamodb GetItem catalog_versions"] == 0  # read in the scope's batch
