import json

from chalice.test import Client

from chalicelib.groups import create_app
from tests.functional.conftest import Tenant, bearer


def test_me_returns_identity_of_token(tenant: Tenant) -> None:
    with Client(create_app("platform")) as client:
        r = client.http.get("/v1/me", headers=bearer(tenant.token))
    assert r.status_code == 200, r.body
    body = json.loads(r.body)
    assert body["user_id"] == tenant.user_id
    assert body["workspace_id"] == tenant.workspace_id
    assert body["workspace"]["slug"] == "acme"
    assert r.headers["X-Correlation-Id"]
