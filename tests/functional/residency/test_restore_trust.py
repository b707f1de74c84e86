"""Two-person restore, attacked: a sock-puppet Admin, a promoted member, a removed, a demoted and an
MFA-less approver never make the second person; every Admin hears of a request; and a restore never
brings back a revoked invitation, support grant, API token or connector secret (the revocation ledger is
replayed)."""
from __future__ import annotations

from typing import Any

from chalice.test import Client

from chalicelib.core import audit, aws, process_state, tokens
from chalicelib.core.store.tables import global_model
from chalicelib.gateway import models as gateway_models
from chalicelib.gateway.ingest.connectors import open_config, sealed_secrets
from chalicelib.groups import create_app
from chalicelib.identity.models import ApiTokenAttrs
from chalicelib.identity.oauth.signing import issue_access_token
from chalicelib.platform.models import invitation_claims
from chalicelib.platform.support import service as support
from chalicelib.residency import backups, revocations
from tests.functional.conftest import Tenant, bearer, make_tenant
from tests.functional.gateway.local_api import LocalApi
from tests.functional.identity.account.test_routes import call as account_call
from tests.functional.identity.account.test_routes import sign_in
from tests.functional.identity.helpers import body, make_password_user
from tests.functional.platform.helpers import User, add_member, call, user_token
from tests.functional.residency.helpers import seed, snapshot
from tests.functional.residency.jobs import run_residency_jobs

LONG = 5 * 86400


def _backup(t: Tenant) -> str:
    seed(t.workspace_id, t.region)
    return str(backups.create(t.region, t.workspace_id)["id"])


def _changed_after_backup(t: Tenant) -> dict[str, Any]:
    """Change content after the backup, so a restore that ran would show."""
    aws.client("dynamodb", t.region).delete_item(TableName=aws.table_name("agents"),
                                                 Key={"workspace_id": {"S": t.workspace_id}, "id": {"S": "agt_a"}})
    return snapshot(t.workspace_id, t.region)


def _request(c: Client, t: Tenant, backup_id: str, token: str) -> str:
    status, req, _ = call(c, "POST", f"/v1/backups/{backup_id}/restore-requests", token)
    assert status == 201, req
    return str(req["id"])


def _approve(c: Client, backup_id: str, rid: str, token: str) -> tuple[int, Any]:
    status, out, _ = call(c, "POST", f"/v1/backups/{backup_id}/restore-requests/{rid}/approve", token)
    return status, out


def _state(c: Client, t: Tenant, backup_id: str, rid: str) -> dict[str, Any]:
    return call(c, "GET", f"/v1/backups/{backup_id}/restore-requests/{rid}", t.token)[1]


def _actions(t: Tenant) -> list[str]:
    return [e["action"] for e in audit.iter_chain(t.region, t.workspace_id) if e["action"].startswith("backup.restore")]


def _nothing_restored(c: Client, t: Tenant, backup_id: str, rid: str, now: dict[str, Any]) -> None:
    assert run_residency_jobs(t.region) == [] or _state(c, t, backup_id, rid)["status"] != "restored"
    assert snapshot(t.workspace_id, t.region) == now


def test_a_sock_puppet_admin_invited_after_the_request_cannot_approve(tenant: Tenant) -> None:
    """The sole Admin requests a restore, invites a second account of her own as Admin, accepts with it
    and approves: refused; the request stays pending and nothing is restored."""
    backup_id = _backup(tenant)
    _changed_after_backup(tenant)
    c = Client(create_app("platform"))
    rid = _request(c, tenant, backup_id, tenant.token)
    base = f"/v1/workspaces/{tenant.workspace_id}/invitations"
    status, inv, _ = call(c, "POST", base, tenant.token, {"email": "puppet@example.com", "role": "admin"})
    assert status == 201, inv
    puppet = make_tenant("puppet@example.com", name="Puppet's own")
    assert call(c, "POST", f"{base}/{inv['id']}/accept", puppet.token)[0] == 201
    as_admin = user_token(puppet.user_id, puppet.email, tenant.workspace_id, "admin")
    assert call(c, "GET", "/v1/backups", as_admin)[0] == 200  # she really is an Admin now
    now = snapshot(tenant.workspace_id, tenant.region)
    status, out = _approve(c, backup_id, rid, as_admin)
    assert status == 403, out
    assert out["code"] == "approver_not_admin_before_request"
    state = _state(c, tenant, backup_id, rid)
    assert (state["status"], state["approvals"]) == ("pending", [tenant.user_id])
    _nothing_restored(c, tenant, backup_id, rid, now)
    assert _actions(tenant) == ["backup.restore_requested"]


