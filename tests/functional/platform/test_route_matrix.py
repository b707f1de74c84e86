"""Every platform route, table-driven: the role matrix (Admin/Member/Viewer get the spec's answer;
refused calls change nothing). Each route gets a fresh two-workspace scenario (allowed calls change it)."""
from __future__ import annotations

import pytest
from chalice.test import Client

from chalicelib.core.authz import PERMISSIONS
from chalicelib.groups import create_app, route_permissions
from tests.functional.platform import scenario
from tests.functional.platform.helpers import call
from tests.functional.platform.scenario import ROUTES, Route

APP = create_app("platform")
IDS = [f"{r.method} {r.template}" for r in ROUTES]


def test_every_owned_route_has_a_row() -> None:
    assert {r.key for r in ROUTES} == scenario.owned_routes()


def test_matrix_matches_the_permission_map() -> None:
    """The expected answers above agree with the one permission map (so the table cannot drift)."""
    for r in ROUTES:
        perm = route_permissions()[("platform", r.key[1], r.method)]
        for role, status in r.roles.items():
            if perm in ("public", "authenticated"):
                assert status != 403 or "support" in r.template, (r, role)
            else:
                allowed = any(x.value == role for x in PERMISSIONS[perm])
                assert (status != 403) == allowed, (r, role, perm)


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_role_matrix(stack: None, route: Route) -> None:
    s = scenario.build()
    client = Client(APP)
    # refused roles first: together they must change nothing
    refused = [role for role in sorted(route.roles) if route.roles[role] == 403]
    allowed = sorted((role for role in route.roles if route.roles[role] != 403), key=lambda role: role == "admin")
    before = scenario.snapshot() if refused else None
    for role in refused:
        status, body, headers = call(client, route.method, s.path(route.template), s.token(role), route.body)
        assert status == 403, (role, status, body)
        assert headers["Content-Type"] == "application/problem+json"
        assert body["code"] in ("forbidden", "support_access_denied", "operators_only")
    if refused:
        assert scenario.snapshot() == before
    for role in allowed:
        status, body, _ = call(client, route.method, s.path(route.template), s.token(role), route.body)
        assert status == route.roles[role], (role, status, body)
