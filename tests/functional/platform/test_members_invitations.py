"""Members (list, role change, removal, last Admin) and invitations (create, e-mail, duplicate, accept,
revoke, expiry, idempotency, paging)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from chalice.test import Client

from chalicelib.core import audit, clock
from chalicelib.core.config import settings
from chalicelib.core.tenancy import get_workspace, membership, workspace_scope
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.platform.workspaces import members as members_svc
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import add_member, call, user_token


@pytest.fixture
def client() -> Client:
    return Client(create_app("platform"))


def test_list_members_with_cursor_paging(tenant: Tenant, client: Client) -> None:
    for i in range(4):
        add_member(tenant.workspace_id, f"m{i}@example.com", "member")
    path = f"/v1/workspaces/{tenant.workspace_id}/members"
    seen, cursor = [], None
    while True:
        status, body, _ = call(client, "GET", path + "?limit=2" + (f"&after={cursor}" if cursor else ""), tenant.token)
        assert status == 200, body
        seen += body["members"]
        if not body["has_more"]:
            break
        cursor = body["next_cursor"]
    assert len(seen) == 5
    assert len({m["user_id"] for m in seen}) == 5
    assert {m["role"] for m in seen} == {"admin", "member"}
    assert call(client, "GET", path + "?after=bm9wZQ", tenant.token)[0] == 400


def test_change_role_and_last_admin_rules(tenant: Tenant, client: Client) -> None:
    base = f"/v1/workspaces/{tenant.workspace_id}/members"
    # the only Admin can neither demote nor remove themselves
    status, body, _ = call(client, "PATCH", f"{base}/{tenant.user_id}", tenant.token, {"role": "member"})
    assert status == 409
    assert body["code"] == "last_admin"
    status, body, _ = call(client, "DELETE", f"{base}/{tenant.user_id}", tenant.token)
    assert status == 409
    assert body["code"] == "last_admin"
    other = add_member(tenant.workspace_id, "second@example.com", "member")
    status, body, _ = call(client, "PATCH", f"{base}/{other.user_id}", tenant.token, {"role": "admin"},
                           headers={"X-Correlation-Id": "corr-promote-0001"})
    assert status == 200
    assert body["role"] == "admin"
    # now two Admins: demoting one works, demoting the other then fails
    assert call(client, "PATCH", f"{base}/{tenant.user_id}", tenant.token, {"role": "viewer"})[0] == 200
    other_token = user_token(other.user_id, other.email, tenant.workspace_id, "admin")
    status, body, _ = call(client, "PATCH", f"{base}/{other.user_id}", other_token, {"role": "viewer"})
    assert status == 409
    assert body["code"] == "last_admin"
    assert membership(tenant.workspace_id, other.user_id).role == "admin"
    changed = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "member.role_changed"]
    assert changed[0]["details"] == {"from": "member", "to": "admin"}
    assert changed[0]["correlation_id"] == "corr-promote-0001"
    assert call(client, "PATCH", f"{base}/usr_nope", other_token, {"role": "viewer"})[0] == 404


def test_concurrent_demotion_is_stopped_by_the_conditional_write(tenant: Tenant, monkeypatch) -> None:
    """Two Admins demote each other at once: both read "another Admin exists", one write must fail."""
    other = add_member(tenant.workspace_id, "second@example.com", "admin")
    actor, scope = audit.Actor("user", tenant.user_id, tenant.email), workspace_scope(tenant.workspace_id)
    real = members_svc._other_admin
    stale = {}

    def racing_lookup(cls, ws, user_id):  # type: ignore[no-untyped-def]
        found = real(cls, ws, user_id)
        if user_id == tenant.user_id and "done" not in stale:
            stale["done"] = True
            # the other demotion lands between our read and our write
            members_svc.change_role(scope, other.user_id, "member", actor=actor)
        return found

    monkeypatch.setattr(members_svc, "_other_admin", racing_lookup)
    with pytest.raises(Exception) as err:
        members_svc.change_role(scope, tenant.user_id, "member", actor=actor)
    assert getattr(err.value, "code", "") == "last_admin"
    assert membership(tenant.workspace_id, tenant.user_id).role == "admin"
    assert membership(tenant.workspace_id, other.user_id).role == "member"


def test_remove_member_keeps_counter_and_audits(tenant: Tenant, client: Client) -> None:
    path = f"/v1/workspaces/{tenant.workspace_id}/invitations"
    inv = call(client, "POST", path, tenant.token, {"email": "x@example.com", "role": "member"})[1]
    invited = users.create_user("x@example.com", email_verified=True)
    t = user_token(invited.id, invited.email, tenant.workspace_id, "member")
    assert call(client, "POST", f"{path}/{inv['id']}/accept", t)[0] == 201
    assert get_workspace(tenant.workspace_id).member_count == 2
    assert call(client, "DELETE", f"/v1/workspaces/{tenant.workspace_id}/members/{invited.id}", tenant.token)[0] == 204
    assert get_workspace(tenant.workspace_id).member_count == 1
    assert membership(tenant.workspace_id, invited.id) is None
    removed = [e for e in audit.iter_chain(tenant.region, tenant.workspace_id) if e["action"] == "member.removed"]
    assert removed[0]["target"]["id"] == invited.id


def test_invitation_lifecycle(tenant: Tenant, client: Client, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MAIL_OUTBOX_DIR", str(tmp_path))
    settings.cache_clear()
    path = f"/v1/workspaces/{tenant.workspace_id}/invitations"
    status, inv, headers = call(client, "POST", path, tenant.token, {"email": "New.Person@Example.com", "role": "viewer"})
    assert status == 201, inv
    assert inv["email"] == "new.person@example.com"
    assert inv["role"] == "viewer"
    assert inv["status"] == "pending"
    assert inv["invited_by"] == {"id": tenant.user_id, "email": tenant.email}
    assert set(inv) >= {"id", "email", "role", "status", "expires_at", "created_at", "invited_by"}
    [mail] = [json.loads(p.read_text()) for p in tmp_path.iterdir()]
    assert mail["to"] == "new.person@example.com"
    assert inv["id"] in mail["text"]
    assert mail["tag"] == "invitation"
    # a second pending invitation for the same address (any case) is a 409
    status, body, _ = call(client, "POST", path, tenant.token, {"email": "NEW.person@example.com", "role": "admin"})
    assert status == 409
    assert body["code"] == "invitation_pending"
    # someone else cannot accept it, even signed in; same answer as an unknown invitation
    stranger = users.create_user("stranger@example.com", email_verified=True)
    st = user_token(stranger.id, stranger.email, tenant.workspace_id, "viewer")
    assert call(client, "POST", f"{path}/{inv['id']}/accept", st)[0] == 404
    # the invited address accepts (with a token of any workspace) and gets the inviter's role
    invitee = users.create_user("new.person@example.com", email_verified=True)
    other_ws = user_token(invitee.id, "New.Person@example.com", "ws_elsewhere", "admin")
    status, body, _ = call(client, "POST", f"{path}/{inv['id']}/accept", other_ws)
    assert status == 201, body
    assert body["membership"]["role"] == "viewer"
    assert body["invitation"]["status"] == "accepted"
    assert body["token_exchange"]["workspace_id"] == tenant.workspace_id
    assert membership(tenant.workspace_id, invitee.id).joined_via == "invitation"
    assert call(client, "POST", f"{path}/{inv['id']}/accept", other_ws)[1]["code"] in ("invitation_not_pending", "already_member")
    # accepted: inviting the member again is a 409
    assert call(client, "POST", path, tenant.token, {"email": "new.person@example.com", "role": "viewer"})[1]["code"] == "already_member"
    status, body, _ = call(client, "GET", f"{path}/{inv['id']}", tenant.token)
    assert status == 200
    assert body["status"] == "accepted"


def test_revoke_and_expiry(tenant: Tenant, client: Client) -> None:
    path = f"/v1/workspaces/{tenant.workspace_id}/invitations"
    inv = call(client, "POST", path, tenant.token, {"email": "a@example.com", "role": "member"})[1]
    status, body, _ = call(client, "DELETE", f"{path}/{inv['id']}", tenant.token)
    assert status == 200
    assert body["status"] == "revoked"
    assert call(client, "DELETE", f"{path}/{inv['id']}", tenant.token)[1]["code"] == "invitation_not_pending"
    invitee = users.create_user("a@example.com", email_verified=True)
    t = user_token(invitee.id, invitee.email, tenant.workspace_id, "member")
    status, body, _ = call(client, "POST", f"{path}/{inv['id']}/accept", t)
    assert status == 409
    assert body["status"] == "revoked"
    # after revocation the address may be invited again; that one expires after 7 days
    inv2 = call(client, "POST", path, tenant.token, {"email": "a@example.com", "role": "member"})[1]
    assert inv2["status"] == "pending"
    t = user_token(invitee.id, invitee.email, tenant.workspace_id, "member", ttl=10 * 86400)
    admin = user_token(tenant.user_id, tenant.email, tenant.workspace_id, "admin", ttl=10 * 86400)
    clock.advance(7 * 24 * 3600 + 1)
    assert call(client, "GET", f"{path}/{inv2['id']}", admin)[1]["status"] == "expired"
    status, body, _ = call(client, "POST", f"{path}/{inv2['id']}/accept", t)
    assert status == 409
    assert body["status"] == "expired"
    assert membership(tenant.workspace_id, invitee.id) is None
    # an expired invitation no longer blocks a new one
    assert call(client, "POST", path, admin, {"email": "a@example.com", "role": "member"})[0] == 201


def test_unverified_address_cannot_accept(tenant: Tenant, client: Client) -> None:
    path = f"/v1/workspaces/{tenant.workspace_id}/invitations"
    inv = call(client, "POST", path, tenant.token, {"email": "u@example.com", "role": "member"})[1]
    u = users.create_user("u@example.com", email_verified=False)
    status, body, _ = call(client, "POST", f"{path}/{inv['id']}/accept", user_token(u.id, u.email, "ws_x", "admin"))
    assert status == 403
    assert body["code"] == "email_not_verified"


def test_invitation_idempotency_and_paging(tenant: Tenant, client: Client) -> None:
    path = f"/v1/workspaces/{tenant.workspace_id}/invitations"
    key = {"Idempotency-Key": "invite-bob-1"}
    s1, b1, _ = call(client, "POST", path, tenant.token, {"email": "bob@example.com", "role": "member"}, headers=key)
    s2, b2, h2 = call(client, "POST", path, tenant.token, {"email": "bob@example.com", "role": "member"}, headers=key)
    assert s1 == s2 == 201
    assert b1["id"] == b2["id"]
    assert h2.get("Idempotent-Replayed") == "true"
    s3, b3, _ = call(client, "POST", path, tenant.token, {"email": "carol@example.com", "role": "member"}, headers=key)
    assert s3 == 409
    assert b3["code"] == "idempotency_key_reused"
    for name in ("d", "e", "f"):
        assert call(client, "POST", path, tenant.token, {"email": f"{name}@example.com", "role": "viewer"})[0] == 201
    status, page, _ = call(client, "GET", path + "?limit=3", tenant.token)
    assert status == 200
    assert len(page["invitations"]) == 3
    assert page["has_more"]
    rest = call(client, "GET", path + f"?limit=3&after={page['next_cursor']}", tenant.token)[1]
    assert len(rest["invitations"]) == 1
    assert not rest["has_more"]
    ids = [i["id"] for i in page["invitations"] + rest["invitations"]]
    assert ids == sorted(ids)
    assert len(set(ids)) == 4