def test_a_member_promoted_after_the_request_cannot_approve(tenant: Tenant) -> None:
    backup_id = _backup(tenant)
    now = _changed_after_backup(tenant)
    member = add_member(tenant.workspace_id, "mo@example.com", "member")
    c = Client(create_app("platform"))
    rid = _request(c, tenant, backup_id, tenant.token)
    status, _, _ = call(c, "PATCH", f"/v1/workspaces/{tenant.workspace_id}/members/{member.user_id}", tenant.token,
                        {"role": "admin"})
    assert status == 200
    status, out = _approve(c, backup_id, rid, user_token(member.user_id, member.email, tenant.workspace_id, "admin"))
    assert (status, out["code"]) == (403, "approver_not_admin_before_request")
    _nothing_restored(c, tenant, backup_id, rid, now)


def test_an_approver_without_a_second_factor_is_refused(tenant: Tenant) -> None:
    backup_id = _backup(tenant)
    now = _changed_after_backup(tenant)
    second = add_member(tenant.workspace_id, "second@example.com", "admin")
    c = Client(create_app("platform"))
    one_factor, _ = issue_access_token(user_id=second.user_id, email=second.email, workspace_id=tenant.workspace_id,
                                       roles=["admin"], amr=["pwd"])
    # the requester needs a second factor too (her approval counts)
    owner_pwd, _ = issue_access_token(user_id=tenant.user_id, email=tenant.email, workspace_id=tenant.workspace_id,
                                      roles=["admin"], amr=["pwd"])
    status, out, _ = call(c, "POST", f"/v1/backups/{backup_id}/restore-requests", owner_pwd)
    assert (status, out["code"]) == (403, "mfa_required")
    rid = _request(c, tenant, backup_id, tenant.token)
    status, out = _approve(c, backup_id, rid, one_factor)
    assert (status, out["code"]) == (403, "mfa_required")
    assert _state(c, tenant, backup_id, rid)["approvals"] == [tenant.user_id]
    _nothing_restored(c, tenant, backup_id, rid, now)
    assert _approve(c, backup_id, rid, second.token)[0] == 202  # the same Admin with a second factor


def test_a_removed_or_demoted_approval_stops_counting(tenant: Tenant) -> None:
    """The requester is demoted after asking: another Admin's approval is then the only one that counts,
    and the request stays pending until a third Admin agrees. An approver removed after the queueing:
    the worker counts again and refuses, audited, restoring nothing."""
    backup_id = _backup(tenant)
    now = _changed_after_backup(tenant)
    b = add_member(tenant.workspace_id, "b@example.com", "admin")
    d = add_member(tenant.workspace_id, "d@example.com", "admin")
    c = Client(create_app("platform"))
    rid = _request(c, tenant, backup_id, b.token)  # B asks
    ws = f"/v1/workspaces/{tenant.workspace_id}/members"
    assert call(c, "PATCH", f"{ws}/{b.user_id}", tenant.token, {"role": "member"})[0] == 200  # B is demoted
    status, out = _approve(c, backup_id, rid, tenant.token)
    assert (status, out["status"]) == (200, "pending")  # B's own approval no longer counts
    _nothing_restored(c, tenant, backup_id, rid, now)
    status, out = _approve(c, backup_id, rid, d.token)  # a third Admin from before the request
    assert (status, out["status"]) == (202, "queued")
    # D is removed after the queueing, before the worker runs
    assert call(c, "DELETE", f"{ws}/{d.user_id}", tenant.token)[0] == 204
    run_residency_jobs(tenant.region)
    state = _state(c, tenant, backup_id, rid)
    assert (state["status"], state["error"]) == ("failed", "approvals_no_longer_valid")
    assert snapshot(tenant.workspace_id, tenant.region) == now
    assert _actions(tenant)[-1] == "backup.restore_refused"


