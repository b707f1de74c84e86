"""Every platform route, table-driven: the role matrix (Admin/Member/Viewer get the spec's answer;
refused calls change nothing). Each route gets a fresh two-workspace scenario (allowed calls change it)."""
from __future__ import annotations

import pytest
from chalice.test import Client

from chalicelib.core.authz import PERMISSIONS
from chalicelib.core.web import ROUTE_PERMISSIONS
from chalicelib.groups import create_app
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
        perm = ROUTE_PERMISSIONS[("platform", r.key[1], r.method)]
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
    # refused roles first: they must change nothing
    order = sorted(route.roles, key=lambda role: (route.roles[role] != 403, role != "admin"))
    for role in order:
        expected = route.roles[role]
        before = scenario.snapshot() if expected == 403 else None
        status, body, headers = call(client, route.method, s.path(route.template), s.token(role), route.body)
        assert status == expected, (role, status, body)
        if expected == 403:
            assert headers["Content-Type"] == "application/problem+json"
            assert body["code"] in ("forbidden", "support_access_denied")
            assert scenario.snapshot() == before


