"""The audit trail newest first (order=newest): pages continue with older events, filters still apply,
and a bad order is 400."""
from __future__ import annotations

import pytest
from chalice.test import Client

from chalicelib.core import audit, clock
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call


@pytest.fixture
def client() -> Client:
    return Client(create_app("platform"))


def test_newest_first_pages_back_in_time(tenant: Tenant, client: Client) -> None:
    for i in range(12):
        audit.append(tenant.region, tenant.workspace_id, "test.even" if i % 2 == 0 else "test.odd",
                     actor=audit.Actor("user", "usr_1", "u1@example.com"), details={"i": i})
        clock.advance(1)
    seqs, cursor = [], None
    while True:
        q = "?order=newest&limit=5" + (f"&after={cursor}" if cursor else "")
        status, body, _ = call(client, "GET", "/v1/audit/events" + q, tenant.token)
        assert status == 200, body
        seqs += [e["seq"] for e in body["events"]]
        if not body["has_more"]:
            break
        cursor = body["next_cursor"]
    assert seqs == list(range(13, 0, -1))  # workspace.created + 12, newest first, each once
    odd = call(client, "GET", "/v1/audit/events?order=newest&action=test.odd&limit=2", tenant.token)[1]
    assert [e["details"]["i"] for e in odd["events"]] == [11, 9] and odd["has_more"]
    assert call(client, "GET", "/v1/audit/events?order=sideways", tenant.token)[0] == 400
    oldest = call(client, "GET", "/v1/audit/events?limit=3", tenant.token)[1]
    assert [e["seq"] for e in oldest["events"]] == [1, 2, 3]  # the default stays chain order
