"""The `make run` SSO demo starts a real provider and routes its domain to SSO."""
from __future__ import annotations

import json
import os

import pytest
from chalice.test import Client

from chalicelib.groups import create_app
from infra import sso_demo
from tests.functional.conftest import Tenant, _moto, stack, tenant  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not sso_demo.available() and not os.environ.get("CI"), reason="run `make system-deps` (npm ci of the peer)")]


def test_sso_demo_routes_its_domain(tenant: Tenant) -> None:  # noqa: F811 (fixture)
    demo = sso_demo.start_sso_demo(tenant.workspace_id, tenant.user_id)
    assert demo is not None
    try:
        with Client(create_app("identity")) as client:
            found = client.http.post("/signin/start", body=json.dumps({"email": demo.email}),
                                     headers={"Content-Type": "application/json"}).json_body
            assert found["next"] == "sso" and found["provider"]["name"] == "Demo corporate IdP"
            start = client.http.get("/sso/start?domain=" + demo.domain)
            assert start.status_code == 302 and start.headers["Location"].startswith(demo.issuer + "/")
    finally:
        demo.stop()
