"""Support access grants: named, time-boxed, audited (grant, each use, refusal, revocation, expiry);
no live grant, no access."""
from __future__ import annotations

import pytest
from chalice.test import Client

from chalicelib.core import audit, clock
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.platform.support import service as support
from chalicelib.workers import jobs
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import User, call, user_token


@pytest.fixture
def client() -> Client:
    return Client(create_app("platform"))


@pytest.fixture
def staff(tenant: Tenant) -> User:
    """A provider support engineer: a directory user flagged as staff, signed in to their own workspace."""
    from tests.functional.conftest import make_tenant

    own = make_tenant("sam@support.aiplatform.dev", "us-east", "Provider Support")
    support.register_staff(own.user_id, "Sam Support", "US")
    return User(own.user_id, own.email, user_token(own.user_id, own.email, own.workspace_id, "admin", ttl=5 * 86400))


def _actions(t: Tenant) -> list[str]:
    return [e["action"] for e in audit.iter_chain(t.region, t.workspace_id)]


def test_no_grant_no_access(tenant: Tenant, staff: User, client: Client) -> None:
    status, body, _ = call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", staff.token)
    assert status == 403
    assert body["code"] == "support_access_denied"
    assert "Acme" not in str(body)
    assert "support.access_denied" in _actions(tenant)
    # unknown workspace: the same answer
    status, body, _ = call(client, "GET", "/v1/support/workspaces/ws_01AAAAAAAAAAAAAAAAAAAAAAAA", staff.token)
    assert status == 403
    assert body["code"] == "support_access_denied"
    # a workspace Admin who is not staff cannot use the support routes on their own workspace either
    assert call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", tenant.token)[0] == 403


def test_grant_use_revoke_and_expiry_are_audited(tenant: Tenant, staff: User, client: Client) -> None:
    base = f"/v1/workspaces/{tenant.workspace_id}/support-grants"
    status, grant, _ = call(client, "POST", base, tenant.token,
                            {"support_email": staff.email, "duration": "PT2H", "reason": "Ticket 4711: sync stuck"})
    assert status == 201, grant
    assert grant["status"] == "active"
    assert grant["support_user_id"] == staff.user_id
    status, body, _ = call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", staff.token,
                           headers={"X-Correlation-Id": "corr-support-use-1"})
    assert status == 200
    assert body["id"] == tenant.workspace_id
    assert body["support_grant"]["id"] == grant["id"]
    status, body, _ = call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}/audit/events?limit=5",
                           staff.token)
    assert status == 200
    assert body["events"][0]["action"] == "workspace.created"
    uses = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "support.access_used"]
    assert len(uses) == 2
    assert uses[0]["actor"] == {"type": "support", "id": staff.user_id, "email": staff.email}
    assert uses[0]["correlation_id"] == "corr-support-use-1"
    assert uses[0]["details"]["grant_id"] == grant["id"]
    # expiry: refused afterwards, and the expiry is audited once (scheduler and lazy check)
    admin = user_token(tenant.user_id, tenant.email, tenant.workspace_id, "admin", ttl=5 * 86400)
    clock.advance(2 * 3600 + 1)
    assert jobs.expire_support_grants({}) == {"expired_audited": 1}
    assert jobs.expire_support_grants({}) == {"expired_audited": 0}
    assert call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", staff.token)[0] == 403
    assert _actions(tenant).count("support.access_expired") == 1
    listed = call(client, "GET", base, admin)[1]["grants"]
    assert [g["status"] for g in listed] == ["expired"]
    # a new grant, revoked: refused at once, revocation audited
    g2 = call(client, "POST", base, admin, {"support_email": staff.email, "duration": "P1D", "reason": "again"})[1]
    assert call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", staff.token)[0] == 200
    status, body, _ = call(client, "DELETE", f"{base}/{g2['id']}", admin)
    assert status == 200
    assert body["status"] == "revoked"
    assert call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", staff.token)[0] == 403
    assert call(client, "DELETE", f"{base}/{g2['id']}", admin)[1]["code"] == "grant_not_active"
    actions = _actions(tenant)
    assert actions.count("support.access_granted") == 2
    assert "support.access_revoked" in actions


@pytest.mark.parametrize("body, code", [
    ({"support_email": "sam@support.aiplatform.dev", "duration": "PT73H", "reason": "too long"}, "validation_failed"),
    ({"support_email": "sam@support.aiplatform.dev", "duration": "P4D", "reason": "too long"}, "validation_failed"),
    ({"support_email": "sam@support.aiplatform.dev", "duration": "PT5M", "reason": "too short"}, "validation_failed"),
    ({"support_email": "sam@support.aiplatform.dev", "duration": "forever", "reason": "x" * 5}, "validation_failed"),
    ({"support_email": "owner@example.com", "duration": "PT1H", "reason": "not staff"}, "not_support_staff"),
])
def test_grant_bounds_and_named_staff_only(tenant: Tenant, staff: User, client: Client, body: dict, code: str) -> None:
    before = _actions(tenant)
    status, answer, _ = call(client, "POST", f"/v1/workspaces/{tenant.workspace_id}/support-grants", tenant.token, body)
    assert status in (400, 422)
    assert answer["code"] == code
    assert _actions(tenant) == before


def test_support_access_needs_mfa(tenant: Tenant, staff: User, client: Client) -> None:
    call(client, "POST", f"/v1/workspaces/{tenant.workspace_id}/support-grants", tenant.token,
         {"support_email": staff.email, "duration": "PT1H", "reason": "ticket"})
    from chalicelib.identity.oauth.signing import issue_access_token

    user = users.get_user(staff.user_id)
    pwd_only, _ = issue_access_token(user_id=user.id, email=user.email, workspace_id="ws_x", roles=["admin"], amr=["pwd"])
    status, body, _ = call(client, "GET", f"/v1/support/workspaces/{tenant.workspace_id}", pwd_only)
    assert status == 403
    assert body["code"] == "mfa_required"
