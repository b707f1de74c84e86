"""Every route acts with the caller's membership as stored now, not the role frozen in the token."""
from __future__ import annotations

import json
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.core import clock, tenancy
from chalicelib.core.tenancy import memberships, workspaces_of
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token
from tests.functional.conftest import Tenant, bearer, make_tenant


def _member_token(t: Tenant, email: str, role: str) -> tuple[str, str]:
    user = users.create_user(email, email_verified=True)
    memberships(t.region)(t.workspace_id, user.id, role=role, email=email, joined_at=clock.iso()).save()
    token, _ = issue_access_token(user_id=user.id, email=email, workspace_id=t.workspace_id, roles=[role],
                                  amr=["pwd", "otp", "mfa"], ttl=30 * 24 * 3600, extra={"token_use": "api"})
    return user.id, token


def test_removed_member_is_refused_everywhere_at_once(tenant: Tenant) -> None:
    bob_id, bob = _member_token(tenant, "bob@example.com", "member")
    gateway, platform = Client(create_app("gateway")), Client(create_app("platform"))
    assert gateway.http.get("/v1/connectors", headers=bearer(bob)).status_code == 200
    assert platform.http.get("/v1/me", headers=bearer(bob)).status_code == 200
    r = platform.http.delete(f"/v1/workspaces/{tenant.workspace_id}/members/{bob_id}", headers=bearer(tenant.token))
    assert r.status_code in (200, 204), r.body
    for client, path in ((gateway, "/v1/connectors"), (gateway, "/v1/catalog/datasets"), (platform, "/v1/me")):
        refused = client.http.get(path, headers=bearer(bob))
        assert refused.status_code == 403, path
        assert json.loads(refused.body)["code"] == "membership_revoked", path


def test_demoted_admin_acts_with_the_new_role(tenant: Tenant) -> None:
    carol_id, carol = _member_token(tenant, "carol@example.com", "admin")
    platform = Client(create_app("platform"))
    body = json.dumps({"name": "Renamed by Carol"})
    headers = {**bearer(carol), "Content-Type": "application/json"}
    assert platform.http.patch(f"/v1/workspaces/{tenant.workspace_id}", headers=headers, body=body).status_code == 200
    r = platform.http.patch(f"/v1/workspaces/{tenant.workspace_id}/members/{carol_id}",
                            headers={**bearer(tenant.token), "Content-Type": "application/json"},
                            body=json.dumps({"role": "viewer"}))
    assert r.status_code == 200, r.body
    again = platform.http.patch(f"/v1/workspaces/{tenant.workspace_id}", headers=headers, body=body)
    assert again.status_code == 403  # the token still says admin; the membership says viewer
    gateway = Client(create_app("gateway"))
    assert gateway.http.get("/v1/catalog/datasets", headers=bearer(carol)).status_code == 403  # viewer: no knowledge
    assert platform.http.get("/v1/audit/events?from=2020-01-01T00:00:00Z", headers=bearer(carol)).status_code == 200


def test_work_done_for_a_member_acts_with_their_live_role_and_groups(tenant: Tenant) -> None:
    """Queued answers, agent runs and exports act as the member is now: the role and groups of the live
    membership (a group's grant reaches them), and nobody once they left."""
    from chalicelib.core.tenancy import acting_member, forget_scopes

    cls = memberships(tenant.region)
    m = cls.get(tenant.workspace_id, tenant.user_id)
    m.update(actions=[cls.groups.add({"grp_readers"}), cls.role.set("member")])
    forget_scopes()
    who = acting_member(tenant.workspace_id, tenant.user_id, email=tenant.email, amr="chat_answer", token_id="msg_1")
    assert who is not None
    assert (who.roles, who.groups, who.amr, who.datasets) == (("member",), frozenset({"grp_readers"}), ("chat_answer",), None)
    m.delete()
    forget_scopes()
    assert acting_member(tenant.workspace_id, tenant.user_id, email=tenant.email, amr="agent_run", token_id="run_1") is None


def test_a_users_workspaces_come_from_every_region_at_once_and_never_in_part(tenant: Tenant,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``workspaces_of`` lists the user's memberships of both regions (the other region's read overlapping this
    one's); when one region's read fails the listing fails, rather than answering the workspaces of one region."""
    eu = make_tenant(tenant.email, residency="eu-central", name="Acme EU")
    assert {(w["workspace_id"], w["region"]) for w in workspaces_of(tenant.user_id)} == {
        (tenant.workspace_id, "us-east-1"), (eu.workspace_id, "eu-central-1")}

    other = make_tenant("dana@example.com", name="Dana US")
    make_tenant("dana@example.com", residency="eu-central", name="Dana EU")
    real = tenancy._memberships_in

    def eu_down(region: str, user_id: str) -> list[dict[str, Any]]:
        if region == "eu-central-1":
            raise RuntimeError("eu-central-1 did not answer")
        return real(region, user_id)

    monkeypatch.setattr(tenancy, "_memberships_in", eu_down)
    with pytest.raises(RuntimeError, match="did not answer"):
        workspaces_of(other.user_id)
    monkeypatch.setattr(tenancy, "_memberships_in", real)
    assert len(workspaces_of(other.user_id)) == 2  # the failure was not kept as a listing
