"""Workspaces: create (creator is Admin, switches by token exchange), read, list, change, residency
rules, replication acknowledgement, domain-join."""
from __future__ import annotations

import json

from chalice.test import Client

from chalicelib.core import audit
from chalicelib.core.tenancy import membership
from chalicelib.core.workspace_settings import settings_of
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.grants.token_exchange import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import add_member, call, user_token


def _events(region: str, ws: str, action: str) -> list[dict]:
    return [e for e in audit.iter_chain(region, ws) if e["action"] == action]


def test_create_workspace_then_switch_by_token_exchange(tenant: Tenant) -> None:
    platform, identity = Client(create_app("platform")), Client(create_app("identity"))
    status, body, headers = call(platform, "POST", "/v1/workspaces", tenant.token,
                                 {"name": "Zürich Research", "residency": "eu-central", "enforce_mfa": True})
    assert status == 201, body
    assert body["slug"] == "zurich-research"
    assert body["residency"] == "eu-central"
    assert body["replication"] == "none"
    assert body["enforce_mfa"] is True
    assert body["role"] == "admin"
    assert headers["Location"] == f"/v1/workspaces/{body['id']}"
    hint = body["token_exchange"]
    assert hint["grant_type"] == TOKEN_EXCHANGE
    assert hint["workspace_id"] == body["id"]
    new_id = body["id"]
    # the creator's current token is for the old workspace: the new one answers 404 until they switch
    assert call(platform, "GET", f"/v1/workspaces/{new_id}", tenant.token)[0] == 404
    form = (f"grant_type={TOKEN_EXCHANGE}&subject_token={tenant.token}&subject_token_type={ACCESS_TOKEN_TYPE}"
            f"&workspace_id={new_id}")
    r = identity.http.post("/oauth2/token", headers={"Content-Type": "application/x-www-form-urlencoded"}, body=form)
    assert r.status_code == 200, r.body
    new_token = json.loads(r.body)["access_token"]
    status, got, _ = call(platform, "GET", f"/v1/workspaces/{new_id}", new_token)
    assert status == 200
    assert {k: got[k] for k in ("id", "name", "slug", "residency", "replication", "enforce_mfa")} == {
        "id": new_id, "name": "Zürich Research", "slug": "zurich-research", "residency": "eu-central",
        "replication": "none", "enforce_mfa": True}
    assert got["created_at"].endswith("Z")
    assert membership(new_id, tenant.user_id).role == "admin"
    created = _events("eu-central-1", new_id, "workspace.created")
    assert created
    assert created[0]["actor"]["id"] == tenant.user_id


