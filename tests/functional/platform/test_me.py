"""GET /v1/me for every kind of caller: bound to a workspace, with no workspace yet, removed, unauthenticated."""
from __future__ import annotations

import json

from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token
from tests.functional.conftest import Tenant, bearer
from tests.functional.platform.helpers import add_member, call


def _no_workspace_token(email: str) -> tuple[str, str]:
    user = users.find_by_email(email) or users.create_user(email, email_verified=True)
    token, _ = issue_access_token(user_id=user.id, email=user.email, workspace_id="", roles=[], amr=["pwd"])
    return user.id, token


def test_new_user_without_workspace_is_told_how_to_create_or_join_one(stack: None) -> None:
    user_id, token = _no_workspace_token("newcomer@example.com")
    status, body, headers = call(Client(create_app("platform")), "GET", "/v1/me", token)
    assert status == 200, body
    assert body["user_id"] == user_id
    assert body["workspace_id"] is None
    assert body["workspace"] is None
    assert body["roles"] == []
    assert body["workspaces"] == []
    actions = [s["action"] for s in body["next_steps"]]
    assert actions == ["create", "join", "accept_invitation"]
    assert body["next_steps"][0]["path"] == "/v1/workspaces"
    assert body["next_steps"][0]["method"] == "POST"
    assert headers["X-Correlation-Id"]


def test_member_elsewhere_without_workspace_token_is_offered_the_switch(tenant: Tenant) -> None:
    _, token = _no_workspace_token(tenant.email)  # the owner, signed in without choosing a workspace
    status, body, _ = call(Client(create_app("platform")), "GET", "/v1/me", token)
    assert status == 200, body
    assert [w["workspace_id"] for w in body["workspaces"]] == [tenant.workspace_id]
    switch = body["next_steps"][0]
    assert switch["action"] == "switch"
    assert switch["token_exchange"]["workspace_id"] == tenant.workspace_id


def test_workspace_token_still_describes_the_workspace_with_live_role(tenant: Tenant) -> None:
    bob = add_member(tenant.workspace_id, "bob@example.com", "viewer")
    status, body, _ = call(Client(create_app("platform")), "GET", "/v1/me", bob.token)
    assert status == 200
    assert body["workspace"]["id"] == tenant.workspace_id
    assert body["roles"] == ["viewer"]
    assert "next_steps" not in body


def test_removed_member_is_refused_and_no_token_is_401(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    bob = add_member(tenant.workspace_id, "bob@example.com", "member")
    assert call(c, "DELETE", f"/v1/workspaces/{tenant.workspace_id}/members/{bob.user_id}", tenant.token)[0] in (200, 204)
    status, body, _ = call(c, "GET", "/v1/me", bob.token)
    assert status == 403
    assert body["code"] == "membership_revoked"
    status, body, _ = call(c, "GET", "/v1/me")
    assert status == 401
    status, body, _ = call(c, "GET", "/v1/me", "not-a-jwt")
    assert status == 401


def test_me_returns_identity_of_token(tenant: Tenant) -> None:
    with Client(create_app("platform")) as client:
        r = client.http.get("/v1/me", headers=bearer(tenant.token))
    assert r.status_code == 200, r.body
    body = json.loads(r.body)
    assert body["user_id"] == tenant.user_id
    assert body["workspace_id"] == tenant.workspace_id
    assert body["workspace"]["slug"] == "acme"
    assert r.headers["X-Correlation-Id"]