def test_every_admin_is_mailed_when_a_restore_is_requested(tenant: Tenant, outbox: Any) -> None:
    backup_id = _backup(tenant)
    b = add_member(tenant.workspace_id, "b@example.com", "admin")
    m = add_member(tenant.workspace_id, "m@example.com", "member")
    c = Client(create_app("platform"))
    rid = _request(c, tenant, backup_id, b.token)
    for admin in (tenant.email, b.email):
        [msg] = [x for x in outbox.messages(admin) if x["tag"] == "restore-requested"]
        assert rid in msg["text"] and b.email in msg["text"]
    assert not [x for x in outbox.messages(m.email) if x["tag"] == "restore-requested"]


def test_a_restore_never_brings_back_a_revoked_invitation_grant_or_api_token(tenant: Tenant) -> None:
    """Invitation, support grant and API token exist at the backup and are revoked after it; the restore
    puts the older rows back, and the replayed revocation ledger revokes each again: the invitee cannot
    join, the support engineer cannot enter, the token is refused."""
    p = Client(create_app("platform"))
    ws = tenant.workspace_id
    status, inv, _ = call(p, "POST", f"/v1/workspaces/{ws}/invitations", tenant.token,
                          {"email": "eve@example.com", "role": "admin"})
    assert status == 201
    staff_ws = make_tenant("sam@support.aiplatform.dev", name="Provider Support")
    support.register_staff(staff_ws.user_id, "Sam Support", "US")
    sam = User(staff_ws.user_id, staff_ws.email, user_token(staff_ws.user_id, staff_ws.email, staff_ws.workspace_id,
                                                            "admin", ttl=LONG))
    status, grant, _ = call(p, "POST", f"/v1/workspaces/{ws}/support-grants", tenant.token,
                            {"support_email": sam.email, "duration": "PT8H", "reason": "Ticket 1"})
    assert status == 201, grant
    owner = make_password_user(tenant.email)
    with Client(create_app("identity")) as idc:
        cookie = sign_in(idc, owner)
        created = body(account_call(idc, "POST", "/account/api-tokens", cookie,
                                    {"name": "ci", "workspace_id": ws, "expires_in_days": 7}))
        backup_id = str(backups.create(tenant.region, ws)["id"])  # all three live in the backup
        assert call(p, "DELETE", f"/v1/workspaces/{ws}/invitations/{inv['id']}", tenant.token)[0] == 200
        assert call(p, "DELETE", f"/v1/workspaces/{ws}/support-grants/{grant['id']}", tenant.token)[0] == 200
        assert account_call(idc, "DELETE", f"/account/api-tokens/{created['id']}", cookie).status_code == 200
    api_token = created["token"]
    assert p.http.get("/v1/me", headers=bearer(api_token)).status_code == 401
    # a restore of the global store (point in time, before the revocation) brings the token's record and
    # its revocation marker back to what they were: the token works again
    global_model(ApiTokenAttrs)(created["id"]).update(actions=[ApiTokenAttrs.revoked_at.remove()])
    global_model(tokens.RevokedTokenAttrs)(created["id"]).delete()
    process_state.reset_all()  # a container started after that restore: nothing cached
    assert p.http.get("/v1/me", headers=bearer(api_token)).status_code == 200
    second = add_member(ws, "second@example.com", "admin")
    rid = _request(p, tenant, backup_id, tenant.token)
    assert _approve(p, backup_id, rid, second.token)[0] == 202
    run_residency_jobs(tenant.region)
    state = _state(p, tenant, backup_id, rid)
    assert state["status"] == "restored", state
    assert state["report"]["tables"]["invitations"]["updated"] >= 1  # the pending invitation came back ...
    assert state["report"]["revocations_replayed"] == {"invitation": 1, "support_grant": 1, "api_token": 1,
                                                      "connector_secret": 0}
    # ... and is revoked again: the invitee cannot join
    got = call(p, "GET", f"/v1/workspaces/{ws}/invitations/{inv['id']}", tenant.token)[1]
    assert got["status"] == "revoked"
    claims = invitation_claims(tenant.region)
    assert not [x for x in claims.query(ws) if x.id.startswith("email#")]
    eve = make_tenant("eve@example.com", name="Eve's")
    status, out, _ = call(p, "POST", f"/v1/workspaces/{ws}/invitations/{inv['id']}/accept", eve.token)
    assert status in (404, 409), out
    assert call(p, "GET", "/v1/backups", user_token(eve.user_id, eve.email, ws, "admin"))[0] == 403
    # the grant is revoked again: the engineer cannot enter
    grants = call(p, "GET", f"/v1/workspaces/{ws}/support-grants", tenant.token)[1]["grants"]
    assert [g["status"] for g in grants] == ["revoked"]
    status, out, _ = call(p, "GET", f"/v1/support/workspaces/{ws}", sam.token)
    assert (status, out["code"]) == (403, "support_access_denied")
    # the token is refused again
    assert p.http.get("/v1/me", headers=bearer(api_token)).status_code == 401