def test_us_default_replication_slug_suffix_and_listing(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    a = call(c, "POST", "/v1/workspaces", tenant.token, {"name": "Acme", "residency": "us-east"})[1]
    assert a["replication"] == "in-region-multi-az"
    assert a["slug"] == "acme-2"  # the tenant fixture already holds "acme"
    status, page1, _ = call(c, "GET", "/v1/workspaces?limit=1", tenant.token)
    assert status == 200
    assert len(page1["workspaces"]) == 1
    assert page1["has_more"] is True
    status, page2, _ = call(c, "GET", f"/v1/workspaces?limit=1&after={page1['next_cursor']}", tenant.token)
    assert status == 200
    assert page2["has_more"] is False
    ids = {w["id"] for w in page1["workspaces"] + page2["workspaces"]}
    assert ids == {tenant.workspace_id, a["id"]}
    assert all(w["role"] == "admin" for w in page1["workspaces"] + page2["workspaces"])


def test_br_south_gets_a_clear_answer(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    status, body, headers = call(c, "POST", "/v1/workspaces", tenant.token, {"name": "Rio", "residency": "br-south"})
    assert status == 422
    assert body["code"] == "residency_not_available"
    assert body["alternatives"] == ["us-east", "eu-central"]
    assert headers["Content-Type"] == "application/problem+json"


def test_residency_is_immutable(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    path = f"/v1/workspaces/{tenant.workspace_id}"
    for value in ("eu-central", "us-east"):
        status, body, _ = call(c, "PATCH", path, tenant.token, {"residency": value})
        assert status == 409
        assert body["code"] == "residency_immutable"
        assert "maintenance window" in body["detail"]
        assert "re-issued API keys" in body["detail"]
    assert call(c, "GET", path, tenant.token)[1]["residency"] == "us-east"


def test_patch_changes_fields_and_audits(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    path = f"/v1/workspaces/{tenant.workspace_id}"
    status, body, _ = call(c, "PATCH", path, tenant.token,
                           {"name": "Acme Corp", "enforce_mfa": True, "chat_auto_expiry": "P30D"})
    assert status == 200, body
    assert body["name"] == "Acme Corp"
    assert body["enforce_mfa"] is True
    assert body["settings"]["chat_auto_expiry"] == "P30D"
    assert body["slug"] == "acme"
    status, body, _ = call(c, "PATCH", path, tenant.token, {"chat_auto_expiry": None})
    assert status == 200
    assert body["settings"]["chat_auto_expiry"] is None
    updates = _events(tenant.region, tenant.workspace_id, "workspace.updated")
    assert updates[0]["details"]["changes"]["name"] == {"from": "Acme", "to": "Acme Corp"}
    for bad in ({"chat_auto_expiry": "30 days"}, {"chat_auto_expiry": "P1Y"}, {"chat_auto_expiry": "PT5M"}):
        assert call(c, "PATCH", path, tenant.token, bad)[0] == 400


def test_enforcing_mfa_needs_an_mfa_sign_in(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    from chalicelib.identity.oauth.signing import issue_access_token

    pwd_only, _ = issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                                     roles=["admin"], amr=["pwd"])
    status, body, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", pwd_only, {"enforce_mfa": True})
    assert status == 403
    assert body["code"] == "mfa_required"


def test_cross_region_dr_on_eu_needs_acknowledgement_and_names_the_admin(stack: None) -> None:
    from tests.functional.conftest import make_tenant

    eu = make_tenant("dpo@example.eu", "eu-central", "Euro")
    c = Client(create_app("platform"))
    path = f"/v1/workspaces/{eu.workspace_id}"
    status, body, _ = call(c, "PATCH", path, eu.token, {"replication": "cross-region-dr"})
    assert status == 422
    assert body["code"] == "acknowledgement_required"
    status, body, _ = call(c, "PATCH", path, eu.token,
                           {"replication": "cross-region-dr", "acknowledge_data_leaves_region": False})
    assert status == 422
    assert call(c, "GET", path, eu.token)[1]["replication"] == "none"
    assert not _events("eu-central-1", eu.workspace_id, "workspace.replication_changed")
    status, body, _ = call(c, "PATCH", path, eu.token,
                           {"replication": "cross-region-dr", "acknowledge_data_leaves_region": True},
                           headers={"X-Correlation-Id": "corr-dr-ack-0001"})
    assert status == 200
    assert body["replication"] == "cross-region-dr"
    assert body["replication_secondary_region"] == "eu-west-1"
    [event] = _events("eu-central-1", eu.workspace_id, "workspace.replication_changed")
    assert event["actor"] == {"type": "user", "id": eu.user_id, "email": eu.email}
    assert event["details"]["acknowledged_by"] == {"type": "user", "id": eu.user_id, "email": eu.email}
    assert event["details"]["data_leaves_region"] is True
    assert event["correlation_id"] == "corr-dr-ack-0001"


def test_cross_region_dr_on_us_needs_no_acknowledgement(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    status, body, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", tenant.token,
                           {"replication": "cross-region-dr"})
    assert status == 200
    assert body["replication_secondary_region"] == "us-west-2"


def test_domain_join_by_verified_domain_makes_a_member(stack: None) -> None:
    from tests.functional.conftest import make_tenant

    owner = make_tenant("boss@acme.io", "us-east", "Acme IO")
    other = make_tenant("someone@elsewhere.org", "us-east", "Elsewhere")
    c = Client(create_app("platform"))
    ws_path = f"/v1/workspaces/{owner.workspace_id}"
    # only the Admin's own verified domain may be opened
    status, body, _ = call(c, "PATCH", ws_path, owner.token, {"domain_join": {"enabled": True, "domain": "evil.com"}})
    assert status == 422
    assert body["code"] == "domain_not_yours"
    status, body, _ = call(c, "PATCH", ws_path, owner.token, {"domain_join": {"enabled": True}})
    assert status == 200
    assert body["settings"]["domain_join"] == {"enabled": True, "domain": "acme.io"}
    # a verified acme.io user (signed in to their own workspace) sees it and joins as Member
    joiner_user = users.create_user("dev@ACME.io", email_verified=True)
    joiner_token = user_token(joiner_user.id, joiner_user.email, other.workspace_id, "admin")
    status, body, _ = call(c, "GET", "/v1/joinable-workspaces", joiner_token)
    assert status == 200
    assert [w["id"] for w in body["workspaces"]] == [owner.workspace_id]
    status, body, _ = call(c, "POST", f"{ws_path}/join", joiner_token)
    assert status == 201
    assert body["membership"]["role"] == "member"
    assert body["membership"]["joined_via"] == "domain_join"
    assert call(c, "POST", f"{ws_path}/join", joiner_token)[1]["code"] == "already_member"
    assert call(c, "GET", "/v1/joinable-workspaces", joiner_token)[1]["workspaces"] == []
    # unverified address or other domain: not joinable, and join answers 404
    unverified = users.create_user("new@acme.io", email_verified=False)
    t = user_token(unverified.id, unverified.email, other.workspace_id, "admin")
    assert call(c, "GET", "/v1/joinable-workspaces", t)[1]["workspaces"] == []
    assert call(c, "POST", f"{ws_path}/join", t)[0] == 404
    assert call(c, "POST", f"{ws_path}/join", other.token)[0] == 404
    # disabling closes it
    assert call(c, "PATCH", ws_path, owner.token, {"domain_join": {"enabled": False}})[0] == 200
    late = users.create_user("late@acme.io", email_verified=True)
    t = user_token(late.id, late.email, other.workspace_id, "admin")
    assert call(c, "GET", "/v1/joinable-workspaces", t)[1]["workspaces"] == []
    assert call(c, "POST", f"{ws_path}/join", t)[0] == 404


def test_api_tokens_cannot_act_at_user_level(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    api_token = user_token(tenant.user_id, tenant.email, tenant.workspace_id, "admin", token_use="api")
    status, body, _ = call(c, "POST", "/v1/workspaces", api_token, {"name": "X", "residency": "us-east"})
    assert status == 403
    assert body["code"] == "user_token_required"


def test_removed_member_loses_access_at_once(tenant: Tenant) -> None:
    c = Client(create_app("platform"))
    viewer = add_member(tenant.workspace_id, "v@example.com", "viewer")
    assert call(c, "GET", f"/v1/workspaces/{tenant.workspace_id}", viewer.token)[0] == 200
    assert call(c, "DELETE", f"/v1/workspaces/{tenant.workspace_id}/members/{viewer.user_id}", tenant.token)[0] == 204
    # the token is still valid, but the membership is gone: refused by the shared route wrapper
    for path in (f"/v1/workspaces/{tenant.workspace_id}", "/v1/audit/events?from=2020-01-01T00:00:00Z"):
        status, body, _ = call(c, "GET", path, viewer.token)
        assert status == 403
        assert body["code"] == "membership_revoked"


def test_concurrent_settings_change_is_a_409_not_a_lost_update(tenant: Tenant, monkeypatch) -> None:
    from chalicelib.core.tenancy import WorkspaceAttrs, workspaces
    from chalicelib.platform.workspaces import service as svc

    real = svc._write_update

    def racing(ws, actions, old, add, remove):  # type: ignore[no-untyped-def]
        workspaces()(ws.id).update(actions=[WorkspaceAttrs.settings.set('{"chat_auto_expiry": "P7D"}')])
        return real(ws, actions, old, add, remove)

    monkeypatch.setattr(svc, "_write_update", racing)
    c = Client(create_app("platform"))
    status, body, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}", tenant.token, {"chat_auto_expiry": "P1D"})
    assert status == 409
    assert body["code"] == "concurrent_update"
    assert settings_of(workspaces().get(tenant.workspace_id))["chat_auto_expiry"] == "P7D"