def test_a_restore_never_brings_back_a_replaced_or_deleted_connector_secret(tenant: Tenant) -> None:
    """Two ``http`` connectors hold an API key at the backup; after it one key is replaced and the other
    connector deleted. The restore writes both old keys back, and the replayed ledger removes each again:
    both connectors are paused and ask for their credentials; no old key is used or stored."""
    ws = tenant.workspace_id
    g, p = Client(create_app("gateway")), Client(create_app("platform"))
    with LocalApi() as api:
        url = f"http://127.0.0.1:{api.port}/people"
        kept = call(g, "POST", "/v1/connectors", tenant.token,
                    {"name": "Kept", "kind": "http", "config": {"url": url, "api_key": "key-one"}})[1]
        gone = call(g, "POST", "/v1/connectors", tenant.token,
                    {"name": "Gone", "kind": "http", "config": {"url": url, "api_key": "key-gone"}})[1]
        backup_id = str(backups.create(tenant.region, ws)["id"])
        status, out, _ = call(g, "PATCH", f"/v1/connectors/{kept['id']}", tenant.token,
                              {"config": {"api_key": "key-two"}})
        assert status == 200, out
        assert call(g, "DELETE", f"/v1/connectors/{gone['id']}", tenant.token)[0] == 200
        second = add_member(ws, "second@example.com", "admin")
        rid = _request(p, tenant, backup_id, tenant.token)
        assert _approve(p, backup_id, rid, second.token)[0] == 202
        run_residency_jobs(tenant.region)
    state = _state(p, tenant, backup_id, rid)
    assert state["status"] == "restored", state
    assert state["report"]["revocations_replayed"]["connector_secret"] == 2
    table = gateway_models.connectors(tenant.region)
    for conn in (kept, gone):
        item = table.get(ws, conn["id"], consistent_read=True)  # the restore wrote it back ...
        assert sealed_secrets(item.config) == {}  # ... without the revoked key
        assert "api_key" not in open_config(item, tenant.region)
        shown = call(g, "GET", f"/v1/connectors/{conn['id']}", tenant.token)[1]
        assert shown["status"] == "PAUSED" and "credentials again" in shown["health"]["last_error"], shown
    # a second replay finds nothing left to revoke
    assert revocations.replay(tenant.region, ws)["connector_secret"] == 0
